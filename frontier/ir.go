package frontier

import "math/bits"

// The checked expression tree is lowered into this small IR. Evaluation walks
// it over the flat ack slice with a fixed-size stack buffer, so it never
// allocates and never goes through reflection or the generic expr VM.

// refKind says how a site reference is resolved at evaluation time.
type refKind uint8

const (
	refStatic refKind = iota // a configured site, by index
	refOrigin                // the stream's origin
	refSelf                  // the evaluating site
)

type siteRef struct {
	kind refKind
	idx  int
}

func (r siteRef) resolve(origin, self int) int {
	switch r.kind {
	case refOrigin:
		return origin
	case refSelf:
		return self
	}
	return r.idx
}

// siteList is a set of sites in normal form: members minus exclusions. Lists
// are sets: a site named twice counts once, and iteration follows
// configuration order.
type siteList struct {
	static     uint64
	incOrigin  bool
	incSelf    bool
	excl       uint64
	exclOrigin bool
	exclSelf   bool
}

func (l siteList) mask(origin, self int) uint64 {
	m := l.static
	if l.incOrigin {
		m |= 1 << uint(origin)
	}
	if l.incSelf {
		m |= 1 << uint(self)
	}
	m &^= l.excl
	if l.exclOrigin {
		m &^= 1 << uint(origin)
	}
	if l.exclSelf {
		m &^= 1 << uint(self)
	}
	return m
}

// sizeRange returns the smallest and largest size the list can have over
// every (origin, self) pair of an n-site configuration.
func (l siteList) sizeRange(n int) (lo, hi int) {
	lo, hi = n+1, -1
	for o := 0; o < n; o++ {
		for s := 0; s < n; s++ {
			c := bits.OnesCount64(l.mask(o, s))
			lo, hi = min(lo, c), max(hi, c)
		}
	}
	return lo, hi
}

type op uint8

const (
	opAck op = iota // one site's ack at one level
	opMin           // all of the arguments hold
	opMax           // any of the arguments holds
	opKth           // the k-th largest of a list
)

// kMode says how k is derived from the list's length at evaluation time;
// lists that depend on origin or self have a length known only then.
type kMode uint8

const (
	kFixed        kMode = iota // k as written
	kComplement                // len-k+1: the dual of kFixed
	kMajority                  // len/2+1
	kDualMajority              // len-len/2: the dual of kMajority
)

type kspec struct {
	mode kMode
	k    int
}

func (s kspec) eff(n int) int {
	switch s.mode {
	case kComplement:
		return n - s.k + 1
	case kMajority:
		return n/2 + 1
	case kDualMajority:
		return n - n/2
	}
	return s.k
}

func (s kspec) dual() kspec {
	switch s.mode {
	case kComplement:
		return kspec{kFixed, s.k}
	case kMajority:
		return kspec{kDualMajority, 0}
	case kDualMajority:
		return kspec{kMajority, 0}
	}
	return kspec{kComplement, s.k}
}

// arg is one argument of min, max or kth: a scalar sub-expression, or one
// level read over a list of sites (which contributes one value per site).
type arg struct {
	scalar *node
	level  int
	sites  siteList
}

type node struct {
	op      op
	level   int     // opAck
	site    siteRef // opAck
	k       kspec   // opKth
	fromMin bool    // opKth: written as kth_min, k counts from the smallest
	args    []arg   // opMin, opMax, opKth
}

// eval computes the node's value. acks is laid out acks[level*n+site].
func (nd *node) eval(acks []uint64, n, origin, self int) uint64 {
	switch nd.op {
	case opAck:
		return acks[nd.level*n+nd.site.resolve(origin, self)]
	case opMin:
		return nd.evalMin(acks, n, origin, self)
	case opMax:
		return nd.evalMax(acks, n, origin, self)
	}
	return nd.evalKth(acks, n, origin, self)
}

// evalMin returns the smallest argument value. An empty list (possible only
// when origin or self is excluded from a list that held nothing else) proves
// nothing, so it yields 0.
func (nd *node) evalMin(acks []uint64, n, origin, self int) uint64 {
	out, seen := ^uint64(0), false
	for i := range nd.args {
		a := &nd.args[i]
		if a.scalar != nil {
			out, seen = min(out, a.scalar.eval(acks, n, origin, self)), true
			continue
		}
		row := acks[a.level*n : a.level*n+n]
		for m := a.sites.mask(origin, self); m != 0; m &= m - 1 {
			out, seen = min(out, row[bits.TrailingZeros64(m)]), true
		}
	}
	if !seen {
		return 0
	}
	return out
}

func (nd *node) evalMax(acks []uint64, n, origin, self int) uint64 {
	var out uint64
	for i := range nd.args {
		a := &nd.args[i]
		if a.scalar != nil {
			out = max(out, a.scalar.eval(acks, n, origin, self))
			continue
		}
		row := acks[a.level*n : a.level*n+n]
		for m := a.sites.mask(origin, self); m != 0; m &= m - 1 {
			out = max(out, row[bits.TrailingZeros64(m)])
		}
	}
	return out
}

// evalKth returns the k-th largest value: the highest seq that at least k of
// the listed values have reached. Lists hold at most MaxSites values.
func (nd *node) evalKth(acks []uint64, n, origin, self int) uint64 {
	var buf [MaxSites]uint64
	cnt := 0
	for i := range nd.args {
		a := &nd.args[i]
		if a.scalar != nil {
			buf[cnt] = a.scalar.eval(acks, n, origin, self)
			cnt++
			continue
		}
		row := acks[a.level*n : a.level*n+n]
		for m := a.sites.mask(origin, self); m != 0; m &= m - 1 {
			buf[cnt] = row[bits.TrailingZeros64(m)]
			cnt++
		}
	}
	k := nd.k.eff(cnt)
	if nd.fromMin {
		k = cnt - k + 1
	}
	if k < 1 || k > cnt {
		return 0 // this origin's list is too short: the condition can never hold
	}
	return kthLargest(buf[:cnt], k)
}

// kthLargest sorts vals descending by insertion, which beats anything
// cleverer for the handful of sites a configuration has.
func kthLargest(vals []uint64, k int) uint64 {
	for i := 1; i < len(vals); i++ {
		v := vals[i]
		j := i
		for ; j > 0 && vals[j-1] < v; j-- {
			vals[j] = vals[j-1]
		}
		vals[j] = v
	}
	return vals[k-1]
}

// dual returns the node's dual: min and max swap, and a k-of-n threshold
// becomes an (n-k+1)-of-n threshold.
func (nd *node) dual() *node {
	out := &node{op: nd.op, level: nd.level, site: nd.site, k: nd.k, fromMin: nd.fromMin}
	switch nd.op {
	case opMin:
		out.op = opMax
	case opMax:
		out.op = opMin
	case opKth:
		out.k = nd.k.dual()
	}
	if nd.args != nil {
		out.args = make([]arg, len(nd.args))
		for i, a := range nd.args {
			out.args[i] = a
			if a.scalar != nil {
				out.args[i].scalar = a.scalar.dual()
			}
		}
	}
	return out
}

// levelsRead adds the levels the node reads to mask.
func (nd *node) levelsRead(mask *uint64) {
	if nd.op == opAck {
		*mask |= 1 << uint(nd.level)
	}
	for _, a := range nd.args {
		if a.scalar != nil {
			a.scalar.levelsRead(mask)
		} else {
			*mask |= 1 << uint(a.level)
		}
	}
}
