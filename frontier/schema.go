package frontier

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Built-in acknowledgement levels. Their indices are fixed; custom levels
// follow from CustomLevelBase in Schema.Levels order.
const (
	Received        = 0
	Persisted       = 1
	Applied         = 2
	CustomLevelBase = 3
)

// MaxSites bounds the sites of one schema so that a set of sites fits a
// uint64 bit mask, which keeps evaluation free of allocations.
const MaxSites = 64

// builtinLevels are the level names every schema knows, in index order.
var builtinLevels = [...]string{"received", "persisted", "applied"}

// Builtins are the named predicates every site knows (DESIGN.md §3).
// `none` is the origin's own append seq: the origin acknowledges `received`
// for a message the moment Append assigns its seq.
var Builtins = map[string]string{
	"none":       "received(origin)",
	"local":      "persisted(origin)",
	"majority":   "majority(persisted(sites))",
	"all":        "min(persisted(sites))",
	"one_remote": "max(persisted(others()))",
}

// BuiltinNames lists the keys of Builtins in a stable order.
func BuiltinNames() []string {
	return []string{"none", "local", "majority", "all", "one_remote"}
}

// Schema is what a predicate is compiled against: the configured sites, their
// groups and the known acknowledgement levels. A Schema must not be changed
// after it has been used to compile a predicate.
type Schema struct {
	// Sites are all configured sites in configuration order (1..64).
	Sites []string
	// Groups maps a group name to its member sites.
	Groups map[string][]string
	// Levels are custom levels besides received, persisted and applied, such
	// as "verified". Their indices start at CustomLevelBase.
	Levels []string
}

// Validate reports every problem of the schema, not only the first.
func (s *Schema) Validate() error {
	var errs []error
	if len(s.Sites) == 0 {
		errs = append(errs, errors.New("frontier: schema: sites: no sites configured"))
	}
	if len(s.Sites) > MaxSites {
		errs = append(errs, fmt.Errorf("frontier: schema: sites: %d sites, at most %d are supported", len(s.Sites), MaxSites))
	}
	seen := map[string]bool{}
	for i, name := range s.Sites {
		if err := checkName(name); err != nil {
			errs = append(errs, fmt.Errorf("frontier: schema: sites[%d]: %w", i, err))
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("frontier: schema: sites[%d]: duplicate site %q", i, name))
		}
		seen[name] = true
	}
	for _, g := range sortedKeys(s.Groups) {
		if err := checkName(g); err != nil {
			errs = append(errs, fmt.Errorf("frontier: schema: groups: %w", err))
		}
		if len(s.Groups[g]) == 0 {
			errs = append(errs, fmt.Errorf("frontier: schema: groups.%s: group has no sites", g))
		}
		for _, m := range s.Groups[g] {
			if !seen[m] {
				errs = append(errs, fmt.Errorf("frontier: schema: groups.%s: unknown site %q (known: %s)", g, m, strings.Join(s.Sites, ", ")))
			}
		}
	}
	if s.NumLevels() > 64 {
		errs = append(errs, fmt.Errorf("frontier: schema: levels: %d levels, at most 64 are supported", s.NumLevels()))
	}
	lv := map[string]bool{"received": true, "persisted": true, "applied": true}
	for i, l := range s.Levels {
		if err := checkName(l); err != nil {
			errs = append(errs, fmt.Errorf("frontier: schema: levels[%d]: %w", i, err))
		}
		if lv[l] {
			errs = append(errs, fmt.Errorf("frontier: schema: levels[%d]: duplicate level %q", i, l))
		}
		lv[l] = true
	}
	return errors.Join(errs...)
}

func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if strings.ContainsAny(name, "\"\\\n\t ,") {
		return fmt.Errorf("name %q contains a quote, backslash, comma or space", name)
	}
	return nil
}

// NumLevels is the number of levels, built-in and custom.
func (s *Schema) NumLevels() int { return CustomLevelBase + len(s.Levels) }

// SiteIndex returns the index of a site in configuration order.
func (s *Schema) SiteIndex(name string) (int, bool) {
	for i, n := range s.Sites {
		if n == name {
			return i, true
		}
	}
	return -1, false
}

// LevelIndex returns the index of a level: received=0, persisted=1,
// applied=2, then the custom levels.
func (s *Schema) LevelIndex(name string) (int, bool) {
	for i, n := range builtinLevels {
		if n == name {
			return i, true
		}
	}
	for i, n := range s.Levels {
		if n == name {
			return CustomLevelBase + i, true
		}
	}
	return -1, false
}

// LevelNames returns every known level name in index order.
func (s *Schema) LevelNames() []string {
	return append(builtinLevels[:len(builtinLevels):len(builtinLevels)], s.Levels...)
}

// TableSize is the length of the flat ack slice Eval expects.
func (s *Schema) TableSize() int { return s.NumLevels() * len(s.Sites) }

// groupNames returns the configured group names, sorted.
func (s *Schema) groupNames() []string { return sortedKeys(s.Groups) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
