package stabilizer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// seqCounter is an Applier that counts how often it applied each seq of each
// stream.
type seqCounter struct {
	mu   sync.Mutex
	seen map[stabilizer.StreamID]map[uint64]int
}

func (c *seqCounter) Apply(_ context.Context, es []stabilizer.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range es {
		if c.seen[e.Stream] == nil {
			c.seen[e.Stream] = map[uint64]int{}
		}
		c.seen[e.Stream][e.Seq]++
	}
	return nil
}

// exactlyOnce reports how the applied seqs of id differ from 1..n, each
// once.
func (c *seqCounter) exactlyOnce(id stabilizer.StreamID, n uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.seen[id]
	for seq, k := range seen {
		if k != 1 || seq == 0 || seq > n {
			return fmt.Errorf("%s seq %d applied %d times (want 1..%d once each)", id, seq, k, n)
		}
	}
	if uint64(len(seen)) != n {
		return fmt.Errorf("%s: %d of %d seqs applied", id, len(seen), n)
	}
	return nil
}

// TestRelayAfterOriginStops: a write acknowledged under majority at a
// (persisted at a and b) while a-c is cut reaches c once a is gone, from b,
// exactly once; and a coming back sends c nothing twice.
func TestRelayAfterOriginStops(t *testing.T) {
	var mu sync.Mutex
	apps := map[string]*seqCounter{}
	app := func(site string) *seqCounter {
		mu.Lock()
		defer mu.Unlock()
		return apps[site]
	}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{
		Sites: []string{"a", "b", "c"}, // RelayDelay: DefaultRelayAfter
		Setup: func(site string, n *stabilizer.Node) error {
			k := &seqCounter{seen: map[stabilizer.StreamID]map[uint64]int{}}
			mu.Lock()
			apps[site] = k
			mu.Unlock()
			return n.Handle("log", k)
		},
	})
	ctx := stabilizertest.Context(t, 30*time.Second)
	a, err := c.Node("a").Append(ctx, "log", []byte("warm-up"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node("a").WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}

	c.Net.Cut("a", "c")
	const n = 50
	for i := range n {
		if a, err = c.Node("a").Append(ctx, "log", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Node("a").WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatal(err)
	}
	// b does not relay while it is connected to a.
	if f, err := c.Node("c").Frontier(ctx, a.Stream, "persisted(self)"); err != nil || f.Seq != 1 {
		t.Fatalf("c holds a's stream up to %d before a stopped, want 1 (%v)", f.Seq, err)
	}

	c.Stop("a")
	c.Net.Restore("a", "c")
	stabilizertest.Eventually(t, 20*time.Second, func() error { return app("c").exactlyOnce(a.Stream, a.Seq) })

	c.Start("a")
	last, err := c.Node("a").Append(ctx, "log", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node("a").WaitFor(ctx, last.Stream, "min(applied(sites))", last.Seq); err != nil {
		t.Fatal(err)
	}
	if err := app("c").exactlyOnce(a.Stream, last.Seq); err != nil {
		t.Fatal(err)
	}
	if err := app("b").exactlyOnce(a.Stream, last.Seq); err != nil {
		t.Fatal(err)
	}
}
