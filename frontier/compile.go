package frontier

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
)

// Limits on a predicate's size. They keep compile time, evaluation time and
// the fixed evaluation buffer bounded.
const (
	MaxSourceBytes = 4096
	MaxNodes       = 256
)

// Predicate is a compiled predicate. It is immutable and safe for concurrent
// use.
type Predicate struct {
	src     string
	tree    ast.Node // the parsed source, kept to render the dual
	root    *node
	schema  *Schema
	nsites  int
	nlevels int
	levels  uint64 // bit i: reads level i
	dual    bool
}

// Compile checks src against the schema and lowers it for evaluation. src
// may also be the name of a built-in predicate (see Builtins).
func Compile(src string, s *Schema) (*Predicate, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if exp, ok := Builtins[strings.TrimSpace(src)]; ok {
		src = exp
	}
	if len(src) > MaxSourceBytes {
		off := utf8.RuneCountInString(src[:MaxSourceBytes])
		return nil, errorAt(src, off, "predicate is %d bytes, longer than the limit of %d", len(src), MaxSourceBytes)
	}
	if strings.TrimSpace(src) == "" {
		return nil, errorAt(src, 0, "empty predicate")
	}
	tree, err := parser.Parse(src)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, errorAt(src, fe.From, "syntax error: %s", fe.Message)
		}
		return nil, errorAt(src, 0, "syntax error: %v", err)
	}
	c := &checker{src: src, s: s}
	v, err := c.check(tree.Node)
	if err != nil {
		return nil, err
	}
	if v.kind != kindInt {
		return nil, c.errorf(tree.Node, "predicate must evaluate to a seq (an int), not %s", v.describe())
	}
	p := &Predicate{src: src, tree: tree.Node, root: v.n, schema: s, nsites: len(s.Sites), nlevels: s.NumLevels()}
	p.root.levelsRead(&p.levels)
	return p, nil
}

// String returns the predicate's source. A dual whose list sizes depend on
// origin or self renders as dual(source); see SourceAt.
func (p *Predicate) String() string {
	if !p.dual {
		return p.src
	}
	if src, ok := p.render(-1, -1); ok {
		return src
	}
	return "dual(" + p.src + ")"
}

// ReadsLevel reports whether the predicate reads the given level.
func (p *Predicate) ReadsLevel(level int) bool {
	return level >= 0 && level < 64 && p.levels&(1<<uint(level)) != 0
}

// Eval evaluates the predicate over one stream's ack table, laid out flat as
// acks[level*len(Sites)+site], for the given origin and evaluating site. It
// allocates nothing and never panics; a table of the wrong shape or a site
// index out of range is an error.
func (p *Predicate) Eval(acks []uint64, origin, self int) (uint64, error) {
	if len(acks) < p.nsites*p.nlevels {
		return 0, fmt.Errorf("frontier: eval %q: ack table has %d entries, want %d (%d levels x %d sites)",
			p.src, len(acks), p.nsites*p.nlevels, p.nlevels, p.nsites)
	}
	if uint(origin) >= uint(p.nsites) || uint(self) >= uint(p.nsites) {
		return 0, fmt.Errorf("frontier: eval %q: origin %d or self %d out of range (%d sites)", p.src, origin, self, p.nsites)
	}
	return p.root.eval(acks, p.nsites, origin, self), nil
}

// Satisfiable reports whether the predicate can ever exceed 0 for streams of
// the given origin evaluated at self: whether every site holding every level
// would satisfy it. A k larger than a list that excludes origin is the usual
// reason it cannot.
func (p *Predicate) Satisfiable(origin, self int) bool {
	return p.Holds(SiteSet(1<<uint(p.nsites)-1), origin, self)
}

// kind is the static type of a checked sub-expression.
type kind uint8

const (
	kindSite     kind = iota // one site
	kindSiteList             // a set of sites
	kindInt                  // a seq
	kindIntList              // several seqs
	kindString               // a string literal that is not (yet) a site
	kindNumber               // an integer literal
)

type value struct {
	kind  kind
	site  siteRef
	sites siteList
	n     *node
	args  []arg // kindIntList
	str   string
	num   int
}

