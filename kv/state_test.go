package kv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestApplyOrderDoesNotDecideTheWinner applies versions of one key from
// three origins in every order, some with equal HLCs, some with negative
// wall clocks, with and without watchers: the latest is always the one
// Version.Newer picks, although applying never reads what is stored.
func TestApplyOrderDoesNotDecideTheWinner(t *testing.T) {
	ents := []stabilizer.Entry{
		{Stream: stabilizer.StreamID{Origin: "a", Name: Stream}, Seq: 1, HLC: stabilizer.HLC{Wall: 100, Logical: 2}},
		{Stream: stabilizer.StreamID{Origin: "b", Name: Stream}, Seq: 1, HLC: stabilizer.HLC{Wall: 100, Logical: 2}},
		{Stream: stabilizer.StreamID{Origin: "c", Name: Stream}, Seq: 1, HLC: stabilizer.HLC{Wall: -5, Logical: 9}},
		{Stream: stabilizer.StreamID{Origin: "c", Name: Stream}, Seq: 2, HLC: stabilizer.HLC{Wall: 99, Logical: 7}},
	}
	for i := range ents {
		ents[i].Payload = encodeOp(opPut, "job/7", []byte(ents[i].Stream.Origin))
	}
	orders := [][]int{{0, 1, 2, 3}, {1, 0, 3, 2}, {3, 2, 1, 0}, {2, 1, 3, 0}}
	for _, order := range orders {
		for _, watch := range []bool{false, true} {
			s, closeNode := openState(t, "")
			var seen []string
			for _, i := range order {
				changed, err := s.apply(ents[i].Stream.Origin, ents[i:i+1], watch)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range changed {
					seen = append(seen, v.Origin)
				}
			}
			v, found, err := s.latest("job/7")
			if err != nil || !found || v.Origin != "b" || string(v.Value) != "b" {
				t.Errorf("order %v watch %v: latest %+v found %v err %v, want b's version", order, watch, v, found, err)
			}
			if !watch && len(seen) != 0 {
				t.Errorf("order %v: changes %v returned without watchers", order, seen)
			}
			if watch && (len(seen) == 0 || seen[len(seen)-1] != "b") {
				t.Errorf("order %v: watchers saw %v, want b last", order, seen)
			}
			if err := closeNode(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// openState opens a kv state on a node of its own, not started, in dir
// (a new folder when ""); close closes the node.
func openState(t testing.TB, dir string) (s *state, close func() error) {
	t.Helper()
	n, close := stabilizertest.OpenNode(t, "us-east-1", dir)
	ns, err := n.Namespace(namespace)
	if err != nil {
		t.Fatal(err)
	}
	s = &state{ns: ns}
	if err := s.open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, close
}

func put(t *testing.T, s *state, origin string, seq uint64, h stabilizer.HLC, key, value string, del bool) {
	t.Helper()
	kind := opPut
	if del {
		kind = opDelete
	}
	e := stabilizer.Entry{Stream: stabilizer.StreamID{Origin: origin, Name: Stream}, Seq: seq, HLC: h, Payload: encodeOp(kind, key, []byte(value))}
	if _, err := s.apply(origin, []stabilizer.Entry{e}, false); err != nil {
		t.Fatal(err)
	}
}

// TestScanReadsTheWinnerOfEachKey: keys that are prefixes of each other or
// hold 0x00 bytes, keys with many versions, equal HLCs from two origins,
// deletions and limits.
func TestScanReadsTheWinnerOfEachKey(t *testing.T) {
	s, _ := openState(t, "")
	h := func(w int64) stabilizer.HLC { return stabilizer.HLC{Wall: w} }
	put(t, s, "a", 1, h(10), "job", "a10", false)
	put(t, s, "a", 2, h(20), "job/1", "a20", false)
	put(t, s, "b", 1, h(20), "job/1", "b20", false) // tie: the greater origin wins
	put(t, s, "a", 3, h(5), "job/1", "a5", false)
	for i := range 50 {
		put(t, s, "a", uint64(4+i), h(int64(100+i)), "job/2", fmt.Sprintf("v%d", i), false)
	}
	put(t, s, "b", 2, h(30), "job/3", "", true) // deleted
	put(t, s, "a", 60, h(1), "job/3", "old", false)
	put(t, s, "a", 61, h(1), "job\x00x", "nul", false)
	put(t, s, "a", 62, h(1), "jo", "short", false)
	put(t, s, "a", 63, h(1), "kob", "other", false)

	scan := func(prefix string, limit int) string {
		var out []string
		if err := s.scan(prefix, limit, func(v Version) error {
			if v.Deleted {
				out = append(out, fmt.Sprintf("%q deleted", v.Key))
				return nil
			}
			out = append(out, fmt.Sprintf("%q=%s", v.Key, v.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	if got, want := scan("job", 0), `"job"=a10 "job\x00x"=nul "job/1"=b20 "job/2"=v49 "job/3" deleted`; got != want {
		t.Errorf("scan job:\n got %s\nwant %s", got, want)
	}
	if got, want := scan("", 2), `"jo"=short "job"=a10`; got != want {
		t.Errorf("scan with limit 2: got %s, want %s", got, want)
	}
	if got, want := scan("job/", 0), `"job/1"=b20 "job/2"=v49 "job/3" deleted`; got != want {
		t.Errorf("scan job/: got %s, want %s", got, want)
	}
	if v, found, err := s.at("job/2", h(120)); err != nil || !found || string(v.Value) != "v20" {
		t.Errorf("job/2 at 120: %+v %v %v", v, found, err)
	}
	if v, found, err := s.at("job/1", h(20)); err != nil || !found || string(v.Value) != "b20" {
		t.Errorf("job/1 at 20: %+v %v %v", v, found, err)
	}
	if _, found, err := s.at("job/1", h(4)); err != nil || found {
		t.Errorf("job/1 at 4: found %v, %v", found, err)
	}
}

func TestVersionKeyRoundTrip(t *testing.T) {
	for _, key := range []string{"", "a", "\x00", "a\x00b", "\x00\x00\xff", "job/7", "é\x01"} {
		k := appendVersionKey(nil, key, stabilizer.HLC{Wall: -3, Logical: 2}, "eu-west-1")
		got, plen, ok := splitVersionKey(k)
		if !ok || got != key || string(k[:plen]) != string(versionPrefix(key)) {
			t.Errorf("%q: split gives %q, %d, %v", key, got, plen, ok)
		}
	}
}

// TestOpenRefusesOtherLayouts: kv state without a layout mark (layout 1)
// or with another mark is refused with a message saying what to do; an
// empty namespace is marked.
func TestOpenRefusesOtherLayouts(t *testing.T) {
	n, _ := stabilizertest.OpenNode(t, "us-east-1", "")
	ns, err := n.Namespace(namespace)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ns.Set(ctx, []byte("ljob/7"), []byte("a version in layout 1")); err != nil {
		t.Fatal(err)
	}
	s := &state{ns: ns}
	if err := s.open(ctx); err == nil || !strings.Contains(err.Error(), "layout 1") || !strings.Contains(err.Error(), "move the site's data directory aside") {
		t.Errorf("layout 1: %v", err)
	}
	if err := ns.Set(ctx, []byte{keyFormat}, []byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := s.open(ctx); err == nil || !strings.Contains(err.Error(), "layout [9]") {
		t.Errorf("layout 9: %v", err)
	}
	s2, _ := openState(t, "")
	if v, err := s2.ns.Get([]byte{keyFormat}); err != nil || len(v) != 1 || v[0] != formatVersion {
		t.Errorf("a new store is not marked: %v %v", v, err)
	}
}
