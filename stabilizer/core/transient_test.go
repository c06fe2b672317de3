package core_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// TestTransientPredicates: a transient predicate is evaluated nowhere until
// scoped, then on the streams of its scope in the Ready after, which names
// the scope; its advances ask for no fsync and never appear among the
// stored definitions; removed, it is evaluated no more and its index serves
// the next one, which starts from its own evaluation, not from what the
// removed one released.
func TestTransientPredicates(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a"}}
	st := newStore()
	c, err := core.New(core.Config{Site: "a", Schema: schema, Storage: st}, core.State{})
	if err != nil {
		t.Fatal(err)
	}
	run := func() (rds []core.Ready) {
		for c.HasReady() {
			rd := c.Ready()
			for _, e := range rd.Entries {
				st.log[e.Stream] = append(st.log[e.Stream], e)
			}
			for _, e := range rd.Deliver {
				if err := c.Applied(e.Stream, e.Seq); err != nil {
					t.Fatal(err)
				}
			}
			rds = append(rds, rd)
			c.Advance()
		}
		return rds
	}
	id := core.StreamID{Origin: "a", Name: "s"}
	for range 3 {
		if _, _, err := c.Append("s", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	run()
	builtins := c.NumPredicates()
	compile := func(src string) *frontier.Predicate {
		p, err := frontier.Compile(src, schema)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fresh, err := c.DefineTransient("=applied(self)", compile("applied(self)"))
	if err != nil || !fresh {
		t.Fatalf("define: fresh %v, %v", fresh, err)
	}
	if again, err := c.DefineTransient("=applied(self)", compile("applied(self)")); err != nil || again {
		t.Fatalf("define again: fresh %v, %v; want a no-op", again, err)
	}
	if _, err := c.DefineTransient("majority", compile("applied(self)")); !errors.Is(err, core.ErrNamedPredicate) {
		t.Fatalf("a transient predicate took a named one's name: %v", err)
	}
	if _, err := c.SetPredicate("=applied(self)", "applied(self)"); !errors.Is(err, core.ErrNamedPredicate) {
		t.Fatalf("a named predicate took a transient one's name: %v", err)
	}
	if c.HasReady() {
		t.Fatalf("a definition without a scope has work to do: %+v", c.Ready())
	}
	if err := c.ScopeTransient("=applied(self)", "s"); err != nil {
		t.Fatal(err)
	}
	if err := c.ScopeTransient("majority", "s"); !errors.Is(err, core.ErrNamedPredicate) {
		t.Fatalf("scoped a named predicate: %v", err)
	}
	if err := c.ScopeTransient("=none", "s"); !errors.Is(err, core.ErrUnknownPredicate) {
		t.Fatalf("scoped an unknown predicate: %v", err)
	}
	if err := c.ScopeTransient("=applied(self)", strings.Repeat("x", core.MaxStreamName+1)); !errors.Is(err, core.ErrBadStreamName) {
		t.Fatalf("scoped to a bad stream name: %v", err)
	}
	rds := run()
	want := []core.PredicateScope{{Predicate: "=applied(self)", Stream: "s"}}
	if len(rds) == 0 || !slices.Equal(rds[0].Scoped, want) {
		t.Fatalf("the Ready after the scope does not name it: %+v", rds)
	}
	var got *core.FrontierAdvance
	for i := range rds[0].Frontiers {
		if a := rds[0].Frontiers[i]; a.Predicate == "=applied(self)" {
			got = &a
		}
	}
	if got == nil || got.To != 3 || got.Stream != id {
		t.Fatalf("first evaluation %+v, want 3 on %s", got, id)
	}
	if rds[0].MustSync {
		t.Errorf("a Ready with only a transient predicate's advance asks for an fsync")
	}
	for _, d := range c.Predicates() {
		if d.Name == "=applied(self)" {
			t.Errorf("Predicates lists the transient predicate %+v", d)
		}
	}
	if f, err := c.Frontier(id, "=applied(self)"); err != nil || f.Seq != 3 {
		t.Fatalf("frontier %+v, %v", f, err)
	}

	if err := c.RemoveTransient("majority"); !errors.Is(err, core.ErrNamedPredicate) {
		t.Fatalf("removed a named predicate as transient: %v", err)
	}
	if err := c.RemoveTransient("=applied(self)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Frontier(id, "=applied(self)"); !errors.Is(err, core.ErrUnknownPredicate) {
		t.Fatalf("frontier of a removed predicate: %v", err)
	}
	// The next one takes the freed index; it reads received, which its
	// first evaluation puts at 4, not at the 3 the removed one released.
	if _, _, err := c.Append("s", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DefineTransient("=level", compile("kth_max(1, received(sites))")); err != nil {
		t.Fatal(err)
	}
	if err := c.ScopeTransient("=level", core.AllStreams); err != nil {
		t.Fatal(err)
	}
	run()
	if f, _ := c.Frontier(id, "=level"); f.Seq != 4 || f.Version != 1 {
		t.Fatalf("reused index: frontier %+v, want 4 released by version 1", f)
	}

	// Defining and removing many leaves the per-Ready work where it was.
	for i := range 1000 {
		name := fmt.Sprintf("=kth_max(1, persisted(sites)) /* %d */", i)
		if _, err := c.DefineTransient(name, compile("kth_max(1, persisted(sites))")); err != nil {
			t.Fatal(err)
		}
		if err := c.ScopeTransient(name, []string{"s", core.AllStreams}[i%2]); err != nil {
			t.Fatal(err)
		}
		run()
		if err := c.RemoveTransient(name); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.NumPredicates(); n != builtins+1 {
		t.Fatalf("%d predicates evaluated after 1000 defined and removed, want %d", n, builtins+1)
	}
}

// singleSite returns a core of a one-site schema and a driver that runs
// it until it has nothing to do, applying what it delivers, and returns
// the Readies.
func singleSite(t testing.TB) (*core.Core, func() []core.Ready) {
	schema := &frontier.Schema{Sites: []string{"a"}}
	st := newStore()
	c, err := core.New(core.Config{Site: "a", Schema: schema, Storage: st}, core.State{})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() (rds []core.Ready) {
		for c.HasReady() {
			rd := c.Ready()
			for _, e := range rd.Entries {
				st.log[e.Stream] = append(st.log[e.Stream], e)
			}
			for _, e := range rd.Deliver {
				if err := c.Applied(e.Stream, e.Seq); err != nil {
					t.Fatal(err)
				}
			}
			rds = append(rds, rd)
			c.Advance()
		}
		return rds
	}
}

// TestScopedTransientPredicates: transient predicates scoped to one stream
// name are not evaluated on a stream of another: its Readies carry nothing
// of them, its frontiers under them stay zero, and they add no
// allocation. Adding the other name to one's scope evaluates it there in
// the next Ready, before any of the stream's acks change.
func TestScopedTransientPredicates(t *testing.T) {
	schema := &frontier.Schema{Sites: []string{"a"}}
	p, err := frontier.Compile("min(applied(sites))", schema)
	if err != nil {
		t.Fatal(err)
	}
	kv, ps := core.StreamID{Origin: "a", Name: "kv"}, core.StreamID{Origin: "a", Name: "pubsub"}
	setup := func(preds int) (*core.Core, func() []core.Ready) {
		c, run := singleSite(t)
		for _, name := range []string{"kv", "kv", "pubsub"} {
			if _, _, err := c.Append(name, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		run()
		for i := range preds {
			name := fmt.Sprintf("=ps%d", i)
			if _, err := c.DefineTransient(name, p); err != nil {
				t.Fatal(err)
			}
			if err := c.ScopeTransient(name, "pubsub"); err != nil {
				t.Fatal(err)
			}
		}
		return c, run
	}
	const n = 1000
	c, run := setup(n)
	builtins := c.NumPredicates() - n
	rds := run()
	if len(rds) == 0 || len(rds[0].Scoped) != n {
		t.Fatalf("the Ready after the scopes lists %d of them, want %d", len(rds[0].Scoped), n)
	}
	advanced := 0
	for _, a := range rds[0].Frontiers {
		if strings.HasPrefix(a.Predicate, "=") {
			if a.Stream != ps || a.To != 1 {
				t.Fatalf("advance %+v, want %s to 1", a, ps)
			}
			advanced++
		}
	}
	if advanced != n {
		t.Fatalf("%d scoped predicates evaluated on %s, want %d", advanced, ps, n)
	}
	if got := c.NumEvaluated("kv"); got != builtins {
		t.Fatalf("%d predicates evaluated on kv, want the %d built-in ones", got, builtins)
	}
	if got := c.NumEvaluated("pubsub"); got != builtins+n {
		t.Fatalf("%d predicates evaluated on pubsub, want %d", got, builtins+n)
	}

	if _, _, err := c.Append("kv", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, rd := range run() {
		for _, a := range rd.Frontiers {
			if strings.HasPrefix(a.Predicate, "=") {
				t.Fatalf("a write to kv advanced %+v", a)
			}
		}
		if len(rd.Scoped) > 0 {
			t.Fatalf("a write listed scopes %v", rd.Scoped)
		}
	}
	if f, err := c.Frontier(kv, "=ps7"); err != nil || f.Seq != 0 {
		t.Fatalf("frontier of =ps7 on kv %+v (%v), want zero: not scoped there", f, err)
	}

	// Scoped to kv too, =ps7 is evaluated there in the next Ready,
	// though nothing of kv changed; the others still are not.
	if err := c.ScopeTransient("=ps7", "kv"); err != nil {
		t.Fatal(err)
	}
	rds = run()
	if len(rds) != 1 || !slices.Equal(rds[0].Scoped, []core.PredicateScope{{Predicate: "=ps7", Stream: "kv"}}) {
		t.Fatalf("Readies after the scope: %+v", rds)
	}
	want := []core.FrontierAdvance{{Stream: kv, Predicate: "=ps7", Version: 1, From: 0, To: 3}}
	if got := rds[0].Frontiers; len(got) != 1 || got[0].Stream != want[0].Stream || got[0].Predicate != want[0].Predicate || got[0].To != 3 {
		t.Fatalf("frontiers %+v, want %+v", got, want)
	}
	if f, _ := c.Frontier(kv, "=ps7"); f.Seq != 3 {
		t.Fatalf("frontier of =ps7 on kv %+v, want 3", f)
	}
	if f, _ := c.Frontier(kv, "=ps8"); f.Seq != 0 {
		t.Fatalf("frontier of =ps8 on kv %+v, want 0", f)
	}
	if got := c.NumEvaluated("kv"); got != builtins+1 {
		t.Fatalf("%d predicates evaluated on kv, want %d", got, builtins+1)
	}

	// A write to kv costs the same allocations with the 1000 predicates
	// scoped to pubsub as with none.
	allocs := func(c *core.Core, run func() []core.Ready) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, _, err := c.Append("kv", []byte("x")); err != nil {
				t.Fatal(err)
			}
			run()
		})
	}
	none, noneRun := setup(0)
	noneRun()
	scoped, scopedRun := setup(n)
	scopedRun()
	if a, b := allocs(none, noneRun), allocs(scoped, scopedRun); b > a {
		t.Errorf("a write to kv allocates %.1f times with %d predicates scoped to pubsub, %.1f with none", b, n, a)
	}
}
