package stabilizer_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestInlinePredicateScopes: an inline predicate is evaluated on the
// streams of the names calls used it on. Used on one stream name and then
// on another, it gives the right frontier on each, the first read on the
// new name included (not the zero of a stream it was never evaluated on),
// on streams of every origin; it is evaluated on every stream only once a
// call needs that (StableTime), whose answer then speaks of every stream.
// HoldOn holds one for a stream name without evaluating it elsewhere.
func TestInlinePredicateScopes(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1", "eu-west-1"}, Levels: []string{"verified"}})
	ctx := stabilizertest.Context(t, 0)
	us, eu := c.Node("us-east-1"), c.Node("eu-west-1")
	appendTo := func(n *stabilizer.Node, stream, payload string) stabilizer.Appended {
		t.Helper()
		a, err := n.Append(ctx, stream, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		if err := us.WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
			t.Fatal(err)
		}
		return a
	}
	kv, jobs, euKV := appendTo(us, "kv", "k1"), appendTo(us, "jobs", "j1"), appendTo(eu, "kv", "k2")
	frontierIs := func(id stabilizer.StreamID, pred string, want uint64) {
		t.Helper()
		f, err := us.Frontier(ctx, id, pred)
		if err != nil || f.Seq != want || f.Predicate != pred {
			t.Fatalf("frontier of %q on %s: %+v, %v; want %d", pred, id, f, err, want)
		}
	}
	stats := func() stabilizer.PredicateStats {
		t.Helper()
		st, err := us.PredicateStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	base := stats()

	// Used on kv: right there, at both origins, and evaluated on no other
	// stream name.
	src := "min(persisted(sites)) /* scopes */"
	if err := us.WaitFor(ctx, kv.Stream, src, kv.Seq); err != nil {
		t.Fatal(err)
	}
	frontierIs(kv.Stream, src, kv.Seq)
	frontierIs(euKV.Stream, src, euKV.Seq)
	if st := stats(); st.Everywhere != base.Everywhere || st.Evaluated != base.Evaluated+1 {
		t.Fatalf("after uses on kv: %+v; want %d evaluated everywhere, %d held (before: %+v)", st, base.Everywhere, base.Evaluated+1, base)
	}
	// Then on jobs: the first read is its evaluation there, and waits on
	// jobs end as the frontier gets there.
	frontierIs(jobs.Stream, src, jobs.Seq)
	j2 := appendTo(us, "jobs", "j2")
	if err := us.WaitFor(ctx, j2.Stream, src, j2.Seq); err != nil {
		t.Fatal(err)
	}
	frontierIs(j2.Stream, src, j2.Seq)
	frontierIs(kv.Stream, src, kv.Seq)

	// First used by a wait on jobs, then read on kv.
	src2 := "max(persisted(sites)) /* scopes */"
	if err := us.WaitFor(ctx, j2.Stream, src2, j2.Seq); err != nil {
		t.Fatal(err)
	}
	frontierIs(euKV.Stream, src2, euKV.Seq)
	frontierIs(kv.Stream, src2, kv.Seq)

	// HoldOn holds it for kv only.
	src3 := `min(level("verified", sites))`
	release, err := us.HoldOn(ctx, src3, "kv")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := us.HoldOn(ctx, src3, ""); !errors.Is(err, stabilizer.ErrBadStreamName) {
		t.Fatalf("hold on an empty stream name: %v", err)
	}
	if st := stats(); st.Everywhere != base.Everywhere || st.InlineInUse != 1 {
		t.Fatalf("holding one on kv: %+v; want %d evaluated everywhere, one in use", st, base.Everywhere)
	}
	// Every kv message is verified everywhere; jobs' never are.
	for _, n := range []*stabilizer.Node{us, eu} {
		for _, a := range []stabilizer.Appended{kv, euKV} {
			stabilizertest.Eventually(t, 0, func() error { return n.Report(ctx, a.Stream, "verified", a.Seq) })
		}
	}
	for _, a := range []stabilizer.Appended{kv, euKV} {
		if err := us.WaitFor(ctx, a.Stream, src3, a.Seq); err != nil {
			t.Fatal(err)
		}
	}
	frontierIs(jobs.Stream, src3, 0)

	// StableTime speaks of every stream: under src, which every message
	// satisfies, it passes the last one as heartbeats come; under src3,
	// it stays below jobs#1, which is not verified, though over kv alone
	// it would pass it too.
	stabilizertest.Eventually(t, 0, func() error {
		st, err := us.StableTime(ctx, src)
		if err == nil && !j2.HLC.Less(st) {
			err = fmt.Errorf("stable time under %q is %s, not past %s#%d (%s)", src, st, j2.Stream, j2.Seq, j2.HLC)
		}
		return err
	})
	st, err := us.StableTime(ctx, src3)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Less(jobs.HLC) {
		t.Fatalf("stable time under %q is %s, not below %s#%d (%s), which is not verified", src3, st, jobs.Stream, jobs.Seq, jobs.HLC)
	}
	if st := stats(); st.Everywhere != base.Everywhere+2 {
		t.Fatalf("after StableTime: %+v; want %d evaluated everywhere", st, base.Everywhere+2)
	}
	frontierIs(kv.Stream, src3, kv.Seq)
	frontierIs(j2.Stream, src3, 0)
}

// TestInlinePredicateScopesConcurrent: many calls at once with one new
// source on several stream names each get the right frontier: those that
// add a name to the scope and those that find it being added.
func TestInlinePredicateScopesConcurrent(t *testing.T) {
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"us-east-1", "eu-west-1"}})
	ctx := stabilizertest.Context(t, 0)
	n := c.Node("us-east-1")
	names := []string{"a", "b", "c", "d"}
	var ids []stabilizer.Appended
	for _, name := range names {
		a, err := n.Append(ctx, name, []byte(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a)
	}
	for round := range 20 {
		src := fmt.Sprintf("min(persisted(sites)) /* round %d */", round)
		errs := make(chan error, 4*len(ids))
		for range 4 {
			for _, a := range ids {
				go func() {
					f, err := n.Frontier(ctx, a.Stream, src)
					if err == nil && f.Seq != a.Seq {
						err = fmt.Errorf("frontier %+v, want %d", f, a.Seq)
					}
					errs <- err
				}()
			}
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