func (v value) describe() string {
	switch v.kind {
	case kindSite:
		return "a site"
	case kindSiteList:
		return "a list of sites"
	case kindIntList:
		return "a list of seqs"
	case kindString:
		return fmt.Sprintf("the string %q", v.str)
	case kindNumber:
		return fmt.Sprintf("the number %d", v.num)
	}
	return "a seq"
}

type checker struct {
	src   string
	s     *Schema
	nodes int
}

func (c *checker) errorf(n ast.Node, format string, args ...any) error {
	return errorAt(c.src, n.Location().From, format, args...)
}

func (c *checker) check(n ast.Node) (value, error) {
	c.nodes++
	if c.nodes > MaxNodes {
		return value{}, c.errorf(n, "predicate has more than %d nodes", MaxNodes)
	}
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return c.ident(n)
	case *ast.StringNode:
		return value{kind: kindString, str: n.Value}, nil
	case *ast.IntegerNode:
		return value{kind: kindNumber, num: n.Value}, nil
	case *ast.UnaryNode:
		if in, ok := n.Node.(*ast.IntegerNode); ok && n.Operator == "-" {
			c.nodes++
			return value{kind: kindNumber, num: -in.Value}, nil
		}
		return value{}, c.errorf(n, "operator %q is not allowed: a predicate may only combine acks with min, max, kth_max, kth_min, quorum and majority", n.Operator)
	case *ast.ArrayNode:
		return c.array(n)
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			return value{}, c.errorf(n, "only calls of named functions are allowed")
		}
		return c.call(n, id.Value, n.Arguments)
	case *ast.BuiltinNode:
		return c.call(n, n.Name, n.Arguments)
	}
	if name, ok := dashedName(n); ok {
		if _, known := c.s.SiteIndex(name); known {
			return value{}, c.errorf(leftmost(n), "unknown name %s: site names are quoted, as in persisted(%q)", name, name)
		}
	}
	return value{}, c.errorf(n, "%s", disallowed(n))
}

func leftmost(n ast.Node) ast.Node {
	if b, ok := n.(*ast.BinaryNode); ok {
		return leftmost(b.Left)
	}
	return n
}

// dashedName reassembles what the parser read as a subtraction, such as
// us-east-1, so that an unquoted site name gets a helpful error.
func dashedName(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return n.Value, true
	case *ast.IntegerNode:
		return strconv.Itoa(n.Value), true
	case *ast.BinaryNode:
		l, lok := dashedName(n.Left)
		r, rok := dashedName(n.Right)
		return l + "-" + r, lok && rok && n.Operator == "-"
	}
	return "", false
}

func disallowed(n ast.Node) string {
	switch n := n.(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "+", "-", "*", "/", "%", "**", "^":
			return fmt.Sprintf("arithmetic (%q) is not allowed: it could make the frontier move backwards", n.Operator)
		case "==", "!=", "<", ">", "<=", ">=", "in", "matches", "contains", "startsWith", "endsWith":
			return fmt.Sprintf("comparison (%q) is not allowed: a predicate evaluates to a seq, not a boolean", n.Operator)
		case "&&", "||", "and", "or", "??":
			return fmt.Sprintf("logical operator %q is not allowed: use min (all hold) and max (any holds)", n.Operator)
		}
		return fmt.Sprintf("operator %q is not allowed", n.Operator)
	case *ast.ConditionalNode:
		return "conditionals are not allowed: a predicate may not branch"
	case *ast.FloatNode:
		return fmt.Sprintf("number %v is not allowed: the only numbers allowed are the k of kth_max, kth_min and quorum", n.Value)
	case *ast.BoolNode, *ast.NilNode:
		return "literal is not allowed: predicates take site names and the k of kth_max, kth_min and quorum only"
	case *ast.MemberNode, *ast.ChainNode, *ast.SliceNode:
		return "member access and indexing are not allowed"
	case *ast.MapNode, *ast.PairNode:
		return "maps are not allowed"
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		return "variables and sequences are not allowed"
	case *ast.PointerNode, *ast.PredicateNode:
		return "closures are not allowed"
	}
	return fmt.Sprintf("expression %T is not allowed", n)
}

