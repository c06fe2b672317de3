package client

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// fakeClock is the clock of settling in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestUnsettledFileIsNotPublished(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := e.client("a", "us-east-1", Options{Now: clk.now, SettleTime: time.Second})
	a.write("big.bin", "part 1")
	a.round()
	clk.advance(600 * time.Millisecond)
	a.write("big.bin", "part 1, part 2") // still growing
	a.round()
	clk.advance(600 * time.Millisecond)
	if res := a.round(); res.Unsettled != 1 || len(e.cl.Versions()) != 0 {
		t.Fatalf("a growing file was published: %+v, versions %v", res, e.cl.Versions())
	}
	clk.advance(500 * time.Millisecond)
	a.round()
	vs := e.cl.Versions()
	if len(vs) != 1 || vs[0].Size != int64(len("part 1, part 2")) {
		t.Fatalf("versions %+v, want the complete file", vs)
	}
}

func TestIgnoreFile(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write(IgnoreFile, "*.log\nbuild/\n!keep.log\n")
	a.write("app.log", "noise")
	a.write("keep.log", "kept")
	a.write("build/out.o", "obj")
	a.write("src/main.go", "package main")
	quiesce(t, a, b)
	got := b.files()
	for _, p := range []string{"app.log", "build/out.o"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s was synced though ignored", p)
		}
	}
	for _, p := range []string{IgnoreFile, "keep.log", "src/main.go"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s was not synced", p)
		}
	}
}

func TestCommitDirAppearsAtOnceAfterTheMarker(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "ckpt", CommitMarker: ".metadata", CommitDirs: "step-*"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write("step-1/shard-0", "zero")
	a.write("step-1/shard-1", "one")
	a.write("notes.txt", "free")
	quiesce(t, a, b)
	for _, v := range e.cl.Versions() {
		if strings.HasPrefix(v.Path, "step-1/") {
			t.Fatalf("%s published before the marker", v.Path)
		}
	}
	e.cl.HoldStability(true)
	a.write("step-1/.metadata", "meta")
	quiesce(t, a, b)
	vs := e.cl.Versions()
	var commit []string
	for _, v := range vs {
		if strings.HasPrefix(v.Path, "step-1/") {
			if v.Commit == "" || v.CommitFiles != 3 {
				t.Fatalf("%s: commit %q of %d files, want one commit of 3", v.Path, v.Commit, v.CommitFiles)
			}
			commit = append(commit, string(v.ID))
		}
	}
	if len(commit) != 3 {
		t.Fatalf("commit versions %v", commit)
	}
	// Two of three stable: nothing of the directory shows.
	e.cl.HoldStability(false)
	e.cl.Release(vsID(commit[:2])...)
	quiesce(t, a, b)
	if _, err := os.Lstat(filepath.Join(b.dir, "step-1")); err == nil {
		t.Fatalf("b shows step-1 before its commit is stable: %v", b.files())
	}
	e.cl.ReleaseAll()
	quiesce(t, a, b)
	got := b.files()
	if got["step-1/shard-0"] != "zero" || got["step-1/shard-1"] != "one" || got["step-1/.metadata"] != "meta" {
		t.Fatalf("b after the commit: %v", got)
	}
}

