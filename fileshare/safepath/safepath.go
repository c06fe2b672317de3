package safepath

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const (
	// StateDir is the client's own directory at the top of a synced folder;
	// no path from the network may name it, in any case.
	StateDir = ".stabsync"
	// MaxSegment is the longest segment accepted, in bytes (NAME_MAX of
	// Linux and macOS).
	MaxSegment = 255
	// MaxPath is the longest path accepted, in bytes (PATH_MAX of Linux).
	MaxPath = 4096
)

// ErrBadPath is wrapped by every refusal of Check.
var ErrBadPath = errors.New("safepath: bad path")

// stateKey is FoldKey(StateDir).
var stateKey = FoldKey(StateDir)

// Check reports whether p is a path the client may write to: a clean,
// relative, slash-separated file path (see the package documentation for
// every rule). The error names p and the reason, and wraps ErrBadPath.
func Check(p string) error {
	if reason := check(p); reason != "" {
		return fmt.Errorf("%w %q: %s", ErrBadPath, p, reason)
	}
	return nil
}

// check returns why p is refused, or "".
func check(p string) string {
	switch {
	case p == "":
		return "empty"
	case !utf8.ValidString(p):
		return "invalid utf-8"
	case len(p) > MaxPath:
		return fmt.Sprintf("longer than %d bytes", MaxPath)
	}
	for i, r := range p {
		if unicode.IsControl(r) {
			return fmt.Sprintf("control character %U at byte %d", r, i)
		}
	}
	switch {
	case strings.HasPrefix(p, `\\`):
		return "windows unc path"
	case strings.Contains(p, `\`):
		return "backslash"
	case len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]):
		return "windows drive"
	case p[0] == '/':
		return "absolute"
	case strings.HasSuffix(p, "/"):
		return "trailing slash"
	}
	for i, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return fmt.Sprintf("empty segment %d", i)
		case seg == "." || seg == "..":
			return fmt.Sprintf("segment %d is %q", i, seg)
		case len(seg) > MaxSegment:
			return fmt.Sprintf("segment %d longer than %d bytes", i, MaxSegment)
		case FoldKey(seg) == stateKey:
			return fmt.Sprintf("segment %d is the state directory %s", i, StateDir)
		}
	}
	return ""
}

func isASCIILetter(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// FoldKey returns the key under which p and other paths name one file on
// a case- and normalization-insensitive filesystem: p decomposed (NFD),
// each rune replaced by the least rune of its simple case folding orbit
// (the classes strings.EqualFold uses), decomposed again. The key is for
// comparing, not for showing; FoldKey(FoldKey(p)) == FoldKey(p).
func FoldKey(p string) string {
	return norm.NFD.String(strings.Map(foldRune, norm.NFD.String(p)))
}

// foldRune returns the least rune r folds to under unicode.SimpleFold,
// which walks the orbit of r in increasing order and wraps around.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// Collisions returns the groups of distinct paths that share a FoldKey:
// each group sorted, groups sorted by their first path. Paths not in any
// group collide with nothing; a path given twice is not a collision.
func Collisions(paths []string) [][]string {
	distinct := slices.Compact(slices.Sorted(slices.Values(paths)))
	byKey := make(map[string][]string)
	for _, p := range distinct { // sorted, so every group is too
		k := FoldKey(p)
		byKey[k] = append(byKey[k], p)
	}
	var groups [][]string
	for _, g := range byKey {
		if len(g) > 1 {
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups
}