func (c *checker) ident(n *ast.IdentifierNode) (value, error) {
	switch n.Value {
	case "sites":
		return value{kind: kindSiteList, sites: siteList{static: allSites(len(c.s.Sites))}}, nil
	case "origin":
		return value{kind: kindSite, site: siteRef{kind: refOrigin}}, nil
	case "self":
		return value{kind: kindSite, site: siteRef{kind: refSelf}}, nil
	}
	if _, ok := function(n.Value); ok {
		return value{}, c.errorf(n, "%s is a function: call it as %s(...)", n.Value, n.Value)
	}
	if _, ok := c.s.SiteIndex(n.Value); ok {
		return value{}, c.errorf(n, "unknown name %s: site names are quoted, as in persisted(%q)", n.Value, n.Value)
	}
	return value{}, c.errorf(n, "unknown name %s (known: sites, origin, self)", n.Value)
}

func allSites(n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(n) - 1
}

// array checks a list literal: either sites (names, origin, self) or seqs.
func (c *checker) array(n *ast.ArrayNode) (value, error) {
	if len(n.Nodes) == 0 {
		return value{}, c.errorf(n, "empty list")
	}
	if len(n.Nodes) > MaxSites {
		return value{}, c.errorf(n, "list has %d elements, at most %d are allowed", len(n.Nodes), MaxSites)
	}
	var sites siteList
	var ints []arg
	for _, e := range n.Nodes {
		v, err := c.check(e)
		if err != nil {
			return value{}, err
		}
		if v.kind == kindString {
			if v, err = c.siteNamed(e, v.str); err != nil {
				return value{}, err
			}
		}
		switch {
		case v.kind == kindSite && ints == nil:
			switch v.site.kind {
			case refOrigin:
				sites.incOrigin = true
			case refSelf:
				sites.incSelf = true
			default:
				sites.static |= 1 << uint(v.site.idx)
			}
		case v.kind == kindInt && sites == (siteList{}):
			ints = append(ints, arg{scalar: v.n})
		default:
			return value{}, c.errorf(e, "a list holds either sites or seqs, not %s", v.describe())
		}
	}
	if ints != nil {
		return value{kind: kindIntList, args: ints}, nil
	}
	return value{kind: kindSiteList, sites: sites}, nil
}

func (c *checker) siteNamed(n ast.Node, name string) (value, error) {
	i, ok := c.s.SiteIndex(name)
	if !ok {
		return value{}, c.errorf(n, "unknown site %q (known: %s)", name, strings.Join(c.s.Sites, ", "))
	}
	return value{kind: kindSite, site: siteRef{kind: refStatic, idx: i}}, nil
}

// site checks an argument that must name one site or a list of sites.
func (c *checker) sitesArg(fn string, n ast.Node) (value, error) {
	v, err := c.check(n)
	if err != nil {
		return value{}, err
	}
	if v.kind == kindString {
		return c.siteNamed(n, v.str)
	}
	if v.kind != kindSite && v.kind != kindSiteList {
		return value{}, c.errorf(n, "%s takes a site or a list of sites, not %s", fn, v.describe())
	}
	return v, nil
}

type checkFunc func(c *checker, call ast.Node, args []ast.Node) (value, error)

// function returns the checker of a whitelisted function.
func function(name string) (checkFunc, bool) {
	switch name {
	case "group":
		return (*checker).group, true
	case "others":
		return (*checker).others, true
	case "except":
		return (*checker).except, true
	case "received":
		return levelFunc(Received, name), true
	case "persisted":
		return levelFunc(Persisted, name), true
	case "applied":
		return levelFunc(Applied, name), true
	case "level":
		return (*checker).level, true
	case "min":
		return minmaxFunc(opMin, name), true
	case "max":
		return minmaxFunc(opMax, name), true
	case "kth_max", "quorum":
		return kthFunc(name, false), true
	case "kth_min":
		return kthFunc(name, true), true
	case "majority":
		return (*checker).majority, true
	}
	return nil, false
}

func functionNames() string {
	return "group, others, except, received, persisted, applied, level, min, max, kth_max, kth_min, quorum, majority"
}

