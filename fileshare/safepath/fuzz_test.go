package safepath

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheck: Check never panics, and what it accepts is clean, relative,
// stays under any root it is joined to, and has an idempotent FoldKey.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"a", "dir/file.txt", ".bashrc", "café", "cafe\u0301", "ΣΑΣ", "straße",
		"", "/", "/etc/passwd", "../x", "a/../b", "a//b", "a/", "./a", `a\b`,
		`\\h\s`, "C:", "a\x00b", "a\u0085", "\xff", ".stabsync", ".STABSYNC/x",
		".\u017ftabsync", strings.Repeat("a", 256), "\u0130", "\u212b",
	} {
		f.Add(s)
	}
	const root = "/srv/share"
	f.Fuzz(func(t *testing.T, p string) {
		k := FoldKey(p)
		if FoldKey(k) != k {
			t.Errorf("FoldKey(%q) = %q, FoldKey of that = %q", p, k, FoldKey(k))
		}
		if err := Check(p); err != nil {
			return
		}
		if path.Clean(p) != p {
			t.Errorf("accepted %q, path.Clean = %q", p, path.Clean(p))
		}
		if strings.HasPrefix(p, "/") {
			t.Errorf("accepted absolute %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Errorf("accepted %q with segment %q", p, seg)
			}
			if FoldKey(seg) == FoldKey(StateDir) {
				t.Errorf("accepted %q naming the state directory", p)
			}
		}
		if j := filepath.Join(root, p); !strings.HasPrefix(j, root+"/") {
			t.Errorf("accepted %q, joined to %s it is %s", p, root, j)
		}
		if !filepath.IsLocal(p) {
			t.Errorf("accepted %q, which filepath.IsLocal refuses", p)
		}
	})
}
