package frontier

import (
	"fmt"
	"slices"
	"sort"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// exprRef evaluates predicates on plain expr-lang, with the functions of
// DESIGN.md §3 written the obvious way over maps and slices. It is the
// reference the lowered evaluator is checked against and the baseline it is
// benchmarked against.
type exprRef struct {
	prog *vm.Program
	s    *Schema
	cur  *refEnv // the table being evaluated; not safe for concurrent use
	vars map[string]any
}

type refEnv struct {
	acks   []uint64
	s      *Schema
	origin string
	self   string
}

func newExprRef(src string, s *Schema) (*exprRef, error) {
	if exp, ok := Builtins[src]; ok {
		src = exp
	}
	r := &exprRef{s: s, vars: map[string]any{"sites": s.Sites, "origin": "", "self": ""}}
	opts := []expr.Option{expr.Env(r.vars)}
	for name, f := range refFunctions(func() *refEnv { return r.cur }) {
		opts = append(opts, expr.Function(name, f))
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, err
	}
	r.prog = prog
	return r, nil
}

func (r *exprRef) eval(acks []uint64, origin, self int) (uint64, error) {
	r.cur = &refEnv{acks: acks, s: r.s, origin: r.s.Sites[origin], self: r.s.Sites[self]}
	r.vars["origin"], r.vars["self"] = r.cur.origin, r.cur.self
	out, err := expr.Run(r.prog, r.vars)
	if err != nil {
		return 0, err
	}
	return uint64(out.(int)), nil
}

// refFunctions implements the functions; expr.Function does not see the
// environment, so they read the table through env.
func refFunctions(env func() *refEnv) map[string]func(params ...any) (any, error) {
	level := func(l int) func(params ...any) (any, error) {
		return func(params ...any) (any, error) {
			return read(env(), l, params[0]), nil
		}
	}
	return map[string]func(params ...any) (any, error){
		"group": func(p ...any) (any, error) {
			return slices.Clone(env().s.Groups[p[0].(string)]), nil
		},
		"others": func(p ...any) (any, error) {
			e := env()
			return without(e.s.Sites, e.origin), nil
		},
		"except": func(p ...any) (any, error) {
			out := toStrings(p[0])
			for _, n := range p[1:] {
				out = without(out, n.(string))
			}
			return out, nil
		},
		"received":  level(Received),
		"persisted": level(Persisted),
		"applied":   level(Applied),
		"level": func(p ...any) (any, error) {
			e := env()
			l, _ := e.s.LevelIndex(p[0].(string))
			return read(e, l, p[1]), nil
		},
		"min":      func(p ...any) (any, error) { return extreme(flatten(p), true), nil },
		"max":      func(p ...any) (any, error) { return extreme(flatten(p), false), nil },
		"kth_max":  func(p ...any) (any, error) { return kth(p[0].(int), toInts(p[1]), false), nil },
		"quorum":   func(p ...any) (any, error) { return kth(p[0].(int), toInts(p[1]), false), nil },
		"kth_min":  func(p ...any) (any, error) { return kth(p[0].(int), toInts(p[1]), true), nil },
		"majority": func(p ...any) (any, error) { l := toInts(p[0]); return kth(len(l)/2+1, l, false), nil },
	}
}

func without(list []string, name string) []string {
	var out []string
	for _, s := range list {
		if s != name {
			out = append(out, s)
		}
	}
	return out
}

func toStrings(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = x.(string)
		}
		return out
	}
	panic(fmt.Sprintf("not a list of sites: %T", v))
}

func toInts(v any) []int {
	switch v := v.(type) {
	case []int:
		return v
	case []any:
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = x.(int)
		}
		return out
	}
	panic(fmt.Sprintf("not a list of ints: %T", v))
}

// read returns one ack, or the acks of a list of sites with duplicates
// removed: lists are sets.
func read(e *refEnv, level int, x any) any {
	at := func(name string) int {
		i, _ := e.s.SiteIndex(name)
		return int(e.acks[level*len(e.s.Sites)+i])
	}
	if name, ok := x.(string); ok {
		return at(name)
	}
	var out []int
	seen := map[string]bool{}
	for _, n := range toStrings(x) {
		if !seen[n] {
			seen[n] = true
			out = append(out, at(n))
		}
	}
	return out
}

func flatten(ps []any) []int {
	var out []int
	for _, p := range ps {
		if i, ok := p.(int); ok {
			out = append(out, i)
		} else {
			out = append(out, toInts(p)...)
		}
	}
	return out
}

func extreme(vals []int, lowest bool) int {
	if len(vals) == 0 {
		return 0
	}
	if lowest {
		return slices.Min(vals)
	}
	return slices.Max(vals)
}

func kth(k int, vals []int, fromMin bool) int {
	if k < 1 || k > len(vals) {
		return 0
	}
	s := slices.Clone(vals)
	sort.Sort(sort.Reverse(sort.IntSlice(s)))
	if fromMin {
		return s[len(s)-k]
	}
	return s[k-1]
}
