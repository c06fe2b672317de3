package kubegen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
)

var ec2 = []string{"us-east-1", "eu-west-1", "ap-northeast-1"}

func TestWriteIsDeterministicAndValid(t *testing.T) {
	o := Options{Sites: ec2, Groups: map[string][]string{"us": {"us-east-1"}, "eu": {"eu-west-1"}, "ap": {"ap-northeast-1"}},
		Addresses: map[string]string{"eu-west-1": "stab.eu.example.com"}, Image: "registry.example.com:5000/stab:v1"}
	read := func(dir string) map[string]string {
		out := map[string]string{}
		for _, r := range ec2 {
			for _, f := range []string{"kustomization.yaml", "site.yaml", "namespace.yaml"} {
				b, err := os.ReadFile(filepath.Join(dir, r, f))
				if err != nil {
					t.Fatal(err)
				}
				out[r+"/"+f] = string(b)
			}
		}
		return out
	}
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b, b} { // b twice: files are replaced
		o.Dir = dir
		if _, err := Write(o); err != nil {
			t.Fatal(err)
		}
	}
	ra, rb := read(a), read(b)
	for k := range ra {
		if ra[k] != rb[k] {
			t.Errorf("%s differs between two runs", k)
		}
	}
	for _, r := range ec2 {
		cfg, err := siteconfig.Load(filepath.Join(a, r, "site.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Site != r || cfg.DataDir != DataDir || cfg.Insecure || cfg.TLS.CA != TLSMount+"/ca.crt" {
			t.Errorf("%s: %+v", r, cfg)
		}
		for _, p := range cfg.Peers() {
			want := PodHost(p.Name) + ":7100"
			if p.Name == "eu-west-1" {
				want = "stab.eu.example.com:7100"
			}
			if p.Data != want {
				t.Errorf("%s reaches %s at %s, want %s", r, p.Name, p.Data, want)
			}
		}
	}
	k := ra["us-east-1/kustomization.yaml"]
	for _, want := range []string{"namespace: us-east-1\n", "  - ../../base\n", "newName: registry.example.com:5000/stab\n", `newTag: "v1"`} {
		if !strings.Contains(k, want) {
			t.Errorf("kustomization.yaml lacks %q:\n%s", want, k)
		}
	}
}

func TestWriteRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Sites: ec2}, "--kubernetes: missing"},
		{Options{Dir: "x"}, "--sites/--topology: no sites"},
		{Options{Sites: []string{"US_East"}, Dir: "x"}, `site "US_East" cannot name a namespace`},
		{Options{Sites: ec2, Dir: "x", Addresses: map[string]string{"mars-1": "h"}}, `--address mars-1=h: unknown site "mars-1"`},
		{Options{Sites: ec2, Dir: "x", Addresses: map[string]string{"eu-west-1": "h:7100"}}, "--address eu-west-1=h:7100: give a host without a port"},
		{Options{Sites: ec2, Dir: "x", Addresses: map[string]string{"eu-west-1": ""}}, "not a host name"},
		{Options{Sites: ec2, Dir: "x", Image: "stab:"}, `--image "stab:"`},
		{Options{Sites: ec2, Dir: t.TempDir(), Groups: map[string][]string{"us": {"us-west-2"}}}, `groups.us: unknown site "us-west-2"`},
	} {
		_, err := Write(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.o, err, tc.want)
		}
	}
	if _, err := Write(Options{Sites: ec2, Dir: t.TempDir(), Addresses: map[string]string{"eu-west-1": "fd00::1"}}); err != nil {
		t.Errorf("an IPv6 address: %v", err)
	}
}
