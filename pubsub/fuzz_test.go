package pubsub

import (
	"slices"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// FuzzAudienceFrame: a peer's audience frame is network input; decoding
// never panics, and what it accepts encodes back to the same topics.
func FuzzAudienceFrame(f *testing.F) {
	a := newAudience(nil)
	a.mu.local["jobs.events"] = 1
	a.mu.local["ckpt.done"] = 2
	f.Add(a.encode())
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		topics, err := decodeTopics(frame)
		if err != nil {
			return
		}
		b := newAudience(nil)
		for k := range topics {
			b.mu.local[k] = 1
		}
		again, err := decodeTopics(b.encode())
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if !sameSet(topics, again) {
			t.Fatalf("%v became %v", slices.Sorted(mapKeys(topics)), slices.Sorted(mapKeys(again)))
		}
	})
}

// FuzzSeenID: the id index's values come from storage; decoding never
// panics and round-trips.
func FuzzSeenID(f *testing.F) {
	f.Add(encodeSeen("us-east-1", 42, hlcOf(7, 1)))
	f.Add([]byte("x\x00"))
	f.Fuzz(func(t *testing.T, v []byte) {
		s, ok := decodeSeen(v)
		if !ok {
			return
		}
		if got, ok := decodeSeen(encodeSeen(s.origin, s.seq, s.hlc)); !ok || got != s {
			t.Fatalf("%+v became %+v", s, got)
		}
	})
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func hlcOf(wall int64, logical uint32) stabilizer.HLC {
	return stabilizer.HLC{Wall: wall, Logical: logical}
}

// FuzzFloorRecord: retention's floor records come from storage; decoding
// never panics and round-trips.
func FuzzFloorRecord(f *testing.F) {
	f.Add(floorRecord{Seq: 42, Messages: 7, Bytes: 4096}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		r, ok := decodeFloor(v)
		if !ok {
			return
		}
		if got, ok := decodeFloor(r.encode()); !ok || got != r {
			t.Fatalf("%+v became %+v", r, got)
		}
	})
}
