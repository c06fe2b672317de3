package plan_test

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/plan"
)

func TestConflictName(t *testing.T) {
	const id = plan.VersionID("0000000000000001000000000-site-a")
	tag := plan.ConflictName("x", id)[len("x.sync-conflict-"):]
	if len(tag) != 16 || strings.Trim(tag, "0123456789abcdef") != "" {
		t.Fatalf("tag %q: want 16 lowercase hex digits", tag)
	}
	for _, tc := range []struct{ path, want string }{
		{"a.txt", "a.sync-conflict-" + tag + ".txt"},
		{"dir/sub/a.txt", "dir/sub/a.sync-conflict-" + tag + ".txt"},
		{"archive.tar.gz", "archive.tar.sync-conflict-" + tag + ".gz"},
		{"Makefile", "Makefile.sync-conflict-" + tag},
		{".bashrc", ".bashrc.sync-conflict-" + tag},
		{"d/.bashrc", "d/.bashrc.sync-conflict-" + tag},
		{"d.x/noext", "d.x/noext.sync-conflict-" + tag},
		// No nesting: an existing marker is replaced.
		{"a.sync-conflict-0123456789abcdef.txt", "a.sync-conflict-" + tag + ".txt"},
		{".bashrc.sync-conflict-0123456789abcdef", ".bashrc.sync-conflict-" + tag},
		{"Makefile.sync-conflict-0123456789abcdef", "Makefile.sync-conflict-" + tag},
		// Not a marker (not 16 hex digits): kept as part of the name.
		{"a.sync-conflict-xyz.txt", "a.sync-conflict-xyz.sync-conflict-" + tag + ".txt"},
	} {
		got := plan.ConflictName(tc.path, id)
		if got != tc.want {
			t.Errorf("ConflictName(%q) = %q, want %q", tc.path, got, tc.want)
		}
		if !plan.IsConflictName(got) {
			t.Errorf("IsConflictName(%q) = false", got)
		}
		if again := plan.ConflictName(got, id); again != got {
			t.Errorf("ConflictName(%q) = %q: a copy of a copy must not nest", got, again)
		}
	}
	if plan.ConflictName("a.txt", id) == plan.ConflictName("a.txt", id+"x") {
		t.Error("two losers got the same copy name")
	}
	for _, p := range []string{"a.txt", ".bashrc", "a.sync-conflict-xyz.txt", "d.sync-conflict-0123456789abcdef/a.txt", "a.sync-conflict-0123456789ABCDEF.txt"} {
		if plan.IsConflictName(p) {
			t.Errorf("IsConflictName(%q) = true", p)
		}
	}
}

func TestContentOf(t *testing.T) {
	c1 := plan.Chunk{Hash: sha256.Sum256([]byte("one")), Size: 3}
	c2 := plan.Chunk{Hash: sha256.Sum256([]byte("two")), Size: 70000}
	want := func(cs ...plan.Chunk) plan.Hash {
		var b []byte
		for _, c := range cs {
			b = append(b, c.Hash[:]...)
			b = binary.BigEndian.AppendUint32(b, c.Size)
		}
		return sha256.Sum256(b)
	}
	for _, cs := range [][]plan.Chunk{nil, {c1}, {c1, c2}, {c2, c1}} {
		if got := plan.ContentOf(cs); got != want(cs...) {
			t.Errorf("ContentOf(%v) = %x, want %x", cs, got, want(cs...))
		}
	}
	if plan.ContentOf([]plan.Chunk{c1, c2}) == plan.ContentOf([]plan.Chunk{c2, c1}) {
		t.Error("chunk order does not change Content")
	}
	c1b := c1
	c1b.Size++
	if plan.ContentOf([]plan.Chunk{c1}) == plan.ContentOf([]plan.Chunk{c1b}) {
		t.Error("chunk size does not change Content")
	}
	if plan.ContentOf(nil) == (plan.Hash{}) {
		t.Error("an empty file has the zero hash, which TombstoneBase reserves")
	}
}

func TestNewVersionID(t *testing.T) {
	hs := []plan.HLC{{0, 0}, {0, 1}, {1, 0}, {1, 0xffffffff}, {255, 0}, {256, 0}, {1 << 62, 3}}
	var ids []string
	for _, h := range hs {
		ids = append(ids, string(plan.NewVersionID("b", h)))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids do not sort by HLC: %v", ids)
	}
	if got, want := plan.NewVersionID("us-east", plan.HLC{Wall: 0x10, Logical: 2}), plan.VersionID("000000000000001000000002-us-east"); got != want {
		t.Errorf("NewVersionID = %q, want %q", got, want)
	}
	if plan.NewVersionID("a", plan.HLC{Wall: 1}) == plan.NewVersionID("b", plan.HLC{Wall: 1}) {
		t.Error("two origins made the same id")
	}
}

func TestCommitDir(t *testing.T) {
	for _, tc := range []struct {
		rule      plan.CommitRule
		path, dir string
	}{
		{plan.CommitRule{}, "ckpt/a/f", ""},
		{plan.CommitRule{Marker: "DONE"}, "top.txt", ""},
		{plan.CommitRule{Marker: "DONE"}, "run1/f", "run1"},
		{plan.CommitRule{Marker: "DONE"}, "run1/sub/f", "run1"},
		{plan.CommitRule{Marker: "DONE", Dirs: "ckpt/*"}, "ckpt/r1/f", "ckpt/r1"},
		{plan.CommitRule{Marker: "DONE", Dirs: "ckpt/*"}, "ckpt/r1/DONE", "ckpt/r1"},
		{plan.CommitRule{Marker: "DONE", Dirs: "ckpt/*"}, "ckpt/r1/deep/er/f", "ckpt/r1"},
		{plan.CommitRule{Marker: "DONE", Dirs: "ckpt/*"}, "ckpt/f", ""},
		{plan.CommitRule{Marker: "DONE", Dirs: "ckpt/*"}, "other/r1/f", ""},
		{plan.CommitRule{Marker: "DONE", Dirs: "*/*"}, "a/b/c/f", "a/b"},
		{plan.CommitRule{Marker: "DONE", Dirs: "a*"}, "a1/a2/f", "a1"},
		{plan.CommitRule{Marker: "DONE", Dirs: "[bad"}, "x/f", ""},
	} {
		if got := tc.rule.CommitDir(tc.path); got != tc.dir {
			t.Errorf("%+v.CommitDir(%q) = %q, want %q", tc.rule, tc.path, got, tc.dir)
		}
	}
}
