package stabilizer_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestAwaitedWritesNotHeldBack: with a SyncDelay far beyond the test's
// deadline, writes waited for under several predicates still complete, so
// nothing a write waits for is left for a later fsync: not the entries, not
// the acks that carry them, not the frontier advance.
func TestAwaitedWritesNotHeldBack(t *testing.T) {
	c := newCluster(t, func(cfg *stabilizer.Config) { cfg.SyncDelay = time.Hour }, "a", "b", "c")
	ctx := stabilizertest.Context(t, 20*time.Second)
	for i := range 20 {
		for _, s := range c.Sites() {
			a, err := c.Node(s).Append(ctx, "log", []byte(fmt.Sprintf("%s-%d", s, i)))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"local", "majority", "all", "min(applied(sites))"} {
				if err := c.Node(s).WaitFor(ctx, a.Stream, p, a.Seq); err != nil {
					t.Fatalf("%s write %d, waiting for %s: %v", s, i, p, err)
				}
			}
		}
	}
}

// TestWaitReleasesHeldFrontier: a frontier advance applied while nobody
// waited for it is held back (here for an hour); a wait that starts
// afterwards gets it released at once.
func TestWaitReleasesHeldFrontier(t *testing.T) {
	// No heartbeats or periodic full acks: nothing else makes b sync.
	c := newCluster(t, func(cfg *stabilizer.Config) {
		cfg.Core.HeartbeatInterval, cfg.Core.FullAckInterval = 1<<30, 1<<30
		cfg.SyncDelay = time.Hour
	}, "a", "b", "c")
	ctx := stabilizertest.Context(t, 20*time.Second)
	deadline, _ := ctx.Deadline()
	held := 0
	for i := range 10 {
		a, err := c.Node("a").Append(ctx, "log", []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Node("a").WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
			t.Fatal(err)
		}
		// b learns that every site persisted the write from c's ack, in
		// a Ready nobody waits for: wait until it is applied to b's store,
		// within the test's deadline.
		b := c.Node("b")
		stabilizertest.Eventually(t, time.Until(deadline), func() error {
			if appliedFrontier(t, b, a.Stream, "all") >= a.Seq {
				return nil
			}
			if ctx.Err() != nil {
				t.Fatalf("b never applied all(%s) >= %d", a.Stream, a.Seq)
			}
			return fmt.Errorf("b has not applied all(%s) >= %d yet", a.Stream, a.Seq)
		})
		if f, _ := b.Frontier(ctx, a.Stream, "all"); f.Seq < a.Seq {
			held++
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = b.WaitFor(wctx, a.Stream, "all", a.Seq)
		cancel()
		if err != nil {
			t.Fatalf("write %d: a wait did not release the held frontier: %v", i, err)
		}
	}
	t.Logf("%d of 10 advances were held back until the wait", held)
	if held == 0 {
		t.Fatal("no advance was held back: the test did not exercise the wait's release")
	}
}

// appliedFrontier reads the frontier record a node applied to its store,
// published or not.
func appliedFrontier(t *testing.T, n *stabilizer.Node, id stabilizer.StreamID, pred string) uint64 {
	v, err := stabilizer.FrontierRecord(n, id, pred)
	if err != nil {
		return 0
	}
	seq, w := binary.Uvarint(v)
	if w <= 0 {
		t.Fatalf("bad frontier record %x", v)
	}
	return seq
}

// TestUnawaitedFrontiersStillAdvance: frontier advances nobody waits for
// are published within SyncDelay, fsynced by a later write or on their
// own: a watcher sees every predicate reach the last write.
func TestUnawaitedFrontiersStillAdvance(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	ctx := stabilizertest.Context(t, 20*time.Second)
	w := c.Node("b").WatchFrontiers(1024, func(a stabilizer.FrontierAdvance) bool {
		return a.Stream.Origin == "a" && a.Predicate == "all"
	})
	defer w.Stop()
	var last stabilizer.Appended
	for i := range 10 {
		var err error
		if last, err = c.Node("a").Append(ctx, "log", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for {
		select {
		case a := <-w.C:
			if a.To >= last.Seq {
				return
			}
		case <-ctx.Done():
			t.Fatalf("b never published all(a/log) >= %d", last.Seq)
		}
	}
}

func TestSyncDelayValidated(t *testing.T) {
	err := (&stabilizer.Config{Site: "a", Schema: &frontier.Schema{Sites: []string{"a"}}, Dir: t.TempDir(), SyncDelay: -time.Millisecond}).Validate()
	if err == nil || !strings.Contains(err.Error(), "SyncDelay: -1ms is negative") {
		t.Fatalf("negative SyncDelay: %v", err)
	}
}
