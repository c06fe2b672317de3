package wan

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Topology names sites, their groups and the shaping of every directed link
// between them. It is immutable once loaded.
type Topology struct {
	// Name identifies the topology (a preset name, or the file's).
	Name string
	// Description and Source are free text; Source names where the
	// numbers come from.
	Description string
	Source      string
	// Sites in file order.
	Sites []string
	// Groups maps a group name to its member sites.
	Groups map[string][]string

	links map[linkKey]LinkConfig
}

// topologyFile is the YAML form. See the presets for a commented example.
type topologyFile struct {
	Name        string                        `yaml:"name"`
	Description string                        `yaml:"description"`
	Source      string                        `yaml:"source"`
	Sites       []string                      `yaml:"sites"`
	Groups      map[string][]string           `yaml:"groups"`
	RTTms       map[string]map[string]float64 `yaml:"rtt_ms"`
	Bandwidth   Bandwidth                     `yaml:"bandwidth"`
	JitterMs    float64                       `yaml:"jitter_ms"`
	Loss        float64                       `yaml:"loss"`
	Links       []linkOverride                `yaml:"links"`
}

// linkOverride sets one direction explicitly; unset fields keep the
// defaults (delay from rtt_ms, the file's bandwidth, jitter and loss).
type linkOverride struct {
	From      string     `yaml:"from"`
	To        string     `yaml:"to"`
	DelayMs   *float64   `yaml:"delay_ms"`
	JitterMs  *float64   `yaml:"jitter_ms"`
	Bandwidth *Bandwidth `yaml:"bandwidth"`
	Loss      *float64   `yaml:"loss"`
}

// UnmarshalYAML accepts "20MB/s" as well as a bare number of bytes/s.
func (b *Bandwidth) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: bandwidth must be a scalar such as 20MB/s", n.Line)
	}
	return b.UnmarshalText([]byte(n.Value))
}

//go:embed topologies/*.yaml
var presetFS embed.FS

// PresetNames lists the built-in topologies, sorted.
func PresetNames() []string {
	ents, _ := presetFS.ReadDir("topologies")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Preset returns a built-in topology by name, e.g. "ec2-3" or "ec2-5".
func Preset(name string) (*Topology, error) {
	data, err := presetFS.ReadFile(path.Join("topologies", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("wan: no preset topology %q (presets: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return ParseTopology(name, data)
}

// LoadTopology reads and validates a topology file.
func LoadTopology(file string) (*Topology, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("wan: topology: %w", err)
	}
	return ParseTopology(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), data)
}

// OpenTopology returns the preset called ref if there is one, else loads
// ref as a file. This is what a --topology flag takes.
func OpenTopology(ref string) (*Topology, error) {
	if slices.Contains(PresetNames(), ref) {
		return Preset(ref)
	}
	return LoadTopology(ref)
}

// ParseTopology decodes and validates a topology. name is used in errors
// and when the file has no name of its own. Every problem is reported, each
// naming its field.
func ParseTopology(name string, data []byte) (*Topology, error) {
	var f topologyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("wan: topology %s: %w", name, err)
	}
	if f.Name != "" {
		name = f.Name
	}
	t, errs := f.resolve(name)
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("wan: topology %s: %w", name, e)
		}
		return nil, errors.Join(errs...)
	}
	return t, nil
}

