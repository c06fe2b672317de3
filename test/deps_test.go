package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The dependency rules of DESIGN.md §4, for the whole repository. The
// stabilizer core's own, stricter rule (no I/O, no clock) is in
// stabilizer/core/imports_test.go.

const mod = "github.com/stabilizer/stabilizer"

// goPackage is what `go list -json` says of a package that the rules read.
type goPackage struct {
	ImportPath   string
	Imports      []string // direct, of the non-test files
	Deps         []string // transitive, of the non-test files
	TestImports  []string
	XTestImports []string
}

// rel is a package's path inside the module, "" for the module's root,
// or the path itself for a package outside it.
func rel(path string) string {
	if path == mod {
		return ""
	}
	return strings.TrimPrefix(path, mod+"/")
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// applications are the folders of the applications on the library.
var applications = []string{"kv", "pubsub", "fileshare"}

func application(p string) string {
	for _, a := range applications {
		if under(p, a) {
			return a
		}
	}
	return ""
}

// client reports whether p is a client package: a Go SDK, an API package
// or a client binary. Clients link no storage engine and no Raft.
func client(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	return (application(p) != "" && (strings.HasSuffix(last, "client") || strings.HasSuffix(last, "pb"))) ||
		p == "cmd/kvctl" || p == "cmd/stabsync"
}

// library reports whether p is a library package: anything a program
// other than ours may import.
func library(p string) bool {
	return p == "frontier" || under(p, "stabilizer") || application(p) != ""
}

func ours(path string) bool { return path == mod || strings.HasPrefix(path, mod+"/") }

// pebble and raft are what a client must not link.
func pebble(path string) bool { return strings.HasPrefix(path, "github.com/cockroachdb/pebble") }
func raft(path string) bool   { return strings.HasPrefix(path, "go.etcd.io/raft") }

// testHarness are the packages of ours every test may import besides what
// its package may.
func testHarness(p string) bool { return under(p, "stabilizer/stabilizertest") }

// checkImport returns why package p may not import imp (a full import
// path), or "".
func checkImport(p, imp string, test bool) string {
	if test && ours(imp) && testHarness(rel(imp)) {
		return ""
	}
	if !ours(imp) {
		if pebble(imp) && !under(p, "stabilizer/storage") && (application(p) != "" || under(p, "cmd")) {
			return "only stabilizer/storage uses pebble: applications keep their state in a Namespace"
		}
		return ""
	}
	i := rel(imp)
	switch {
	case under(i, "cmd") && !under(p, "cmd"):
		return "nothing imports cmd: a binary holds no logic another program would want"
	case p == "frontier":
		return "frontier imports nothing of ours"
	case under(p, "stabilizer") && !under(i, "stabilizer") && i != "frontier":
		return "the library imports frontier only, besides itself"
	case library(p) && under(i, "wan"):
		return "the library takes the dialers and listeners it is given and never imports wan"
	}
	if a := application(p); a != "" {
		switch b := application(i); {
		case under(i, "stabilizer") && i != "stabilizer":
			return "applications go through the one door: package stabilizer and frontier, nothing below"
		case b != "" && b != a && !(b == "kv" && (a == "pubsub" || a == "fileshare")):
			return "applications do not import each other sideways; only pubsub and fileshare may use kv"
		}
	}
	return ""
}

// checkPackage returns every rule a package breaks, one line each.
func checkPackage(pkg goPackage) []string {
	p := rel(pkg.ImportPath)
	var out []string
	for _, set := range []struct {
		imports []string
		test    bool
	}{{pkg.Imports, false}, {pkg.TestImports, true}, {pkg.XTestImports, true}} {
		for _, imp := range set.imports {
			if why := checkImport(p, imp, set.test); why != "" {
				what := "imports"
				if set.test {
					what = "has tests that import"
				}
				out = append(out, fmt.Sprintf("%s %s %s: %s", p, what, imp, why))
			}
		}
	}
	if client(p) {
		if i := slices.IndexFunc(pkg.Deps, func(d string) bool { return pebble(d) || raft(d) }); i >= 0 {
			out = append(out, fmt.Sprintf("%s links %s: a client links only the API and client packages, no pebble, no raft", p, pkg.Deps[i]))
		}
	}
	if library(p) {
		if i := slices.IndexFunc(pkg.Deps, func(d string) bool { return ours(d) && under(rel(d), "wan") }); i >= 0 {
			out = append(out, fmt.Sprintf("%s links %s: the library never depends on wan", p, pkg.Deps[i]))
		}
	}
	return out
}

// peerServers are what the root module must not require: peer systems run
// by the benchmark, which has its own module (test/bench).
var peerServers = []string{"go.etcd.io/etcd/server/v3", "github.com/nats-io/nats-server/v2",
	"github.com/syncthing/syncthing", "gonum.org/v1/plot"}

func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestDependencyRules holds DESIGN.md §4's rules over every package of
// the module and its go.mod.
func TestDependencyRules(t *testing.T) {
	dec := json.NewDecoder(bytes.NewReader(goCmd(t, "list", "-json", "./...")))
	n := 0
	for dec.More() {
		var pkg goPackage
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		n++
		for _, e := range checkPackage(pkg) {
			t.Error(e)
		}
	}
	if n < 20 {
		t.Fatalf("go list listed only %d packages", n)
	}
	var gomod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json"), &gomod); err != nil {
		t.Fatal(err)
	}
	for _, r := range gomod.Require {
		if slices.Contains(peerServers, r.Path) {
			t.Errorf("go.mod requires %s: peer systems belong in test/bench's module", r.Path)
		}
	}
}

