package core_test

import (
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImports checks that the core stays free of I/O: its own imports are the
// frontier package and standard packages that cannot reach the disk, the
// network, the clock or the scheduler; and nothing it pulls in transitively is
// a transport, a storage engine or the network stack.
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{
		"os": true, "os/exec": true, "net": true, "time": true, "syscall": true,
		"unsafe": true, "sync": true, "io": true, "io/fs": true, "context": true,
		"math/rand": true, "crypto/rand": true, "runtime": true, "log": true, "log/slog": true,
	}
	for _, imp := range pkg.Imports {
		switch {
		case imp == "github.com/stabilizer/stabilizer/frontier", imp == "github.com/stabilizer/stabilizer/stabilizer/internal/vocab":
		case strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
			t.Errorf("core imports %s: only the standard library, frontier and vocab are allowed", imp)
		case forbidden[imp] || strings.HasPrefix(imp, "net/") || strings.HasPrefix(imp, "os/"):
			t.Errorf("core imports %s: the core does no I/O, reads no clock and starts no goroutines", imp)
		}
	}

	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list -deps listed only %v", deps)
	}
	for _, d := range deps {
		switch {
		case d == "net" || strings.HasPrefix(d, "net/"),
			strings.Contains(d, "grpc"),
			strings.Contains(d, "pebble"),
			strings.HasPrefix(d, "github.com/stabilizer/stabilizer/") &&
				d != "github.com/stabilizer/stabilizer/frontier" &&
				d != "github.com/stabilizer/stabilizer/stabilizer/core" &&
				d != "github.com/stabilizer/stabilizer/stabilizer/internal/vocab":
			t.Errorf("core depends on %s", d)
		}
	}
}
