package frontier

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// gen writes random predicates from the whole grammar of DESIGN.md §3. Some
// of what it writes is rejected (a k out of range, an always-empty list);
// the properties are checked on what Compile accepts.
type gen struct {
	r     *rand.Rand
	s     *Schema
	depth int
}

func (g *gen) site() string {
	switch g.r.IntN(4) {
	case 0:
		return "origin"
	case 1:
		return "self"
	}
	return strconv.Quote(g.s.Sites[g.r.IntN(len(g.s.Sites))])
}

func (g *gen) siteList() string {
	switch g.r.IntN(6) {
	case 0:
		return "others()"
	case 1:
		groups := g.s.groupNames()
		return fmt.Sprintf("group(%q)", groups[g.r.IntN(len(groups))])
	case 2:
		return fmt.Sprintf("except(%s, %s)", g.siteList(), g.site())
	case 3:
		n := 1 + g.r.IntN(3)
		names := make([]string, n)
		for i := range names {
			names[i] = g.site()
		}
		return "[" + strings.Join(names, ", ") + "]"
	}
	return "sites"
}

func (g *gen) level() string {
	switch g.r.IntN(4) {
	case 0:
		return "received"
	case 1:
		return "applied"
	case 2:
		return `level("verified", %s)`
	}
	return "persisted"
}

func (g *gen) read(target string) string {
	l := g.level()
	if strings.Contains(l, "%s") {
		return fmt.Sprintf(l, target)
	}
	return l + "(" + target + ")"
}

func (g *gen) intList() string {
	if g.depth < 3 && g.r.IntN(4) == 0 {
		n := 1 + g.r.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = g.intExpr()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return g.read(g.siteList())
}

func (g *gen) intExpr() string {
	g.depth++
	defer func() { g.depth-- }()
	if g.depth > 3 {
		return g.read(g.site())
	}
	switch g.r.IntN(7) {
	case 0:
		return g.read(g.site())
	case 1, 2:
		fn := []string{"min", "max"}[g.r.IntN(2)]
		n := 1 + g.r.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			if g.r.IntN(2) == 0 {
				parts[i] = g.intExpr()
			} else {
				parts[i] = g.intList()
			}
		}
		return fn + "(" + strings.Join(parts, ", ") + ")"
	case 3:
		return "majority(" + g.intList() + ")"
	}
	fn := []string{"kth_max", "kth_min", "quorum"}[g.r.IntN(3)]
	return fmt.Sprintf("%s(%d, %s)", fn, 1+g.r.IntN(4), g.intList())
}

func propSchema() *Schema {
	return &Schema{
		Sites:  []string{"a", "b", "c", "d", "e"},
		Groups: map[string][]string{"x": {"a", "b", "c"}, "y": {"d", "e"}, "z": {"c", "e"}},
		Levels: []string{"verified"},
	}
}

// accepted returns n random predicates that compile, with their sources.
func accepted(t *testing.T, seed uint64, n int) ([]*Predicate, *Schema) {
	s := propSchema()
	g := &gen{r: rand.New(rand.NewPCG(seed, 1)), s: s}
	var out []*Predicate
	for tries := 0; len(out) < n; tries++ {
		if tries > 50*n {
			t.Fatalf("only %d of %d random predicates compiled", len(out), n)
		}
		if p, err := Compile(g.intExpr(), s); err == nil {
			out = append(out, p)
		}
	}
	return out, s
}

func randomAcks(r *rand.Rand, s *Schema) []uint64 {
	acks := make([]uint64, s.TableSize())
	for i := range acks {
		acks[i] = uint64(r.IntN(20))
	}
	return acks
}

// TestMonotoneAndBounded: raising any ack never lowers the frontier, and the
// frontier never exceeds the largest ack of the levels the predicate reads.
func TestMonotoneAndBounded(t *testing.T) {
	preds, s := accepted(t, 1, 400)
	r := rand.New(rand.NewPCG(2, 2))
	n := len(s.Sites)
	for _, p := range preds {
		for range 30 {
			acks := randomAcks(r, s)
			origin, self := r.IntN(n), r.IntN(n)
			before := mustEval(t, p, acks, origin, self)
			var bound uint64
			for i, v := range acks {
				if p.ReadsLevel(i / n) {
					bound = max(bound, v)
				}
			}
			if before > bound {
				t.Fatalf("%s = %d exceeds the largest ack read %d; acks %v origin %d self %d", p, before, bound, acks, origin, self)
			}
			i := r.IntN(len(acks))
			acks[i] += 1 + uint64(r.IntN(5))
			if after := mustEval(t, p, acks, origin, self); after < before {
				t.Fatalf("%s went from %d to %d when ack %d was raised; acks %v origin %d self %d", p, before, after, i, acks, origin, self)
			}
		}
	}
}

// TestAgainstExprVM compares the lowered evaluator with the same predicates
// evaluated by plain expr-lang with straightforward function definitions.
func TestAgainstExprVM(t *testing.T) {
	preds, s := accepted(t, 3, 300)
	r := rand.New(rand.NewPCG(4, 4))
	for _, p := range preds {
		ref, err := newExprRef(p.String(), s)
		if err != nil {
			t.Fatalf("expr rejects %s: %v", p, err)
		}
		for range 20 {
			acks := randomAcks(r, s)
			origin, self := r.IntN(len(s.Sites)), r.IntN(len(s.Sites))
			want, err := ref.eval(acks, origin, self)
			if err != nil {
				t.Fatalf("expr eval %s: %v", p, err)
			}
			if got := mustEval(t, p, acks, origin, self); got != want {
				t.Fatalf("%s = %d, expr says %d; acks %v origin %d self %d", p, got, want, acks, origin, self)
			}
		}
	}
}

