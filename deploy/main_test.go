package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// stabilizerd is the binary TestMain builds from the repository's root.
var stabilizerd string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stabilizerd = filepath.Join(dir, "stabilizerd")
	cmd := exec.Command("go", "build", "-o", stabilizerd, "./cmd/stabilizerd")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/stabilizerd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runStabilizerd runs the built stabilizerd and fails the test unless it
// exits 0.
func runStabilizerd(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(stabilizerd, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("stabilizerd %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkConfig writes data to a file and has `stabilizerd check` load it,
// without its TLS files: they are mounted on the site's machine only.
func checkConfig(t *testing.T, name string, data []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runStabilizerd(t, "check", "--skip-files", "--config", path); !strings.Contains(out, ": ok") {
		t.Fatalf("stabilizerd check %s: %s", name, out)
	}
}

// siteConfig is what the tests read of a site config; `stabilizerd check`
// has read all of it, strictly, before.
type siteConfig struct {
	Site  string `json:"site"`
	Sites []struct {
		Name    string `json:"name"`
		Data    string `json:"data"`
		Control string `json:"control"`
		Client  string `json:"client"`
	} `json:"sites"`
	Listen struct {
		Data    string `json:"data"`
		Control string `json:"control"`
		Client  string `json:"client"`
		HTTP    string `json:"http"`
	} `json:"listen"`
	DataDir  string `json:"data_dir"`
	Insecure bool   `json:"insecure"`
	TLS      struct {
		Cert string `json:"cert"`
		Key  string `json:"key"`
		CA   string `json:"ca"`
	} `json:"tls"`
}

func parseSiteConfig(t *testing.T, data []byte) siteConfig {
	t.Helper()
	var c siteConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// port returns the port of a host:port address, failing the test if it
// has none.
func port(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	var p int32
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &p); i < 0 || err != nil {
		t.Fatalf("%q has no port", addr)
	}
	return p
}
