package siteconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEveryField(t *testing.T) {
	_, err := Parse([]byte(`
site: mars-1
sites:
  - name: us-east-1
    data: 127.0.0.1:1
    control: nope
  - name: us-east-1
groups:
  eu: [eu-west-9]
listen:
  data: 127.0.0.1:7001
predicates:
  bad: persisted(origin) + 1
  majority: min(persisted(sites))
kv:
  default_wait: nothing_like_this
pubsub:
  position_interval: -20ms
log_level: loud
min_free_bytes: -5
`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`site: "mars-1" is not one of sites (us-east-1, us-east-1)`,
		`sites[0].control: "nope" is not host:port`,
		"sites[0].client: missing",
		`sites[1].name: duplicate site "us-east-1"`,
		"listen.control: missing",
		"listen.http: missing",
		"data_dir: missing",
		"tls: cert, key and ca are required unless insecure",
		`log_level: "loud"`,
		"pubsub.position_interval: -20ms is negative",
		"min_free_bytes: -5 is below -1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestValidatePredicates(t *testing.T) {
	_, err := Parse([]byte(`
site: a
sites: [{name: a}, {name: b, data: "h:1", control: "h:2", client: "h:3"}]
listen: {data: "h:1", control: "h:2", client: "h:3", http: "h:4"}
data_dir: d
insecure: true
predicates:
  bad: persisted(origin) + 1
  majority: min(persisted(sites))
kv:
  default_wait: nothing_like_this
`))
	for _, want := range []string{
		"predicates.bad: 1:19: arithmetic",
		`predicates.majority: "majority" is a built-in predicate`,
		`kv.default_wait: "nothing_like_this": 1:1: unknown name nothing_like_this`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestUnknownField(t *testing.T) {
	_, err := Parse([]byte("site: a\nsitez: []\n"))
	if err == nil || !strings.Contains(err.Error(), "field sitez not found") {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	gen, err := Generate(GenerateOptions{
		Sites:  []string{"us-east-1", "eu-west-1", "ap-south-1"},
		Groups: map[string][]string{"us": {"us-east-1"}, "eu": {"eu-west-1"}},
		Dir:    dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) != 3 {
		t.Fatalf("%d sites generated", len(gen))
	}
	seen := map[string]bool{}
	for _, g := range gen {
		c, err := Load(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		if c.Site != g.Site || c.Listen.Client != g.Client || c.DataPath() != filepath.Join(dir, g.Site) {
			t.Fatalf("config %s does not match %+v", g.Config, g)
		}
		for _, a := range []string{c.Listen.Data, c.Listen.Control, c.Listen.Client, c.Listen.HTTP} {
			if seen[a] {
				t.Fatalf("address %s used twice", a)
			}
			seen[a] = true
		}
	}
	if _, err := Generate(GenerateOptions{Sites: []string{"us-east-1"}, Dir: dir}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second generate into the same folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "us-east-1.yaml")); err != nil {
		t.Fatal(err)
	}
}

func TestKVRetention(t *testing.T) {
	const base = `
site: a
sites: [{name: a}, {name: b, data: "h:1", control: "h:2", client: "h:3"}]
listen: {data: "h:1", control: "h:2", client: "h:3", http: "h:4"}
data_dir: d
insecure: true
`
	c, err := Parse([]byte(base + "kv: {retention: {log_lag: 100, max_lag_time: -1s, keep_versions: 3, keep_age: 10m}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.KV.Retention; r != (Retention{LogLag: 100, MaxLagTime: -time.Second, KeepVersions: 3, KeepAge: 10 * time.Minute}) {
		t.Errorf("parsed %+v", r)
	}
	_, err = Parse([]byte(base + "kv: {retention: {log_lag: -1, keep_versions: -2, keep_age: -1m}}\n"))
	for _, want := range []string{"kv.retention.log_lag: -1 is negative", "kv.retention.keep_versions: -2 is negative",
		"kv.retention.keep_age: -1m0s is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
