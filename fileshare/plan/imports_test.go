package plan_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports checks that the package stays free of IO: standard packages
// only, none that reach the disk, the network, the clock or the scheduler.
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{
		"os": true, "net": true, "time": true, "syscall": true, "unsafe": true, "sync": true,
		"io/fs": true, "context": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true,
		"runtime": true, "log": true, "log/slog": true,
	}
	for _, imp := range pkg.Imports {
		switch {
		case strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
			t.Errorf("plan imports %s: only the standard library is allowed", imp)
		case forbidden[imp] || strings.HasPrefix(imp, "net/") || strings.HasPrefix(imp, "os/"):
			t.Errorf("plan imports %s: it does no IO, reads no clock and starts no goroutines", imp)
		}
	}
}
