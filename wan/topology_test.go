package wan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseBandwidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bandwidth
		err  bool
	}{
		{"20MB/s", 20 * MBPerSecond, false},
		{"20 mb/s", 20 * MBPerSecond, false},
		{"1.5GB/s", 1500 * MBPerSecond, false},
		{"512KiB/s", 512 * 1024, false},
		{"100Mbit/s", 12_500_000, false},
		{"1Gbps", 125 * MBPerSecond, false},
		{"1000", 1000, false},
		{"0", 0, false},
		{"unlimited", 0, false},
		{"", 0, false},
		{"-1MB/s", 0, true},
		{"fast", 0, true},
		{"20MB", 0, true},
	} {
		got, err := ParseBandwidth(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if s := (20 * MBPerSecond).String(); s != "20MB/s" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseLoss(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  bool
	}{
		{"1%", 0.01, false},
		{" 0.5 % ", 0.005, false},
		{"0.02", 0.02, false},
		{"0", 0, false},
		{"100%", 0, true},
		{"-1%", 0, true},
		{"some", 0, true},
	} {
		got, err := ParseLoss(tc.in)
		if (err != nil) != tc.err || (err == nil && (got-tc.want > 1e-12 || tc.want-got > 1e-12)) {
			t.Errorf("ParseLoss(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestPresets(t *testing.T) {
	if got := strings.Join(PresetNames(), ","); got != "ec2-3,ec2-5" {
		t.Fatalf("PresetNames() = %s", got)
	}
	for _, name := range PresetNames() {
		topo, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if topo.Source == "" || !strings.Contains(topo.Source, "cloudping") {
			t.Errorf("%s: source %q does not name the measurement", name, topo.Source)
		}
		for _, a := range topo.Sites {
			for _, b := range topo.Sites {
				if a == b {
					continue
				}
				ab, err := topo.OneWay(a, b)
				if err != nil {
					t.Fatal(err)
				}
				ba, _ := topo.OneWay(b, a)
				if ab != ba || ab < 10*time.Millisecond || ab > 200*time.Millisecond {
					t.Errorf("%s: one-way %s->%s %v, back %v", name, a, b, ab, ba)
				}
			}
		}
	}
	topo, _ := Preset("ec2-5")
	if d, _ := topo.OneWay("us-east-1", "eu-west-1"); d != 34850*time.Microsecond {
		t.Errorf("ec2-5 us-east-1->eu-west-1 one-way = %v, want 34.85ms", d)
	}
	if d, _ := topo.RTT("eu-west-1", "ap-southeast-2"); d != 255700*time.Microsecond {
		t.Errorf("ec2-5 eu-west-1<->ap-southeast-2 RTT = %v, want 255.7ms", d)
	}
	if got := strings.Join(topo.Groups["ap"], ","); got != "ap-northeast-1,ap-southeast-2" {
		t.Errorf("group ap = %s", got)
	}
	c, _ := topo.LinkConfig("us-west-2", "us-east-1")
	if c.Bandwidth != 100*MBPerSecond || c.Jitter != 500*time.Microsecond || c.Loss != 0 {
		t.Errorf("link config %v", c)
	}
	if _, err := Preset("ec2-9"); err == nil || !strings.Contains(err.Error(), "ec2-3, ec2-5") {
		t.Errorf("Preset(ec2-9) error %v, want the list of presets", err)
	}
	if _, err := topo.OneWay("us-east-1", "mars-1"); err == nil || !strings.Contains(err.Error(), `unknown site "mars-1"`) {
		t.Errorf("OneWay to unknown site: %v", err)
	}
}

func TestTopologyOverridesAndFiles(t *testing.T) {
	src := `
name: lab
sites: [a, b, c]
groups: {west: [a, b], east: [c]}
rtt_ms:
  a: {b: 20, c: 80}
  b: {c: 70}
  c: {a: 80}
bandwidth: 10MB/s
jitter_ms: 1
links:
  - {from: a, to: c, delay_ms: 45, bandwidth: 1MB/s, loss: 0.01}
`
	path := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	topo, err := OpenTopology(path)
	if err != nil {
		t.Fatal(err)
	}
	ac, _ := topo.LinkConfig("a", "c")
	ca, _ := topo.LinkConfig("c", "a")
	want := LinkConfig{Delay: 45 * time.Millisecond, Jitter: time.Millisecond, Bandwidth: MBPerSecond, Loss: 0.01}
	if ac != want {
		t.Errorf("a->c = %v, want %v", ac, want)
	}
	want = LinkConfig{Delay: 40 * time.Millisecond, Jitter: time.Millisecond, Bandwidth: 10 * MBPerSecond}
	if ca != want {
		t.Errorf("c->a = %v, want %v", ca, want)
	}
	if rtt, _ := topo.RTT("a", "c"); rtt != 85*time.Millisecond {
		t.Errorf("RTT a<->c = %v, want 85ms", rtt)
	}
	if _, err := OpenTopology(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("opening a missing file succeeded")
	}
}

// Every problem is reported, each naming its field.
func TestTopologyValidation(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"empty", ``, []string{"sites: at least one site is required"}},
		{"unknown field", "sites: [a]\nrtt: {}\n", []string{"field rtt not found"}},
		{"missing pair", "sites: [a, b, c]\nrtt_ms: {a: {b: 10}}\n", []string{
			"rtt_ms: no round trip between a and c (add rtt_ms.a.c)",
			"rtt_ms: no round trip between b and c (add rtt_ms.b.c)",
		}},
		{"asymmetric", "sites: [a, b]\nrtt_ms: {a: {b: 10}, b: {a: 12}}\n", []string{
			"rtt_ms.a.b is 10 but rtt_ms.b.a is 12",
		}},
		{"bad values", "sites: [a, b]\nrtt_ms: {a: {b: -3}}\njitter_ms: -1\nloss: 1\n", []string{
			"rtt_ms.a.b: -3 must be a positive number",
			"jitter_ms: -1 must be zero or positive",
			"loss: 1 must be in [0, 1)",
		}},
		{"unknown sites", "sites: [a, b]\ngroups: {g: [a, z]}\nrtt_ms: {a: {b: 5, y: 3}}\nlinks: [{from: a, to: x, delay_ms: 1}]\n", []string{
			`groups.g[1]: unknown site "z" (known: a, b)`,
			`rtt_ms.a.y: unknown site "y"`,
			`links[0].to: unknown site "x"`,
		}},
		{"duplicates and self", "sites: [a, a, b]\nrtt_ms: {a: {a: 1, b: 2}}\n", []string{
			`sites[1]: site "a" listed twice`,
			"rtt_ms.a.a: a site has no link to itself",
		}},
		{"one direction only", "sites: [a, b]\nlinks: [{from: a, to: b, delay_ms: 5}]\n", []string{
			"links: no delay for b->a",
		}},
		{"bad bandwidth", "sites: [a]\nbandwidth: fast\n", []string{`bandwidth "fast"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTopology("t", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if !strings.HasPrefix(err.Error(), "wan: topology t: ") {
				t.Errorf("error not prefixed: %v", err)
			}
		})
	}
}

func FuzzParseTopology(f *testing.F) {
	for _, name := range PresetNames() {
		data, _ := presetFS.ReadFile("topologies/" + name + ".yaml")
		f.Add(data)
	}
	f.Add([]byte("sites: [a, b]\nrtt_ms: {a: {b: 1e308}}\nlinks: [{from: a, to: b, delay_ms: .nan}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ParseTopology("fuzz", data)
		if err != nil {
			return
		}
		// A valid topology gives every directed pair a usable link.
		for _, a := range topo.Sites {
			for _, b := range topo.Sites {
				if a == b {
					continue
				}
				c, err := topo.LinkConfig(a, b)
				if err != nil {
					t.Fatalf("valid topology lacks %s->%s: %v", a, b, err)
				}
				if err := c.Validate(); err != nil {
					t.Fatalf("valid topology has a bad link %s->%s: %v", a, b, err)
				}
			}
		}
	})
}

func FuzzParseBandwidth(f *testing.F) {
	for _, s := range []string{"20MB/s", "1.5 GiB/s", "100Mbit/s", "0", "-1", "1e400MB/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBandwidth(s)
		if err == nil && b < 0 {
			t.Fatalf("ParseBandwidth(%q) = %d", s, b)
		}
	})
}
