package consumer_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestImports checks that the package stays a pure state machine: it imports
// only standard packages that cannot reach the disk, the network or the
// scheduler, and, of package time, it uses the types and arithmetic but no
// clock or timer.
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"cmp": true, "container/heap": true, "errors": true, "fmt": true, "maps": true,
		"slices": true, "sort": true, "strings": true, "time": true,
	}
	for _, imp := range pkg.Imports {
		if !allowed[imp] {
			t.Errorf("consumer imports %s: the package does no I/O, reads no clock and starts no goroutines", imp)
		}
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	fset := token.NewFileSet()
	for _, name := range append(pkg.GoFiles, pkg.IgnoredGoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && clock[n.Sel.Name] {
					t.Errorf("%s: time.%s: time comes in as now", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}