// TestDualIntersects: over every pair of site sets, a set satisfying the
// dual intersects every set satisfying the predicate. It also checks that
// the rendered dual compiles to the same function as the lowered one.
func TestDualIntersects(t *testing.T) {
	preds, s := accepted(t, 5, 300)
	r := rand.New(rand.NewPCG(6, 6))
	n := len(s.Sites)
	all := 1 << n
	for _, p := range preds {
		d := p.Dual()
		origin, self := r.IntN(n), r.IntN(n)
		var sat, dsat []SiteSet
		for set := SiteSet(0); int(set) < all; set++ {
			if p.Holds(set, origin, self) {
				sat = append(sat, set)
			}
			if d.Holds(set, origin, self) {
				dsat = append(dsat, set)
			}
		}
		for _, a := range sat {
			for _, b := range dsat {
				if a&b == 0 {
					t.Fatalf("%s: set %b satisfies it and %b its dual %s, but they do not intersect (origin %d self %d)",
						p, a, b, d.SourceAt(origin, self), origin, self)
				}
			}
		}
		if !d.Dual().Holds(SiteSet(all-1), origin, self) && p.Holds(SiteSet(all-1), origin, self) {
			t.Fatalf("dual of dual of %s differs", p)
		}
		rendered, err := Compile(d.SourceAt(origin, self), s)
		if err != nil {
			t.Fatalf("dual of %s renders as %q, which does not compile: %v", p, d.SourceAt(origin, self), err)
		}
		for range 10 {
			acks := randomAcks(r, s)
			if a, b := mustEval(t, d, acks, origin, self), mustEval(t, rendered, acks, origin, self); a != b {
				t.Fatalf("dual of %s: lowered %d, rendered %q gives %d", p, a, rendered, b)
			}
		}
	}
}

// TestDualQuorumRead plays the read side of a quorum system: a write held by
// a set satisfying P is seen by every read whose answering sites satisfy
// dual(P).
func TestDualQuorumRead(t *testing.T) {
	s := &Schema{Sites: []string{"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "ap-southeast-2"}}
	for _, src := range []string{"majority", "all", "one_remote", "local", "kth_max(4, persisted(sites))"} {
		p, err := Compile(src, s)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Dual()
		for write := SiteSet(1); write < 32; write++ {
			if !p.Holds(write, 0, 0) {
				continue
			}
			for read := SiteSet(1); read < 32; read++ {
				if d.Holds(read, 0, 0) && write&read == 0 {
					t.Fatalf("%s: a write held by %05b is missed by a read from %05b", src, write, read)
				}
			}
		}
	}
}

func mustEval(t *testing.T, p *Predicate, acks []uint64, origin, self int) uint64 {
	t.Helper()
	v, err := p.Eval(acks, origin, self)
	if err != nil {
		t.Fatalf("eval %s: %v", p, err)
	}
	return v
}

func TestEvalErrors(t *testing.T) {
	s := propSchema()
	p, err := Compile("majority", s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(make([]uint64, 3), 0, 0); err == nil {
		t.Fatal("a short table must be an error")
	}
	if _, err := p.Eval(make([]uint64, s.TableSize()), 5, 0); err == nil {
		t.Fatal("an origin out of range must be an error")
	}
	if _, err := p.Eval(make([]uint64, s.TableSize()), 0, -1); err == nil {
		t.Fatal("a negative self must be an error")
	}
}

func TestLimits(t *testing.T) {
	s := propSchema()
	long := "min(" + strings.Repeat("persisted(origin), ", 300) + "persisted(self))"
	_, err := Compile(long, s)
	if err == nil || !strings.Contains(err.Error(), "bytes, longer than the limit of 4096") {
		t.Fatalf("a %d-byte predicate: %v", len(long), err)
	}
	many := "min(" + strings.Repeat(`persisted("a"),`, 130) + `persisted("b"))`
	if len(many) > MaxSourceBytes {
		t.Fatal("test predicate too long to reach the node limit")
	}
	_, err = Compile(many, s)
	if err == nil || !strings.Contains(err.Error(), "more than 256 nodes") {
		t.Fatalf("a predicate of %d reads: %v", 131, err)
	}
	var fe *Error
	if e, ok := err.(*Error); ok {
		fe = e
	}
	if fe == nil || fe.Line != 1 || fe.Column < 2 {
		t.Fatalf("node limit error has no position: %#v", err)
	}
}

func TestSchemaValidate(t *testing.T) {
	s := &Schema{Sites: []string{"a", "a", ""}, Groups: map[string][]string{"g": {"zz"}, "e": {}}, Levels: []string{"persisted"}}
	err := s.Validate()
	for _, want := range []string{`duplicate site "a"`, "sites[2]: empty name", `groups.g: unknown site "zz"`, "groups.e: group has no sites", `duplicate level "persisted"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: want %q in %v", want, err)
		}
	}
}
