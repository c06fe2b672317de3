package stabilizer_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestInlinePredicatesStayBounded: 100,000 distinct inline predicates,
// sent one after another as a client would, leave the site holding no more
// than its idle allowance, evaluating as many predicates per Ready as
// before, with its heap where it was, and nothing of them comes back after
// a restart.
func TestInlinePredicatesStayBounded(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1"}})
	n := c.Node("us-east-1")
	ctx := stabilizertest.Context(t, 5*time.Minute)
	a, err := n.Append(ctx, "jobs", []byte("job/7"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := n.PredicateStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(i int) {
		// Comments make each source distinct, as a careless or hostile
		// client's would be.
		src := fmt.Sprintf("min(persisted(sites)) /* request %d */", i)
		if err := n.WaitFor(ctx, a.Stream, src, a.Seq); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	const warm, total = 1000, 100_000
	for i := range warm {
		wait(i)
	}
	heapBefore := heapInUse()
	for i := warm; i < total; i++ {
		wait(i)
	}
	st, err := n.PredicateStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idle := stabilizer.DefaultIdleInlinePredicates
	if st.InlineInUse != 0 || st.InlineIdle > idle || st.Evaluated > base.Evaluated+idle {
		t.Fatalf("after %d inline predicates: %+v; want none in use, at most %d idle, at most %d evaluated (%d before)",
			total, st, idle, base.Evaluated+idle, base.Evaluated)
	}
	if grown := heapInUse() - heapBefore; grown > 32<<20 {
		t.Errorf("the heap grew by %d MiB over %d inline predicates", grown>>20, total-warm)
	}
	c.Stop("us-east-1")
	n = c.Start("us-east-1")
	if st, err := n.PredicateStats(ctx); err != nil || st.Evaluated != base.Evaluated {
		t.Errorf("after a restart the site evaluates %+v (%v), want the %d it had before any inline one", st, err, base.Evaluated)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestInlinePredicateCap: past MaxInlinePredicates in use, a new inline
// predicate is refused with an error that says why and what to do; one in
// use may still be shared, and a freed slot serves the next.
func TestInlinePredicateCap(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1"},
		Configure: func(_ string, cfg *stabilizer.Config) { cfg.MaxInlinePredicates = 2 }})
	n := c.Node("us-east-1")
	ctx := stabilizertest.Context(t, 0)
	a, err := n.Append(ctx, "jobs", []byte("job/7"))
	if err != nil {
		t.Fatal(err)
	}
	src := func(i int) string { return fmt.Sprintf("min(persisted(sites)) /* %d */", i) }
	// Two waits for a seq not yet appended hold two inline predicates.
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 2)
	for i := range 2 {
		go func() { done <- n.WaitFor(waitCtx, a.Stream, src(i), a.Seq+1) }()
	}
	stabilizertest.Eventually(t, 0, func() error {
		st, err := n.PredicateStats(ctx)
		if err == nil && st.InlineInUse != 2 {
			err = fmt.Errorf("%d inline predicates in use, want 2", st.InlineInUse)
		}
		return err
	})
	err = n.WaitFor(ctx, a.Stream, src(2), a.Seq)
	if !errors.Is(err, stabilizer.ErrTooManyPredicates) || !strings.Contains(err.Error(), "MaxInlinePredicates") ||
		!strings.Contains(err.Error(), "SetPredicate") {
		t.Fatalf("a third inline predicate: %v; want ErrTooManyPredicates saying what to do", err)
	}
	if _, err := n.Frontier(ctx, a.Stream, src(0)); err != nil {
		t.Fatalf("sharing one in use: %v", err)
	}
	if err := n.WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatalf("a named predicate past the cap: %v", err)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("held wait: %v", err)
		}
	}
	if err := n.WaitFor(ctx, a.Stream, src(2), a.Seq); err != nil {
		t.Fatalf("after the others ended: %v", err)
	}
}

// TestInlineFrontierReadAfterFirstUse: reading the frontier of an inline
// predicate no call used before gives its evaluation, not the zero of a
// predicate the core has not evaluated yet.
func TestInlineFrontierReadAfterFirstUse(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1", "eu-west-1"}})
	ctx := stabilizertest.Context(t, 0)
	n := c.Node("us-east-1")
	a, err := n.Append(ctx, "jobs", []byte("job/7"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		f, err := n.Frontier(ctx, a.Stream, fmt.Sprintf("min(persisted(sites)) /* %d */", i))
		if err != nil || f.Seq != a.Seq {
			t.Fatalf("read %d: frontier %+v, %v; want %d", i, f, err, a.Seq)
		}
	}
}