func (f *topologyFile) resolve(name string) (*Topology, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	known := make(map[string]bool, len(f.Sites))
	if len(f.Sites) == 0 {
		bad("sites: at least one site is required")
	}
	for i, s := range f.Sites {
		switch {
		case strings.TrimSpace(s) == "":
			bad("sites[%d]: empty site name", i)
		case known[s]:
			bad("sites[%d]: site %q listed twice", i, s)
		}
		known[s] = true
	}
	siteList := strings.Join(f.Sites, ", ")
	checkSite := func(field, s string) bool {
		if known[s] {
			return true
		}
		bad("%s: unknown site %q (known: %s)", field, s, siteList)
		return false
	}

	for _, g := range sortedKeys(f.Groups) {
		if strings.TrimSpace(g) == "" {
			bad("groups: empty group name")
		}
		seen := map[string]bool{}
		for i, s := range f.Groups[g] {
			field := fmt.Sprintf("groups.%s[%d]", g, i)
			if checkSite(field, s) && seen[s] {
				bad("%s: site %q listed twice", field, s)
			}
			seen[s] = true
		}
	}

	if f.Bandwidth < 0 {
		bad("bandwidth: must not be negative")
	}
	if !finite(f.JitterMs) || f.JitterMs < 0 || f.JitterMs > maxMs {
		bad("jitter_ms: %v must be zero or positive", f.JitterMs)
	}
	if !finite(f.Loss) || f.Loss < 0 || f.Loss >= 1 {
		bad("loss: %v must be in [0, 1)", f.Loss)
	}

	// One-way delays from the RTT matrix: RTT/2 each way.
	oneWay := map[linkKey]time.Duration{}
	for _, a := range sortedKeys(f.RTTms) {
		if !checkSite("rtt_ms", a) {
			continue
		}
		for _, b := range sortedKeys(f.RTTms[a]) {
			field := fmt.Sprintf("rtt_ms.%s.%s", a, b)
			if !checkSite(field, b) {
				continue
			}
			v := f.RTTms[a][b]
			if a == b {
				bad("%s: a site has no link to itself", field)
				continue
			}
			if !finite(v) || v <= 0 || v > maxMs {
				bad("%s: %v must be a positive number of milliseconds (at most an hour)", field, v)
				continue
			}
			if w, ok := f.RTTms[b][a]; ok && w != v {
				if a < b {
					bad("%s is %v but rtt_ms.%s.%s is %v: a round trip is the same both ways (give one-way delay_ms under links for an asymmetric path)", field, v, b, a, w)
				}
				continue
			}
			d := ms(v / 2)
			oneWay[linkKey{a, b}], oneWay[linkKey{b, a}] = d, d
		}
	}

	base := LinkConfig{Jitter: ms(f.JitterMs), Bandwidth: f.Bandwidth, Loss: f.Loss}
	links := map[linkKey]LinkConfig{}
	for k, d := range oneWay {
		c := base
		c.Delay = d
		links[k] = c
	}
	overridden := map[linkKey]bool{}
	for i, o := range f.Links {
		field := fmt.Sprintf("links[%d]", i)
		okFrom, okTo := checkSite(field+".from", o.From), checkSite(field+".to", o.To)
		if !okFrom || !okTo {
			continue
		}
		k := linkKey{o.From, o.To}
		if o.From == o.To {
			bad("%s: from and to are both %q", field, o.From)
			continue
		}
		if overridden[k] {
			bad("%s: link %s->%s given twice", field, o.From, o.To)
			continue
		}
		overridden[k] = true
		c, ok := links[k]
		if !ok {
			c = base
		}
		if o.DelayMs != nil {
			if !finite(*o.DelayMs) || *o.DelayMs <= 0 || *o.DelayMs > maxMs {
				bad("%s.delay_ms: %v must be a positive number of milliseconds (at most an hour)", field, *o.DelayMs)
			}
			c.Delay = ms(*o.DelayMs)
			oneWay[k] = c.Delay
		}
		if o.JitterMs != nil {
			if !finite(*o.JitterMs) || *o.JitterMs < 0 || *o.JitterMs > maxMs {
				bad("%s.jitter_ms: %v must be zero or positive", field, *o.JitterMs)
			}
			c.Jitter = ms(*o.JitterMs)
		}
		if o.Bandwidth != nil {
			c.Bandwidth = *o.Bandwidth
		}
		if o.Loss != nil {
			if !finite(*o.Loss) || *o.Loss < 0 || *o.Loss >= 1 {
				bad("%s.loss: %v must be in [0, 1)", field, *o.Loss)
			}
			c.Loss = *o.Loss
		}
		links[k] = c
	}

	// Every direction between two sites needs a delay.
	for i, a := range f.Sites {
		for _, b := range f.Sites[i+1:] {
			if a == b {
				continue
			}
			_, ab := oneWay[linkKey{a, b}]
			_, ba := oneWay[linkKey{b, a}]
			switch {
			case !ab && !ba:
				bad("rtt_ms: no round trip between %s and %s (add rtt_ms.%s.%s)", a, b, a, b)
			case !ab:
				bad("links: no delay for %s->%s (add rtt_ms.%s.%s, or delay_ms for it under links)", a, b, a, b)
			case !ba:
				bad("links: no delay for %s->%s (add rtt_ms.%s.%s, or delay_ms for it under links)", b, a, a, b)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	groups := make(map[string][]string, len(f.Groups))
	for g, m := range f.Groups {
		groups[g] = slices.Clone(m)
	}
	return &Topology{
		Name:        name,
		Description: strings.TrimSpace(f.Description),
		Source:      strings.TrimSpace(f.Source),
		Sites:       slices.Clone(f.Sites),
		Groups:      groups,
		links:       links,
	}, nil
}

// HasSite reports whether site is in the topology.
func (t *Topology) HasSite(site string) bool { return slices.Contains(t.Sites, site) }

// LinkConfig is the shaping of the link from one site to another.
func (t *Topology) LinkConfig(from, to string) (LinkConfig, error) {
	c, ok := t.links[linkKey{from, to}]
	if !ok {
		for _, s := range []string{from, to} {
			if !t.HasSite(s) {
				return LinkConfig{}, fmt.Errorf("wan: topology %s: %w %q (known: %s)", t.Name, ErrUnknownSite, s, strings.Join(t.Sites, ", "))
			}
		}
		return LinkConfig{}, fmt.Errorf("wan: topology %s: no link %s->%s", t.Name, from, to)
	}
	return c, nil
}

// OneWay is the one-way delay from one site to another: half the round
// trip, unless the file gives that direction its own delay_ms.
func (t *Topology) OneWay(from, to string) (time.Duration, error) {
	c, err := t.LinkConfig(from, to)
	return c.Delay, err
}

// RTT is the round trip between two sites: the sum of both one-way delays.
func (t *Topology) RTT(a, b string) (time.Duration, error) {
	ab, err := t.OneWay(a, b)
	if err != nil {
		return 0, err
	}
	ba, err := t.OneWay(b, a)
	return ab + ba, err
}

// maxMs bounds delays in files (an hour) so that they fit a time.Duration.
const maxMs = 3_600_000

func ms(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
