package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// BenchmarkAppendSync appends groups of four 1 MiB records to a stream on
// the real disk and makes each group durable, reporting MB/s of durable
// payload. "serial" syncs after each Append; "pipelined" appends the next
// group while another goroutine's Sync of the previous one runs, as a node's
// writer does. Every 64 MiB it truncates what it wrote, so the disk does
// not fill.
func BenchmarkAppendSync(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchAppendSync(b, false) })
	b.Run("pipelined", func(b *testing.B) { benchAppendSync(b, true) })
}

func benchAppendSync(b *testing.B, pipelined bool) {
	s, err := Open(Config{Dir: b.TempDir(), Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pay := benchPayload(1 << 20)
	group := make([]Record, 4)
	synced := make(chan error, 1)
	synced <- nil
	b.SetBytes(int64(len(group) * len(pay)))
	seq := uint64(1)
	for i := 0; b.Loop(); i++ {
		for j := range group {
			group[j] = Record{Seq: seq, HLC: seq, Payload: pay}
			seq++
		}
		if err := s.Append("o", "bench", group); err != nil {
			b.Fatal(err)
		}
		if err := <-synced; err != nil {
			b.Fatal(err)
		}
		if i%16 == 15 {
			if err := s.Truncate("o", "bench", seq-1-4*8); err != nil {
				b.Fatal(err)
			}
		}
		if !pipelined {
			_, err := s.Sync()
			synced <- err
			continue
		}
		go func() {
			_, err := s.Sync()
			synced <- err
		}()
	}
	if err := <-synced; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead reads 1 MiB records back, one or four per Read, from a
// stream of 64 (in the page cache after the first pass), checksums
// checked.
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(map[int]string{1: "records=1", 4: "records=4"}[n], func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir(), Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			pay := benchPayload(1 << 20)
			for seq := uint64(1); seq <= 64; seq++ {
				if err := s.Append("o", "bench", []Record{{Seq: seq, Payload: pay}}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.Sync(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n * len(pay)))
			for i := 0; b.Loop(); i++ {
				from := uint64(i*n%64) + 1
				got, err := s.Read("o", "bench", from, n, 0)
				if err != nil || len(got) != min(n, 65-int(from)) {
					b.Fatalf("read %d: %d records, %v", from, len(got), err)
				}
			}
		})
	}
}

func benchPayload(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
