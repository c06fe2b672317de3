package safepath

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCheckAccepts(t *testing.T) {
	for _, p := range []string{
		"a",
		"a.txt",
		"dir/sub/file.bin",
		".bashrc",
		"dir/.hidden/x",
		"..a",
		"a..",
		"...",
		"a/..b/c",
		"with space.txt",
		" leading and trailing ",
		"ckpt/step-1000/__0_0.distcp",
		"ckpt/step-1000/.metadata",
		"日本語/ファイル.txt",
		"café",        // NFC
		"cafe\u0301",  // NFD
		"emoji-🙂.txt", // astral plane
		"CON",         // Windows cannot hold these; we do not refuse them
		"aux.txt",
		"ab:c",
		"x/c:d",
		"trailing.",
		"q?*<>|\"",
		".stabsync2",
		"x.stabsync",
		"stabsync",
		"a/.stabsyncx/b",
		"\u200b", // zero-width space is a format character, not a control one
		strings.Repeat("a", MaxSegment),
		strings.Repeat(strings.Repeat("a", 200)+"/", 20) + strings.Repeat("b", 76), // MaxPath bytes
	} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		p, reason string
	}{
		{"", "empty"},
		{"/etc/passwd", "absolute"},
		{"/", "absolute"},
		{"C:", "windows drive"},
		{"c:x", "windows drive"},
		{"C:/Windows/system32", "windows drive"},
		{"a:b", "windows drive"},
		{`\\host\share\x`, "windows unc path"},
		{`\\`, "windows unc path"},
		{`a\b`, "backslash"},
		{`\a`, "backslash"},
		{`..\x`, "backslash"},
		{"a//b", "empty segment 1"},
		{".", `segment 0 is "."`},
		{"./a", `segment 0 is "."`},
		{"a/./b", `segment 1 is "."`},
		{"..", `segment 0 is ".."`},
		{"../a", `segment 0 is ".."`},
		{"a/../b", `segment 1 is ".."`},
		{"a/..", `segment 1 is ".."`},
		{"a/", "trailing slash"},
		{"a/b/", "trailing slash"},
		{"a\x00b", "control character U+0000 at byte 1"},
		{"a\nb", "control character U+000A at byte 1"},
		{"\tx", "control character U+0009 at byte 0"},
		{"a\x7f", "control character U+007F at byte 1"},
		{"a\u0085", "control character U+0085 at byte 1"}, // C1: NEL
		{"a\u009b", "control character U+009B at byte 1"}, // C1: CSI
		{"a\xffb", "invalid utf-8"},
		{"\xc3", "invalid utf-8"},
		{"a/\xed\xa0\x80", "invalid utf-8"}, // a UTF-16 surrogate
		{strings.Repeat("a", MaxSegment+1), "segment 0 longer than 255 bytes"},
		{"x/" + strings.Repeat("é", 128), "segment 1 longer than 255 bytes"},
		{strings.Repeat("a/", MaxPath/2) + "b", "longer than 4096 bytes"},
		{".stabsync", "segment 0 is the state directory .stabsync"},
		{".stabsync/state.db", "segment 0 is the state directory .stabsync"},
		{".STABSYNC/x", "segment 0 is the state directory .stabsync"},
		{".StabSync", "segment 0 is the state directory .stabsync"},
		{"a/.stabsync", "segment 1 is the state directory .stabsync"},
		{".\u017ftabsync", "segment 0 is the state directory .stabsync"}, // long s folds to s
	} {
		err := Check(tc.p)
		if err == nil {
			t.Errorf("Check(%q) = nil, want %s", tc.p, tc.reason)
			continue
		}
		if !errors.Is(err, ErrBadPath) {
			t.Errorf("Check(%q) = %v, does not wrap ErrBadPath", tc.p, err)
		}
		if want := fmt.Sprintf("safepath: bad path %q: %s", tc.p, tc.reason); err.Error() != want {
			t.Errorf("Check(%q) = %q, want %q", tc.p, err, want)
		}
	}
}

func TestFoldKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"A.txt", "a.txt"},
		{"DIR/File", "dir/file"},
		{"café", "cafe\u0301"}, // NFC and NFD
		{"CAFÉ", "cafe\u0301"}, // and case on top
		{"ΣΑΣ", "σας"},         // final sigma: strings.ToLower misses it
		{"STRAẞE", "straße"},   // capital sharp s
		{"\uab90", "\u13c0"},   // Cherokee, where x/text's Fold oscillates
		{"\u212a", "k"},        // Kelvin sign
		{"\u00c5", "\u212b"},   // Å and Ångström sign (canonically equivalent)
		{"ǅ", "ǆ"},             // title case digraph
		{"\u0130", "i\u0307"},  // İ folds to i + combining dot
	} {
		if ka, kb := FoldKey(tc.a), FoldKey(tc.b); ka != kb {
			t.Errorf("FoldKey(%q) = %q, FoldKey(%q) = %q, want equal", tc.a, ka, tc.b, kb)
		}
		if k := FoldKey(tc.a); FoldKey(k) != k {
			t.Errorf("FoldKey(%q) not idempotent: %q then %q", tc.a, k, FoldKey(k))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"a.txt", "a.txt "},
		{"a/b", "a_b"},
		{"e", "é"},
		{"i", "ı"},            // dotless i stays apart (no Turkish tailoring)
		{"straße", "STRASSE"}, // simple folding, as the filesystems do
	} {
		if ka, kb := FoldKey(tc.a), FoldKey(tc.b); ka == kb {
			t.Errorf("FoldKey(%q) == FoldKey(%q) == %q, want different", tc.a, tc.b, ka)
		}
	}
}

func TestCollisions(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		want  [][]string
	}{
		{nil, nil},
		{[]string{"a", "b", "c"}, nil},
		{[]string{"a", "a"}, nil}, // the same path twice is not a collision
		{[]string{"a.txt", "A.txt"}, [][]string{{"A.txt", "a.txt"}}},
		{
			[]string{"z/X", "b", "café", "A.txt", "z/x", "cafe\u0301", "a.TXT", "a.txt", "A.txt", "Z/x"},
			[][]string{{"A.txt", "a.TXT", "a.txt"}, {"Z/x", "z/X", "z/x"}, {"cafe\u0301", "café"}},
		},
	} {
		got := Collisions(tc.paths)
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("Collisions(%q) = %q, want %q", tc.paths, got, tc.want)
		}
	}
}
