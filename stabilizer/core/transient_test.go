package core_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// TestTransientPredicates: a transient predicate is evaluated on every
// stream in the Ready after its definition, which names it; its advances
// ask for no fsync and never appear among the stored definitions; removed,
// it is evaluated no more and its index serves the next one, which starts
// from its own evaluation, not from what the removed one released.
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
	rds := run()
	if len(rds) == 0 || !slices.Equal(rds[0].Defined, []string{"=applied(self)"}) {
		t.Fatalf("the Ready after the definition does not name it: %+v", rds)
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
		run()
		if err := c.RemoveTransient(name); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.NumPredicates(); n != builtins+1 {
		t.Fatalf("%d predicates evaluated after 1000 defined and removed, want %d", n, builtins+1)
	}
}
