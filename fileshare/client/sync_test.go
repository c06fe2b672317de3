package client

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

func TestCreateEditRenameDeleteBothWays(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})

	a.write("x.txt", "one")
	a.write("dir/y.txt", "why")
	quiesce(t, a, b)
	if got, want := b.files(), map[string]string{"x.txt": "one", "dir/y.txt": "why"}; !maps.Equal(got, want) {
		t.Fatalf("b after create: %v, want %v", got, want)
	}

	b.write("x.txt", "two, from b")
	quiesce(t, a, b)
	if got, _ := a.read("x.txt"); got != "two, from b" {
		t.Fatalf("a after b's edit: x.txt = %q", got)
	}

	if err := os.Rename(filepath.Join(a.dir, "dir/y.txt"), filepath.Join(a.dir, "z.txt")); err != nil {
		t.Fatal(err)
	}
	quiesce(t, a, b)
	if got, want := b.files(), map[string]string{"x.txt": "two, from b", "z.txt": "why"}; !maps.Equal(got, want) {
		t.Fatalf("b after rename: %v, want %v", got, want)
	}

	if err := os.Remove(filepath.Join(b.dir, "x.txt")); err != nil {
		t.Fatal(err)
	}
	quiesce(t, a, b)
	if got, want := a.files(), map[string]string{"z.txt": "why"}; !maps.Equal(got, want) {
		t.Fatalf("a after b's delete: %v, want %v", got, want)
	}

	// A copy of a file b has: its chunks come from b's folder.
	a.write("copy.txt", "why")
	quiesce(t, a, b)
	if got, _ := b.read("copy.txt"); got != "why" || b.Stats().ChunksFromLocal == 0 {
		t.Errorf("b: copy.txt %q; chunks from local files %d, want > 0", got, b.Stats().ChunksFromLocal)
	}
}

func TestConcurrentEditKeepsBothWithTheSameNames(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"}, "us-east-1", "eu-west-1", "ap-northeast-1")
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	c := e.client("c", "ap-northeast-1", Options{})
	a.write("f.txt", "base")
	quiesce(t, a, b, c)

	a.write("f.txt", "edit at a")
	b.write("f.txt", "edit at b, longer")
	quiesce(t, a, b, c)
	fa, fb, fc := a.files(), b.files(), c.files()
	if len(fa) != 2 {
		t.Fatalf("a has %v, want f.txt and a conflict copy", fa)
	}
	if !maps.Equal(fa, fb) || !maps.Equal(fa, fc) {
		t.Fatalf("clients differ:\na %v\nb %v\nc %v", fa, fb, fc)
	}
	var contents []string
	for _, v := range fa {
		contents = append(contents, v)
	}
	if !(contains(contents, "edit at a") && contains(contents, "edit at b, longer")) {
		t.Fatalf("an edit was lost: %v", fa)
	}
	cs, err := a.Conflicts(context.Background())
	if err != nil || len(cs) != 1 || cs[0].Path != "f.txt" {
		t.Fatalf("conflicts: %+v, %v", cs, err)
	}
	if _, ok := fa[cs[0].Copy]; !ok {
		t.Fatalf("conflict copy %s not in the folder %v", cs[0].Copy, fa)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestDeleteAgainstEditKeepsTheEdit(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write("f.txt", "base")
	quiesce(t, a, b)

	if err := os.Remove(filepath.Join(a.dir, "f.txt")); err != nil {
		t.Fatal(err)
	}
	b.write("f.txt", "edited at b")
	quiesce(t, a, b)
	for _, c := range []*tclient{a, b} {
		found := false
		for _, v := range c.files() {
			found = found || v == "edited at b"
		}
		if !found {
			t.Fatalf("%s lost the edit: %v", c.name, c.files())
		}
	}
}

func TestNotVisibleBeforeStable(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	e.cl.HoldStability(true)
	a.write("f.txt", "not yet")
	quiesce(t, a, b)
	if len(e.cl.Versions()) != 1 {
		t.Fatalf("versions %v, want the one of f.txt", e.cl.Versions())
	}
	if got := b.files(); len(got) != 0 {
		t.Fatalf("b shows %v before the version is stable", got)
	}
	st, err := b.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Files) != 1 || st.Files[0].State != StateWaiting {
		t.Fatalf("b's status %+v, want f.txt waiting", st.Files)
	}
	e.cl.ReleaseAll()
	quiesce(t, a, b)
	if got, _ := b.read("f.txt"); got != "not yet" {
		t.Fatalf("b after release: %q", got)
	}
}

func TestMaliciousPathsRefused(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(a.dir, "link")); err != nil {
		t.Fatal(err)
	}
	// A real file's chunks, so that the bad versions could be fetched.
	src := e.client("src", "us-east-1", Options{})
	src.write("ok.txt", "payload")
	quiesce(t, src)
	good := e.cl.Versions()[0]
	for _, p := range []string{"../x", "/etc/x", "a/../../x", "link/x", "..", "a/./b", "x\x00y", ".stabsync/index.json"} {
		v := good
		v.ID, v.HLC, v.Path, v.Parents = "", good.HLC, p, nil
		v.HLC.Wall = 0
		e.cl.Inject(t, "docs", v)
	}
	res := a.round()
	for range 3 {
		res = a.round()
	}
	if len(res.Refused) < 6 {
		t.Errorf("refused %q, want every bad path", res.Refused)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote outside the folder: %v", ents)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(a.dir), "x")); err == nil {
		t.Fatal("wrote ../x")
	}
	got := a.files()
	if got["ok.txt"] != "payload" || len(got) != 1 {
		t.Fatalf("folder %v, want ok.txt only", got)
	}
	if strings.Contains(strings.Join(res.Refused, "\n"), "link/x") {
		return
	}
}