func (c *checker) call(n ast.Node, name string, args []ast.Node) (value, error) {
	f, ok := function(name)
	if !ok {
		return value{}, c.errorf(n, "unknown function %s (known: %s)", name, functionNames())
	}
	return f(c, n, args)
}

func (c *checker) arity(n ast.Node, fn string, args []ast.Node, want int) error {
	if len(args) != want {
		return c.errorf(n, "%s takes %d argument%s, got %d", fn, want, plural(want), len(args))
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (c *checker) group(n ast.Node, args []ast.Node) (value, error) {
	if err := c.arity(n, "group", args, 1); err != nil {
		return value{}, err
	}
	c.nodes++
	s, ok := args[0].(*ast.StringNode)
	if !ok {
		return value{}, c.errorf(args[0], "group takes a quoted group name, as in group(\"eu\")")
	}
	members, ok := c.s.Groups[s.Value]
	if !ok {
		known := strings.Join(c.s.groupNames(), ", ")
		if known == "" {
			known = "none configured"
		}
		return value{}, c.errorf(args[0], "unknown group %q (known: %s)", s.Value, known)
	}
	var l siteList
	for _, m := range members {
		i, _ := c.s.SiteIndex(m)
		l.static |= 1 << uint(i)
	}
	return value{kind: kindSiteList, sites: l}, nil
}

func (c *checker) others(n ast.Node, args []ast.Node) (value, error) {
	if err := c.arity(n, "others", args, 0); err != nil {
		return value{}, err
	}
	l := siteList{static: allSites(len(c.s.Sites)), exclOrigin: true}
	return c.nonEmpty(n, value{kind: kindSiteList, sites: l})
}

// nonEmpty rejects a list that is empty whatever origin and self are.
func (c *checker) nonEmpty(n ast.Node, v value) (value, error) {
	if _, hi := v.sites.sizeRange(len(c.s.Sites)); hi == 0 {
		return value{}, c.errorf(n, "list is always empty in this configuration")
	}
	return v, nil
}

func (c *checker) except(n ast.Node, args []ast.Node) (value, error) {
	if len(args) < 2 {
		return value{}, c.errorf(n, "except takes a list and at least one site to remove, as in except(sites, origin)")
	}
	v, err := c.check(args[0])
	if err != nil {
		return value{}, err
	}
	if v.kind != kindSiteList {
		return value{}, c.errorf(args[0], "except takes a list of sites first, not %s", v.describe())
	}
	for _, a := range args[1:] {
		s, err := c.check(a)
		if err != nil {
			return value{}, err
		}
		if s.kind == kindString {
			if s, err = c.siteNamed(a, s.str); err != nil {
				return value{}, err
			}
		}
		if s.kind != kindSite {
			return value{}, c.errorf(a, "except removes sites named one by one, not %s", s.describe())
		}
		switch s.site.kind {
		case refOrigin:
			v.sites.exclOrigin = true
		case refSelf:
			v.sites.exclSelf = true
		default:
			v.sites.excl |= 1 << uint(s.site.idx)
		}
	}
	return c.nonEmpty(n, v)
}

func levelFunc(level int, name string) checkFunc {
	return func(c *checker, n ast.Node, args []ast.Node) (value, error) {
		if err := c.arity(n, name, args, 1); err != nil {
			return value{}, err
		}
		return c.read(name, level, args[0])
	}
}

// read lowers a level read of one site (an int) or of a list (ints).
func (c *checker) read(fn string, level int, a ast.Node) (value, error) {
	v, err := c.sitesArg(fn, a)
	if err != nil {
		return value{}, err
	}
	if v.kind == kindSite {
		return value{kind: kindInt, n: &node{op: opAck, level: level, site: v.site}}, nil
	}
	return value{kind: kindIntList, args: []arg{{level: level, sites: v.sites}}}, nil
}

func (c *checker) level(n ast.Node, args []ast.Node) (value, error) {
	if err := c.arity(n, "level", args, 2); err != nil {
		return value{}, err
	}
	c.nodes++
	s, ok := args[0].(*ast.StringNode)
	if !ok {
		return value{}, c.errorf(args[0], "level takes a quoted level name first, as in level(\"verified\", sites)")
	}
	l, ok := c.s.LevelIndex(s.Value)
	if !ok {
		return value{}, c.errorf(args[0], "unknown level %q (known: %s)", s.Value, strings.Join(c.s.LevelNames(), ", "))
	}
	return c.read("level", l, args[1])
}

// ints checks the arguments of min and max: ints and lists of ints, mixed.
func (c *checker) ints(fn string, args []ast.Node) ([]arg, error) {
	var out []arg
	for _, a := range args {
		v, err := c.check(a)
		if err != nil {
			return nil, err
		}
		switch v.kind {
		case kindInt:
			out = append(out, arg{scalar: v.n})
		case kindIntList:
			out = append(out, v.args...)
		case kindNumber:
			return nil, c.errorf(a, "number %d is not allowed here: the only numbers allowed are the k of kth_max, kth_min and quorum", v.num)
		default:
			return nil, c.errorf(a, "%s takes seqs or lists of seqs, not %s%s", fn, v.describe(), hint(v))
		}
	}
	return out, nil
}

func hint(v value) string {
	if v.kind == kindSite || v.kind == kindSiteList || v.kind == kindString {
		return " (read a level first, as in persisted(...))"
	}
	return ""
}

func minmaxFunc(o op, name string) checkFunc {
	return func(c *checker, n ast.Node, args []ast.Node) (value, error) {
		if len(args) == 0 {
			return value{}, c.errorf(n, "%s needs at least one argument", name)
		}
		as, err := c.ints(name, args)
		if err != nil {
			return value{}, err
		}
		return value{kind: kindInt, n: &node{op: o, args: as}}, nil
	}
}

// intList checks an argument that must be a list of seqs and returns it with
// the smallest and largest length it can have.
func (c *checker) intList(fn string, a ast.Node) (args []arg, lo, hi int, err error) {
	v, err := c.check(a)
	if err != nil {
		return nil, 0, 0, err
	}
	if v.kind != kindIntList {
		return nil, 0, 0, c.errorf(a, "%s takes a list of seqs, not %s%s", fn, v.describe(), hint(v))
	}
	if len(v.args) == 1 && v.args[0].scalar == nil {
		lo, hi = v.args[0].sites.sizeRange(len(c.s.Sites))
		return v.args, lo, hi, nil
	}
	return v.args, len(v.args), len(v.args), nil
}

func kthFunc(name string, fromMin bool) checkFunc {
	return func(c *checker, n ast.Node, args []ast.Node) (value, error) {
		if err := c.arity(n, name, args, 2); err != nil {
			return value{}, err
		}
		c.nodes++
		k, ok := literalInt(args[0])
		if !ok {
			return value{}, c.errorf(args[0], "the k of %s must be an integer literal, as in %s(2, persisted(sites))", name, name)
		}
		as, _, hi, err := c.intList(name, args[1])
		if err != nil {
			return value{}, err
		}
		if k < 1 || k > hi {
			return value{}, c.errorf(args[0], "k = %d is out of range for %s over a list of %d (1..%d)", k, name, hi, hi)
		}
		nd := &node{op: opKth, k: kspec{kFixed, k}, fromMin: fromMin, args: as}
		return value{kind: kindInt, n: nd}, nil
	}
}

func literalInt(n ast.Node) (int, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return n.Value, true
	case *ast.UnaryNode:
		if in, ok := n.Node.(*ast.IntegerNode); ok && n.Operator == "-" {
			return -in.Value, true
		}
	}
	return 0, false
}

func (c *checker) majority(n ast.Node, args []ast.Node) (value, error) {
	if err := c.arity(n, "majority", args, 1); err != nil {
		return value{}, err
	}
	as, _, _, err := c.intList("majority", args[0])
	if err != nil {
		return value{}, err
	}
	return value{kind: kindInt, n: &node{op: opKth, k: kspec{mode: kMajority}, args: as}}, nil
}

// listLen is the length of a checked list argument at a given origin and self.
func listLen(as []arg, origin, self int) int {
	if len(as) == 1 && as[0].scalar == nil {
		return bits.OnesCount64(as[0].sites.mask(origin, self))
	}
	return len(as)
}
