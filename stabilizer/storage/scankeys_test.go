package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestAppScanKeys: the keys of one namespace only, within start and end,
// skipping ahead when fn names a next key, stopping at fn's error.
func TestAppScanKeys(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	for _, k := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		b.AppSet("ns", []byte(k), []byte("v"+k))
	}
	b.AppSet("other", []byte("a0"), []byte("x"))
	b.AppSet("ns2", []byte("a0"), []byte("x")) // a namespace whose name extends ns
	if err := s.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	scan := func(start, end string, skip func(k string) string) []string {
		t.Helper()
		var got []string
		var st, en []byte
		if start != "" {
			st = []byte(start)
		}
		if end != "" {
			en = []byte(end)
		}
		err := s.AppScanKeys("ns", st, en, func(k []byte) ([]byte, error) {
			got = append(got, string(k))
			if skip != nil {
				if n := skip(string(k)); n != "" {
					return []byte(n), nil
				}
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		name, start, end string
		skip             func(string) string
		want             []string
	}{
		{name: "all", want: []string{"a1", "a2", "a3", "b1", "b2", "c1"}},
		{name: "from", start: "a3", want: []string{"a3", "b1", "b2", "c1"}},
		{name: "to", end: "b2", want: []string{"a1", "a2", "a3", "b1"}},
		{name: "between", start: "a2", end: "b", want: []string{"a2", "a3"}},
		{name: "first of each letter", skip: func(k string) string { return string(k[0] + 1) },
			want: []string{"a1", "b1", "c1"}},
		{name: "next not ahead moves one key", skip: func(k string) string { return "a" },
			want: []string{"a1", "a2", "a3", "b1", "b2", "c1"}},
	} {
		if got := scan(c.start, c.end, c.skip); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := s.AppScanKeys("ns", nil, nil, func([]byte) ([]byte, error) { n++; return nil, stop })
	if err != stop || n != 1 {
		t.Fatalf("fn's error: %v after %d keys, want it as is after 1", err, n)
	}
	if err := s.AppScanKeys("", nil, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty namespace: %v", err)
	}
}

// TestAppScanKeysReadsNoValues: values separated into blob files are
// fetched by a scan that reads them (the check can fail) and not by
// AppScanKeys.
func TestAppScanKeysReadsNoValues(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	const n, size = 50, 16 << 10
	for i := range n {
		b.AppSet("ns", fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte{byte(i)}, size))
	}
	if err := s.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil { // into sstables, the values into blob files
		t.Fatal(err)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appPrefix("ns"), UpperBound: PrefixEnd(appPrefix("ns"))})
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if v, err := it.ValueAndErr(); err != nil || len(v) != size {
			t.Fatalf("value of %q: %d bytes, %v", it.Key(), len(v), err)
		}
	}
	read := it.Stats().InternalStats.SeparatedPointValue
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if read.ValueBytesFetched < n*size {
		t.Fatalf("reading every value fetched %d bytes of separated values, want at least %d: "+
			"the values were not separated, so this test shows nothing", read.ValueBytesFetched, n*size)
	}
	keys := 0
	stats, err := s.appScanKeys("ns", nil, nil, func([]byte) ([]byte, error) { keys++; return nil, nil })
	if err != nil || keys != n {
		t.Fatalf("scan keys: %d keys, %v", keys, err)
	}
	if f := stats.InternalStats.SeparatedPointValue.ValueBytesFetched; f != 0 {
		t.Fatalf("AppScanKeys fetched %d bytes of values", f)
	}
}
