package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestKeepGreatest offers random orders for a few keys across batches,
// flushes, compactions and a reopen, and checks that every read (point and
// scan) returns the greatest order offered so far with its own payload.
func TestKeepGreatest(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string][]byte{} // key -> greatest order so far
	check := func(when string) {
		t.Helper()
		for k, order := range want {
			v, err := s.AppGet("kv", []byte(k))
			if err != nil {
				t.Fatalf("%s: get %s: %v", when, k, err)
			}
			got, payload, err := SplitGreatest(v)
			if err != nil || !bytes.Equal(got, order) || string(payload) != "p-"+string(order) {
				t.Fatalf("%s: %s = order %q payload %q (%v), want order %q", when, k, got, payload, err, order)
			}
		}
		n := 0
		err := s.AppScanPrefix("kv", []byte("k"), func(k, v []byte) error {
			n++
			order, _, err := SplitGreatest(v)
			if err == nil && !bytes.Equal(order, want[string(k)]) {
				err = fmt.Errorf("scan: %s has order %q, want %q", k, order, want[string(k)])
			}
			return err
		})
		if err != nil || n != len(want) {
			t.Fatalf("%s: scan saw %d of %d keys: %v", when, n, len(want), err)
		}
	}
	for round := range 40 {
		var b Batch
		for range 1 + rng.IntN(6) {
			k := fmt.Sprintf("k%d", rng.IntN(5))
			order := fmt.Appendf(nil, "%04d", rng.IntN(10000))
			b.AppKeepGreatest("kv", []byte(k), GreatestValue(order, append([]byte("p-"), order...)))
			if bytes.Compare(order, want[k]) > 0 {
				want[k] = order
			}
		}
		if err := s.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("round %d", round))
		switch round % 10 {
		case 3:
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		case 6:
			if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
				t.Fatal(err)
			}
		case 9:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, dir)
		}
	}
	check("end")

	var b Batch
	b.AppDelete("kv", []byte("k0"))
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppGet("kv", []byte("k0")); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	b.Reset()
	b.AppKeepGreatest("kv", []byte("k0"), GreatestValue([]byte("0001"), []byte("p-0001")))
	if err := s.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	want["k0"] = []byte("0001") // lower than before the delete: the delete forgot it
	check("after delete and rewrite")
}

func TestKeepGreatestRejectsValuesWithoutOrder(t *testing.T) {
	s := openTest(t, t.TempDir())
	var b Batch
	b.AppKeepGreatest("kv", []byte("k"), []byte{0x05, 'a'})
	err := s.Write(context.Background(), &b)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `key "k"`) {
		t.Errorf("got %v, want ErrInvalid naming the key", err)
	}
}

// TestOpenRefusesOlderFormatClearly: a directory written with pebble's
// default merger cannot be opened with ours; the error says what to do.
func TestOpenRefusesOlderFormatClearly(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{Dir: dir, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "older storage format") {
		t.Errorf("got %v, want an error naming the directory and the older format", err)
	}
}
