// Package safepath is a throwaway stand-in for fileshare/safepath.
package safepath

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

const StateDir = ".stabsync"

func Check(p string) error {
	if p == "" {
		return errors.New("safepath: empty path")
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("safepath: %q is absolute", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("safepath: %q holds a control character", p)
		}
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("safepath: %q has element %q", p, el)
		}
	}
	if first, _, _ := strings.Cut(p, "/"); strings.EqualFold(first, StateDir) {
		return fmt.Errorf("safepath: %q is in the state dir", p)
	}
	return nil
}

func FoldKey(p string) string { return strings.ToLower(p) }

func Collisions(paths []string) [][]string {
	m := map[string][]string{}
	for _, p := range paths {
		m[FoldKey(p)] = append(m[FoldKey(p)], p)
	}
	var out [][]string
	for _, g := range m {
		if len(g) > 1 {
			sort.Strings(g)
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
