package core_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// BenchmarkCoreReplicate3Sites measures the cores alone: three sites in one
// goroutine, an in-memory log without fsync, messages handed over directly.
// Each iteration appends batches of messages at one site and runs the
// cores until the `all` frontier covers them everywhere. It bounds what the
// driver can reach: whatever pebble and gRPC add comes on top.
func BenchmarkCoreReplicate3Sites(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			benchReplicate(b, size)
		})
	}
}

// BenchmarkCoreManyStreams measures what idle streams cost: 2000 streams
// exist, each iteration appends to one of them and runs until `all`
// covers it.
func BenchmarkCoreManyStreams(b *testing.B) {
	benchReplicateStreams(b, 256, 2000)
}

func benchReplicate(b *testing.B, size int) { benchReplicateStreams(b, size, 1) }

func benchReplicateStreams(b *testing.B, size, streams int) {
	schema := &frontier.Schema{Sites: []string{"a", "b", "c"}}
	var cores []*core.Core
	var stores []*simStore
	for i, name := range schema.Sites {
		st := newStore()
		c, err := core.New(core.Config{
			Site: name, Schema: schema, Storage: st, Rand: rand.New(rand.NewPCG(uint64(i), 0)),
			MaxBatchBytes: 1 << 20, MaxInflightBytes: 64 << 20,
		}, core.State{})
		if err != nil {
			b.Fatal(err)
		}
		cores, stores = append(cores, c), append(stores, st)
	}
	for _, c := range cores {
		for _, o := range schema.Sites {
			if o != c.Site() {
				if err := c.Connected(o); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	var queue []core.Message
	now := int64(0)
	pump := func() {
		for busy := true; busy; {
			busy = false
			for i, c := range cores {
				for c.HasReady() {
					busy = true
					rd := c.Ready()
					st := stores[i]
					for _, e := range rd.Entries {
						st.log[e.Stream] = append(st.log[e.Stream], e)
					}
					queue = append(queue, rd.Messages...)
					for _, e := range rd.Deliver {
						_ = c.Applied(e.Stream, e.Seq)
					}
					c.Advance()
				}
			}
			for len(queue) > 0 {
				busy = true
				q := queue
				queue = nil
				for _, m := range q {
					i, _ := schema.SiteIndex(m.To)
					if err := cores[i].Step(m); err != nil {
						b.Fatal(err)
					}
				}
			}
			now += 1e6
			for _, c := range cores {
				c.Tick(now)
			}
		}
	}
	pump()
	payload := make([]byte, size)
	for i := 1; i < streams; i++ {
		if _, _, err := cores[0].Append(fmt.Sprintf("idle-%d", i), payload); err != nil {
			b.Fatal(err)
		}
	}
	pump()
	batch := 512
	if streams > 1 {
		batch = 1
	}
	id := core.StreamID{Origin: "a", Name: "s"}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	var last uint64
	for n := 0; n < b.N; {
		k := min(batch, b.N-n)
		for range k {
			seq, _, err := cores[0].Append("s", payload)
			if err != nil {
				b.Fatal(err)
			}
			last = seq
		}
		n += k
		pump()
		for _, c := range cores {
			f, err := c.Frontier(id, "all")
			if err != nil || f.Seq != last {
				b.Fatalf("%s: all = %d, want %d (%v)", c.Site(), f.Seq, last, err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