// TestDependencyRulesCatchBadImports: every rule fires on the import it
// forbids, and lets the allowed ones pass.
func TestDependencyRulesCatchBadImports(t *testing.T) {
	p := func(path string, imports ...string) goPackage {
		return goPackage{ImportPath: mod + "/" + path, Imports: imports}
	}
	for _, tc := range []struct {
		pkg  goPackage
		want string // a word of the reason; "" for allowed
	}{
		{p("kv", mod+"/stabilizer/core"), "one door"},
		{p("kv/lin", mod+"/stabilizer/storage"), "one door"},
		{p("pubsub", "github.com/cockroachdb/pebble/v2"), "Namespace"},
		{p("fileshare", mod+"/pubsub"), "sideways"},
		{p("kv", mod+"/fileshare"), "sideways"},
		{p("stabilizer", mod+"/kv"), "frontier only"},
		{p("stabilizer/transport", mod+"/wan"), "frontier only"},
		{p("kv", mod+"/wan"), "never imports wan"},
		{p("frontier", mod+"/stabilizer"), "nothing of ours"},
		{p("test", mod+"/cmd/internal/site"), "nothing imports cmd"},
		{goPackage{ImportPath: mod + "/kv/kvclient", Deps: []string{"go.etcd.io/raft/v3"}}, "no raft"},
		{goPackage{ImportPath: mod + "/cmd/kvctl", Deps: []string{"github.com/cockroachdb/pebble/v2"}}, "no pebble"},
		{goPackage{ImportPath: mod + "/kv", Deps: []string{mod + "/wan"}}, "never depends on wan"},
		{goPackage{ImportPath: mod + "/kv", XTestImports: []string{mod + "/stabilizer/core"}}, "one door"},
		{p("kv", mod+"/stabilizer", mod+"/frontier", mod+"/kv/kvpb", "github.com/hashicorp/go-hclog"), ""},
		{p("fileshare", mod+"/kv", mod+"/kv/kvclient"), ""},
		{p("stabilizer", mod+"/stabilizer/core", mod+"/stabilizer/storage", mod+"/frontier"), ""},
		{p("cmd/stabilizerd", mod+"/cmd/internal/site", mod+"/wan"), ""},
		{goPackage{ImportPath: mod + "/kv", TestImports: []string{mod + "/stabilizer/stabilizertest"}}, ""},
		{goPackage{ImportPath: mod + "/stabilizer", Deps: []string{"github.com/cockroachdb/pebble/v2"}}, ""},
	} {
		got := strings.Join(checkPackage(tc.pkg), "\n")
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s %v: refused: %s", tc.pkg.ImportPath, tc.pkg.Imports, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%+v: got %q, want a reason with %q", tc.pkg, got, tc.want)
		}
	}
}
