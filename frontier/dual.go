package frontier

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// SiteSet is a set of sites as a bit mask: bit i is the site at index i.
type SiteSet uint64

// SiteSetOf returns the set of the given site indices.
func SiteSetOf(sites ...int) SiteSet {
	var s SiteSet
	for _, i := range sites {
		s |= 1 << uint(i)
	}
	return s
}

// Has reports whether site i is in the set.
func (s SiteSet) Has(i int) bool { return s&(1<<uint(i)) != 0 }

// Len is the number of sites in the set.
func (s SiteSet) Len() int { return bits.OnesCount64(uint64(s)) }

// Dual returns the predicate's dual (DESIGN.md §3): min and max swap and a
// k-of-n threshold becomes (n-k+1)-of-n. Read as conditions on which sites
// hold a write, every set of sites satisfying the dual intersects every set
// satisfying the predicate, so a read that hears from a set satisfying the
// dual sees every write acknowledged under the predicate. The dual of the
// dual is the predicate.
func (p *Predicate) Dual() *Predicate {
	d := *p
	d.root = p.root.dual()
	d.dual = !p.dual
	return &d
}

// Holds reports whether the predicate holds for a write that exactly the
// sites in set hold (at every level): the predicate read as a condition on
// sites, as a quorum system uses it.
func (p *Predicate) Holds(set SiteSet, origin, self int) bool {
	acks := make([]uint64, p.nsites*p.nlevels)
	for l := 0; l < p.nlevels; l++ {
		for s := 0; s < p.nsites; s++ {
			if set.Has(s) {
				acks[l*p.nsites+s] = 1
			}
		}
	}
	v, err := p.Eval(acks, origin, self)
	return err == nil && v >= 1
}

// SourceAt renders the predicate's source for one origin and evaluating
// site. For a dual it spells out every k, which may depend on how long a
// list is for that origin.
func (p *Predicate) SourceAt(origin, self int) string {
	if !p.dual {
		return p.src
	}
	src, _ := p.render(origin, self)
	return src
}

// render prints the source of p with the dual transformation applied.
// origin < 0 means "any origin": it fails if some k depends on the origin.
func (p *Predicate) render(origin, self int) (string, bool) {
	r := renderer{p: p, origin: origin, self: self, ok: true}
	var b strings.Builder
	r.node(&b, p.tree)
	return b.String(), r.ok
}

type renderer struct {
	p            *Predicate
	origin, self int
	ok           bool
}

func (r *renderer) node(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		b.WriteString(n.Value)
	case *ast.StringNode:
		b.WriteString(strconv.Quote(n.Value))
	case *ast.IntegerNode:
		b.WriteString(strconv.Itoa(n.Value))
	case *ast.ArrayNode:
		b.WriteByte('[')
		r.list(b, n.Nodes)
		b.WriteByte(']')
	case *ast.CallNode:
		r.call(b, n.Callee.(*ast.IdentifierNode).Value, n.Arguments)
	case *ast.BuiltinNode:
		r.call(b, n.Name, n.Arguments)
	}
}

func (r *renderer) list(b *strings.Builder, ns []ast.Node) {
	for i, a := range ns {
		if i > 0 {
			b.WriteString(", ")
		}
		r.node(b, a)
	}
}

func (r *renderer) call(b *strings.Builder, name string, args []ast.Node) {
	switch name {
	case "min", "max":
		if r.p.dual {
			name = map[string]string{"min": "max", "max": "min"}[name]
		}
	case "kth_max", "kth_min", "quorum", "majority":
		if r.p.dual {
			r.threshold(b, name, args)
			return
		}
	}
	b.WriteString(name)
	b.WriteByte('(')
	r.list(b, args)
	b.WriteByte(')')
}

// threshold prints the dual of a k-of-n call: (n-k+1)-of-n.
func (r *renderer) threshold(b *strings.Builder, name string, args []ast.Node) {
	list := args[len(args)-1]
	n, hi, known := r.length(list)
	if !known {
		r.ok = false
	}
	var k int
	if name == "majority" {
		if n == 0 || n-n/2 == n/2+1 {
			b.WriteString("majority(")
			r.node(b, list)
			b.WriteByte(')')
			return
		}
		name, k = "kth_max", n-n/2
	} else {
		orig, _ := literalInt(args[0])
		if k = n - orig + 1; k < 1 {
			// The original cannot hold at this origin, and neither does
			// the lowered dual (see doc.go); hi spells that out in range.
			k = hi
		}
	}
	b.WriteString(name + "(" + strconv.Itoa(k) + ", ")
	r.node(b, list)
	b.WriteByte(')')
}

// length is a list's length at the renderer's origin and self, and the
// longest it can be at any origin.
func (r *renderer) length(list ast.Node) (n, hi int, known bool) {
	c := &checker{src: r.p.src, s: r.p.schema}
	as, lo, hi, err := c.intList("", list)
	if err != nil {
		return 0, 0, false
	}
	if r.origin < 0 {
		return hi, hi, lo == hi
	}
	return listLen(as, r.origin, r.self), hi, true
}
