package core_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
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

// benchCluster is three cores in one goroutine with an in-memory log
// without fsync, messages handed over directly.
type benchCluster struct {
	b       *testing.B
	schema  *frontier.Schema
	cores   []*core.Core
	stores  []*simStore
	queue   []core.Message
	now     int64
	readies int // Readies handled
}

func newBenchCluster(b *testing.B) *benchCluster {
	bc := &benchCluster{b: b, schema: &frontier.Schema{Sites: []string{"a", "b", "c"}}}
	for i, name := range bc.schema.Sites {
		st := newStore()
		c, err := core.New(core.Config{
			Site: name, Schema: bc.schema, Storage: st, Rand: rand.New(rand.NewPCG(uint64(i), 0)),
			MaxBatchBytes: 1 << 20, MaxInflightBytes: 64 << 20,
		}, core.State{})
		if err != nil {
			b.Fatal(err)
		}
		bc.cores, bc.stores = append(bc.cores, c), append(bc.stores, st)
	}
	for _, c := range bc.cores {
		for _, o := range bc.schema.Sites {
			if o != c.Site() {
				if err := c.Connected(o); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	return bc
}

// pump runs the cores, delivering messages and ticking, until none has
// anything to do.
func (bc *benchCluster) pump() {
	for busy := true; busy; {
		busy = false
		for i, c := range bc.cores {
			for c.HasReady() {
				busy = true
				bc.readies++
				rd := c.Ready()
				st := bc.stores[i]
				for _, e := range rd.Entries {
					st.log[e.Stream] = append(st.log[e.Stream], e)
				}
				bc.queue = append(bc.queue, rd.Messages...)
				for _, e := range rd.Deliver {
					_ = c.Applied(e.Stream, e.Seq)
				}
				c.Advance()
			}
		}
		for len(bc.queue) > 0 {
			busy = true
			q := bc.queue
			bc.queue = nil
			for _, m := range q {
				i, _ := bc.schema.SiteIndex(m.To)
				if err := bc.cores[i].Step(m); err != nil {
					bc.b.Fatal(err)
				}
			}
		}
		bc.now += 1e6
		for _, c := range bc.cores {
			c.Tick(bc.now)
		}
	}
}

// checkAll fails unless `all` covers seq of a's stream name everywhere.
func (bc *benchCluster) checkAll(name string, seq uint64) {
	id := core.StreamID{Origin: "a", Name: name}
	for _, c := range bc.cores {
		f, err := c.Frontier(id, "all")
		if err != nil || f.Seq != seq {
			bc.b.Fatalf("%s: all = %d, want %d (%v)", c.Site(), f.Seq, seq, err)
		}
	}
}

// BenchmarkCoreScopedTransients measures what transient predicates held
// for other streams cost the Readies of a stream: each iteration writes
// once to stream kv at one of three sites and runs the cores until `all`
// covers it everywhere, while every site holds 1,000 transient predicates:
// none; scoped to stream name pubsub, of which each site has an idle
// stream (what the KV pays for pub/sub's per-topic predicates); or scoped
// to every stream, as every transient predicate was before scopes.
func BenchmarkCoreScopedTransients(b *testing.B) {
	for _, bc := range []struct {
		name  string
		preds int
		scope string
	}{
		{"preds=0", 0, ""},
		{"preds=1000/scope=pubsub", 1000, "pubsub"},
		{"preds=1000/scope=every", 1000, core.AllStreams},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchScoped(b, bc.preds, bc.scope)
		})
	}
}

func benchScoped(b *testing.B, preds int, scope string) {
	c := newBenchCluster(b)
	c.pump()
	for _, cr := range c.cores {
		if _, _, err := cr.Append("pubsub", []byte("topic")); err != nil {
			b.Fatal(err)
		}
	}
	p, err := frontier.Compile("min(persisted(sites))", c.schema)
	if err != nil {
		b.Fatal(err)
	}
	for _, cr := range c.cores {
		for i := range preds {
			name := fmt.Sprintf("=topic-%d", i)
			if _, err := cr.DefineTransient(name, p); err != nil {
				b.Fatal(err)
			}
			if err := cr.ScopeTransient(name, scope); err != nil {
				b.Fatal(err)
			}
		}
	}
	c.pump()
	payload := make([]byte, 256)
	c.readies = 0
	runtime.GC() // what the setup left, not what it cost
	b.ReportAllocs()
	b.ResetTimer()
	var seq uint64
	for range b.N {
		if seq, _, err = c.cores[0].Append("kv", payload); err != nil {
			b.Fatal(err)
		}
		c.pump()
	}
	b.StopTimer()
	c.checkAll("kv", seq)
	b.ReportMetric(float64(c.readies)/float64(b.N), "readies/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(c.readies), "ns/ready")
}

func benchReplicateStreams(b *testing.B, size, streams int) {
	c := newBenchCluster(b)
	cores := c.cores
	pump := c.pump
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
		c.checkAll("s", last)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