// fourOfSixRemoved syncs six files from a to b, then removes four of them
// at a: a mass delete, not published yet.
func fourOfSixRemoved(t *testing.T) (e *env, a, b *tclient) {
	t.Helper()
	e = newEnv(t, &filesharepb.Share{Name: "docs"})
	a = e.client("a", "us-east-1", Options{})
	b = e.client("b", "eu-west-1", Options{})
	for _, p := range []string{"1", "2", "3", "4", "5", "6"} {
		a.write(p, "file "+p)
	}
	quiesce(t, a, b)
	for _, p := range []string{"1", "2", "3", "4"} {
		if err := os.Remove(filepath.Join(a.dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return e, a, b
}

func TestMassDeleteGuard(t *testing.T) {
	e, a, b := fourOfSixRemoved(t)
	n := len(e.cl.Versions())
	res := a.round()
	if res.MassDelete == nil {
		t.Fatalf("no mass-delete stop: %+v", res)
	}
	quiesce(t, a, b)
	if len(e.cl.Versions()) != n || len(b.files()) != 6 {
		t.Fatalf("deletes propagated: %d versions (had %d), b has %v", len(e.cl.Versions()), n, b.files())
	}
	st, err := a.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "mass-delete" || !strings.Contains(st.Error, "4 of 6") {
		t.Fatalf("status %q %q, want mass-delete saying 4 of 6", st.State, st.Error)
	}
	// Once allowed, the deletes go through.
	a.Close()
	a2 := e.open("a2", a.dir, Options{AllowMassDelete: true})
	quiesce(t, a2, b)
	if got := b.files(); len(got) != 2 {
		t.Fatalf("b after the allowed mass delete: %v", got)
	}
}

func TestFolderMissingStops(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write("x", "x")
	quiesce(t, a, b)
	if err := os.RemoveAll(a.dir); err != nil {
		t.Fatal(err)
	}
	res := a.round()
	if res.MassDelete == nil || !res.MassDelete.FolderMissing {
		t.Fatalf("folder gone, round %+v", res)
	}
	quiesce(t, b)
	if _, ok := b.read("x"); !ok {
		t.Fatal("a missing folder deleted files elsewhere")
	}
}

func vsID(ids []string) []plan.VersionID {
	out := make([]plan.VersionID, len(ids))
	for i, id := range ids {
		out[i] = plan.VersionID(id)
	}
	return out
}

func TestIndexSurvivesRestart(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	a.write("x", "x")
	a.write("d/y", "y")
	quiesce(t, a)
	n := len(e.cl.Versions())
	a.Close()
	a2 := e.open("a2", a.dir, Options{})
	quiesce(t, a2)
	if len(e.cl.Versions()) != n || a2.Stats().FilesUploaded != 0 || a2.Stats().FilesDownloaded != 0 {
		t.Fatalf("after a restart: %d versions (had %d), stats %+v", len(e.cl.Versions()), n, a2.Stats())
	}
}

func TestCaseFoldCollisionsKeepTheFirst(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	src := e.client("src", "us-east-1", Options{})
	src.write("Readme.md", "upper")
	src.write("readme.md", "lower")
	quiesce(t, src)
	b := e.client("b", "eu-west-1", Options{CaseInsensitive: true})
	res := b.round()
	quiesce(t, b)
	got := b.files()
	if len(got) != 1 || got["Readme.md"] != "upper" {
		t.Fatalf("b has %v, want Readme.md only", got)
	}
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "readme.md: case-fold collision with Readme.md") {
		t.Fatalf("refused %q", res.Refused)
	}
}

func TestRunLoopSyncs(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{SettleTime: 20 * time.Millisecond})
	b := e.client("b", "eu-west-1", Options{SettleTime: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range []*tclient{a, b} {
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				t.Errorf("%s: run: %v", c.name, err)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	a.write("sub/new.txt", "hello")
	eventually(t, "b gets sub/new.txt", func() bool { s, _ := b.read("sub/new.txt"); return s == "hello" })
	b.write("sub/new.txt", "hello back")
	eventually(t, "a gets b's edit", func() bool { s, _ := a.read("sub/new.txt"); return s == "hello back" })
	if err := b.Run(ctx); err == nil {
		t.Fatal("a second Run of one syncer did not fail")
	}
	var st Status
	eventually(t, "a's status says synced", func() bool {
		var err error
		st, err = a.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.Running && len(st.Files) == 1 && st.Files[0].State == StateSynced && st.Files[0].Stable
	})
}

// TestMassDeleteSeenWhole: a folder emptied across two rounds (one file
// gone in the first, most of them by the next, within the settle time)
// publishes no delete at all: a missing file's delete waits for the settle
// time, so the guard sees the whole loss before anything leaves.
func TestMassDeleteSeenWhole(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := e.client("a", "us-east-1", Options{Now: clk.now, SettleTime: time.Second})
	b := e.client("b", "eu-west-1", Options{})
	for _, p := range []string{"1", "2", "3", "4", "5", "6"} {
		a.write(p, "file "+p)
	}
	a.round()
	clk.advance(2 * time.Second)
	quiesce(t, a, b)
	n := len(e.cl.Versions())
	remove := func(ps ...string) {
		for _, p := range ps {
			if err := os.Remove(filepath.Join(a.dir, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove("1")
	if res := a.round(); res.MassDelete != nil || len(e.cl.Versions()) != n {
		t.Fatalf("one file missing for less than the settle time: %+v, %d versions (had %d)", res, len(e.cl.Versions()), n)
	}
	clk.advance(500 * time.Millisecond)
	remove("2", "3", "4")
	if res := a.round(); res.MassDelete == nil || res.MassDelete.Missing != 4 {
		t.Fatalf("4 of 6 missing: %+v, want a mass-delete stop counting 4", res)
	}
	clk.advance(2 * time.Second)
	a.round()
	quiesce(t, b)
	if len(e.cl.Versions()) != n || len(b.files()) != 6 {
		t.Fatalf("a delete left before the guard stopped: %d versions (had %d), b has %v", len(e.cl.Versions()), n, b.files())
	}
	// A single delete, once settled, goes through as before.
	a.write("2", "file 2")
	a.write("3", "file 3")
	a.write("4", "file 4")
	clk.advance(2 * time.Second)
	a.round()
	clk.advance(2 * time.Second)
	quiesce(t, a, b)
	if got := b.files(); len(got) != 5 {
		t.Fatalf("b after one settled delete: %v, want 5 files", got)
	}
}

// TestRestoreMissing: after a mass-delete stop, RestoreMissing makes the
// next rounds fetch the files back from the share; nothing was deleted
// anywhere.
func TestRestoreMissing(t *testing.T) {
	_, a, b := fourOfSixRemoved(t)
	a.round()
	if res := a.round(); res.MassDelete == nil {
		t.Fatalf("no mass-delete stop: %+v", res)
	}
	got, err := a.RestoreMissing()
	if err != nil || !slices.Equal(got, []string{"1", "2", "3", "4"}) {
		t.Fatalf("RestoreMissing: %v, %v", got, err)
	}
	quiesce(t, a, b)
	if len(a.files()) != 6 || len(b.files()) != 6 {
		t.Fatalf("after RestoreMissing: a has %v, b has %v", a.files(), b.files())
	}
}

// TestStatusJSONKeys: stabsync status -o json speaks snake_case throughout,
// the mass-delete stop and conflicts included.
func TestStatusJSONKeys(t *testing.T) {
	st := Status{MassDelete: &plan.MassDelete{Missing: 4, Total: 6}, Conflicts: []plan.Conflict{{Path: "a", Kind: plan.KindEdit}}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if upper := regexp.MustCompile(`"[A-Z]\w*":`).FindAllString(string(b), -1); len(upper) > 0 {
		t.Fatalf("status JSON has keys %v: %s", upper, b)
	}
}

// TestStatusInSync: a folder is in sync once its share and it agree, not
// while a file is published but not stable, and never during a stop.
func TestStatusInSync(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write("train.yaml", "lr: 0.1")
	quiesce(t, a)
	st, err := b.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if in, behind := st.InSync(); in || len(behind) != 1 || behind[0].Path != "train.yaml" {
		t.Fatalf("b before it fetched train.yaml: in sync %v, behind %+v", in, behind)
	}
	quiesce(t, a, b)
	for _, c := range []*tclient{a, b} {
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if in, behind := st.InSync(); !in {
			t.Fatalf("%s after quiescing: behind %+v", c.name, behind)
		}
	}
	if in, _ := (Status{State: "mass-delete"}).InSync(); in {
		t.Fatal("a mass-delete stop counted as in sync")
	}
}
