package frontier

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the cases in testdata: a predicate and an ack table in,
// a frontier or an error out. Regenerate with -rewrite and read the diff.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *Schema
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "schema" {
				s = parseSchema(t, d.Input)
				return "ok"
			}
			if s == nil {
				d.Fatalf(t, "no schema before %s", d.Cmd)
			}
			p, err := Compile(d.Input, s)
			if err != nil {
				return errorText(err)
			}
			switch d.Cmd {
			case "compile":
				return "ok"
			case "eval":
				acks, origin, self := parseTable(t, d, s)
				v, err := p.Eval(acks, origin, self)
				if err != nil {
					return err.Error()
				}
				return strconv.FormatUint(v, 10)
			case "dual":
				_, origin, self := parseTable(t, d, s)
				return p.Dual().SourceAt(origin, self)
			case "holds":
				return holds(t, d, s, p)
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

func errorText(err error) string {
	if fe, ok := err.(*Error); ok {
		return fe.Error() + "\n" + fe.Snippet()
	}
	return err.Error()
}

// parseSchema reads lines "sites: a b c", "group NAME: a b", "levels: x y".
func parseSchema(t *testing.T, input string) *Schema {
	s := &Schema{Groups: map[string][]string{}}
	for _, line := range strings.Split(input, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("bad schema line %q", line)
		}
		fields := strings.Fields(val)
		switch key = strings.TrimSpace(key); {
		case key == "sites":
			s.Sites = fields
		case key == "levels":
			s.Levels = fields
		case strings.HasPrefix(key, "group "):
			s.Groups[strings.TrimPrefix(key, "group ")] = fields
		default:
			t.Fatalf("bad schema line %q", line)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

// parseTable reads origin=, self= and one argument per level whose values
// are site:seq pairs; "_" or a missing site means 0.
func parseTable(t *testing.T, d *datadriven.TestData, s *Schema) ([]uint64, int, int) {
	acks := make([]uint64, s.TableSize())
	origin, self := -1, -1
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "origin", "self":
			i, ok := s.SiteIndex(a.Vals[0])
			if !ok {
				d.Fatalf(t, "unknown site %s", a.Vals[0])
			}
			if a.Key == "origin" {
				origin = i
			} else {
				self = i
			}
			continue
		case "set":
			continue
		}
		l, ok := s.LevelIndex(a.Key)
		if !ok {
			d.Fatalf(t, "unknown level %s", a.Key)
		}
		for _, v := range a.Vals {
			site, seq, _ := strings.Cut(v, ":")
			i, ok := s.SiteIndex(site)
			if !ok {
				d.Fatalf(t, "unknown site %s", site)
			}
			if seq != "_" {
				n, err := strconv.ParseUint(seq, 10, 64)
				if err != nil {
					d.Fatalf(t, "bad seq %q", seq)
				}
				acks[l*len(s.Sites)+i] = n
			}
		}
	}
	if origin < 0 {
		d.Fatalf(t, "origin= is required")
	}
	if self < 0 {
		self = origin
	}
	return acks, origin, self
}

// holds prints whether the predicate and its dual hold when exactly the
// sites of set= hold the write.
func holds(t *testing.T, d *datadriven.TestData, s *Schema, p *Predicate) string {
	_, origin, self := parseTable(t, d, s)
	var set SiteSet
	for _, a := range d.CmdArgs {
		if a.Key != "set" {
			continue
		}
		for _, v := range a.Vals {
			i, ok := s.SiteIndex(v)
			if !ok && v != "" {
				d.Fatalf(t, "unknown site %s", v)
			}
			if ok {
				set |= SiteSetOf(i)
			}
		}
	}
	return fmt.Sprintf("predicate: %t\ndual: %t", p.Holds(set, origin, self), p.Dual().Holds(set, origin, self))
}
