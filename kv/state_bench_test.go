package kv

import (
	"fmt"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// benchState is a kv state holding keys job/00000.. with versions each,
// 256-byte values (WORKLOAD.md's job records are about that size).
func benchState(b *testing.B, keys, versions int) *state {
	b.Helper()
	s, _ := openState(b, "")
	value := make([]byte, 256)
	seq := uint64(0)
	for v := range versions {
		for k0 := 0; k0 < keys; k0 += 512 {
			var ents []stabilizer.Entry
			for k := k0; k < min(k0+512, keys); k++ {
				seq++
				ents = append(ents, stabilizer.Entry{Stream: stabilizer.StreamID{Origin: "us-east-1", Name: Stream}, Seq: seq,
					HLC: stabilizer.HLC{Wall: int64(1000*v + 1)}, Payload: encodeOp(opPut, fmt.Sprintf("job/%05d", k), value)})
			}
			if _, err := s.apply("us-east-1", ents, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkApply: batches of 64 new keys, as a busy site applies them.
func BenchmarkApply(b *testing.B) {
	s := benchState(b, 0, 0)
	value := make([]byte, 256)
	ents := make([]stabilizer.Entry, 64)
	seq := uint64(0)
	b.SetBytes(int64(len(ents) * len(value)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range ents {
			seq++
			ents[j] = stabilizer.Entry{Stream: stabilizer.StreamID{Origin: "eu-west-1", Name: Stream}, Seq: seq,
				HLC: stabilizer.HLC{Wall: int64(seq)}, Payload: encodeOp(opPut, fmt.Sprintf("ckpt/%08d", seq), value)}
		}
		if _, err := s.apply("eu-west-1", ents, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLatest: the winning version of one of 20,000 keys, 4 versions each.
func BenchmarkLatest(b *testing.B) {
	s := benchState(b, 20000, 4)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, found, err := s.latest(fmt.Sprintf("job/%05d", (i*7919)%20000)); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}

// BenchmarkScan100: the winners of 100 consecutive keys, 4 versions each.
func BenchmarkScan100(b *testing.B) {
	s := benchState(b, 20000, 4)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n := 0
		err := s.scan(fmt.Sprintf("job/%03d", (i*31)%200), 0, func(Version) error { n++; return nil })
		if err != nil || n != 100 {
			b.Fatal(n, err)
		}
	}
}
