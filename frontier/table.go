package frontier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// TableFile is the offline form of one stream's ack table (DESIGN.md §3), as
// `kvctl predicate eval --table` reads it. A site or level missing from Acks
// counts as 0; any level named in Acks is a known level.
type TableFile struct {
	Sites  []string                     `json:"sites"`
	Groups map[string][]string          `json:"groups,omitempty"`
	Origin string                       `json:"origin"`
	Self   string                       `json:"self,omitempty"`
	Acks   map[string]map[string]uint64 `json:"acks"`
}

// ParseTable decodes and validates a table file. Unknown fields are errors,
// so that a misspelt "ack" does not silently read as an empty table.
func ParseTable(data []byte) (*TableFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t TableFile
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("frontier: table: %w", err)
	}
	if dec.More() {
		return nil, errors.New("frontier: table: trailing data after the JSON object")
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

func (t *TableFile) validate() error {
	s := t.Schema()
	var errs []error
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	known := strings.Join(t.Sites, ", ")
	if t.Origin == "" {
		errs = append(errs, errors.New("frontier: table: origin: missing (the stream's origin site)"))
	} else if _, ok := s.SiteIndex(t.Origin); !ok {
		errs = append(errs, fmt.Errorf("frontier: table: origin: unknown site %q (known: %s)", t.Origin, known))
	}
	if _, ok := s.SiteIndex(t.Self); t.Self != "" && !ok {
		errs = append(errs, fmt.Errorf("frontier: table: self: unknown site %q (known: %s)", t.Self, known))
	}
	for _, level := range sortedKeys(t.Acks) {
		for _, site := range sortedKeys(t.Acks[level]) {
			if _, ok := s.SiteIndex(site); !ok {
				errs = append(errs, fmt.Errorf("frontier: table: acks.%s: unknown site %q (known: %s)", level, site, known))
			}
		}
	}
	return errors.Join(errs...)
}

// Schema returns the schema the table describes: its sites and groups, and
// as custom levels every level in Acks besides the built-in ones, sorted.
func (t *TableFile) Schema() *Schema {
	s := &Schema{Sites: t.Sites, Groups: t.Groups}
	for _, l := range sortedKeys(t.Acks) {
		if _, ok := s.LevelIndex(l); !ok {
			s.Levels = append(s.Levels, l)
		}
	}
	sort.Strings(s.Levels)
	return s
}

// Flat returns the acks laid out for Eval under schema s, and the origin and
// self indices. Self defaults to the origin.
func (t *TableFile) Flat(s *Schema) (acks []uint64, origin, self int) {
	acks = make([]uint64, s.TableSize())
	for level, row := range t.Acks {
		l, _ := s.LevelIndex(level)
		for site, seq := range row {
			i, _ := s.SiteIndex(site)
			acks[l*len(s.Sites)+i] = seq
		}
	}
	origin, _ = s.SiteIndex(t.Origin)
	self = origin
	if t.Self != "" {
		self, _ = s.SiteIndex(t.Self)
	}
	return acks, origin, self
}
