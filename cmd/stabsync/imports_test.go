package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports: stabsync links no pebble and no raft, and of this
// repository only the client side of file sharing (and buildinfo).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := []string{"fileshare/client", "fileshare/plan", "fileshare/safepath", "fileshare/chunks", "fileshare/filesharepb", "cmd/stabsync",
		"cmd/internal/buildinfo"} // --version, standard library only
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "pebble") || strings.Contains(p, "etcd.io/raft") {
			t.Errorf("stabsync links %s", p)
		}
		const mod = "github.com/stabilizer/stabilizer/"
		if rest, ok := strings.CutPrefix(p, mod); ok {
			ok := false
			for _, a := range allowed {
				ok = ok || rest == a || strings.HasPrefix(rest, a+"/")
			}
			if !ok {
				t.Errorf("stabsync imports %s", p)
			}
		}
	}
}
