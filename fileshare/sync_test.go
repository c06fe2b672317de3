package fileshare

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stabilizer/stabilizer/fileshare/client"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// These tests run the real client engine (package client, as stabsync
// does) against the real service on a test cluster, over gRPC on loopback.

// serve starts the FileShare API of a site on 127.0.0.1 and returns its
// address.
func (c *cluster) serve(t *testing.T, site string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes))
	filesharepb.RegisterFileShareServer(g, NewServer(c.svc(site)))
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// folder is one synced folder at one site.
type folder struct {
	t    *testing.T
	site string
	dir  string
	s    *client.Syncer
}

func (c *cluster) folder(t *testing.T, site, share string, create *client.Share) *folder {
	t.Helper()
	dir := t.TempDir()
	cfg := client.Config{Sites: []string{c.serve(t, site)}, Share: share}
	o := client.InitOptions{}
	if create != nil {
		o.Create, o.Share = true, *create
	}
	if _, err := client.Init(ctxT(t), dir, cfg, o); err != nil {
		t.Fatalf("init at %s: %v", site, err)
	}
	s, err := client.Open(dir, client.Options{Logger: stabilizertest.Logger(t, site+"/stabsync"),
		SettleTime: time.Millisecond, RetryInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &folder{t: t, site: site, dir: dir, s: s}
}

func (f *folder) write(p, content string) {
	f.t.Helper()
	full := filepath.Join(f.dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	// Settled only once its mtime is older than the settle time.
	old := time.Now().Add(-time.Second)
	if err := os.Chtimes(full, old, old); err != nil {
		f.t.Fatal(err)
	}
}

func (f *folder) remove(p string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.dir, p)); err != nil {
		f.t.Fatal(err)
	}
}

// files lists the folder's files and contents (the state dir aside).
func (f *folder) files() map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.dir, p)
		if d.IsDir() {
			if rel == ".stabsync" {
				return filepath.SkipDir
			}
			return nil
		}
		b, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out
}

// syncUntil runs rounds at every folder until cond holds.
func syncUntil(t *testing.T, fs []*folder, cond func() error) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		for _, f := range fs {
			if _, err := f.s.SyncOnce(ctxT(t)); err != nil {
				return fmt.Errorf("round at %s: %w", f.site, err)
			}
		}
		return cond()
	})
}

// same holds when every folder holds exactly want.
func same(fs []*folder, want map[string]string) func() error {
	return func() error {
		for _, f := range fs {
			if got := f.files(); !maps.Equal(got, want) {
				return fmt.Errorf("%s holds %v, want %v", f.site, got, want)
			}
		}
		return nil
	}
}

// converged holds when every folder holds the same files as the first.
func converged(fs []*folder) func() error {
	return func() error {
		want := fs[0].files()
		for _, f := range fs[1:] {
			if got := f.files(); !maps.Equal(got, want) {
				return fmt.Errorf("%s holds %v, %s holds %v", f.site, got, fs[0].site, want)
			}
		}
		return nil
	}
}

func threeFolders(t *testing.T, sh client.Share) (*cluster, []*folder) {
	c := newCluster(t, sites3...)
	a := c.folder(t, us, sh.Name, &sh)
	// Created under majority: a third site may not know it yet.
	stabilizertest.Eventually(t, 0, func() error {
		for _, site := range sites3 {
			if _, err := c.svc(site).Share(ctxT(t), sh.Name); err != nil {
				return err
			}
		}
		return nil
	})
	return c, []*folder{a, c.folder(t, eu, sh.Name, nil), c.folder(t, ap, sh.Name, nil)}
}

func TestSyncBothWays(t *testing.T) {
	_, fs := threeFolders(t, client.Share{Name: "cfg"})
	a, b, cc := fs[0], fs[1], fs[2]
	a.write("train.yaml", "lr: 0.1")
	a.write("code/model.py", "import torch")
	syncUntil(t, fs, same(fs, map[string]string{"train.yaml": "lr: 0.1", "code/model.py": "import torch"}))
	b.write("train.yaml", "lr: 0.05")
	syncUntil(t, fs, same(fs, map[string]string{"train.yaml": "lr: 0.05", "code/model.py": "import torch"}))
	// A rename is a delete and a create.
	if err := os.Rename(filepath.Join(cc.dir, "code/model.py"), filepath.Join(cc.dir, "code/net.py")); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, fs, same(fs, map[string]string{"train.yaml": "lr: 0.05", "code/net.py": "import torch"}))
	a.remove("train.yaml")
	syncUntil(t, fs, same(fs, map[string]string{"code/net.py": "import torch"}))
}

// TestConcurrentEditsKeepBoth: two sites edit one file without seeing each
// other's edit; every site ends with the same two files, under the same
// names.
func TestConcurrentEditsKeepBoth(t *testing.T) {
	_, fs := threeFolders(t, client.Share{Name: "cfg"})
	a, b := fs[0], fs[1]
	a.write("job.json", `{"state":"queued"}`)
	syncUntil(t, fs, same(fs, map[string]string{"job.json": `{"state":"queued"}`}))
	a.write("job.json", `{"state":"running"}`)
	b.write("job.json", `{"state":"preempted"}`)
	for _, f := range []*folder{a, b} { // each publishes before it sees the other
		if _, err := f.s.SyncOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	syncUntil(t, fs, func() error {
		if err := converged(fs)(); err != nil {
			return err
		}
		if got := a.files(); len(got) != 2 {
			return fmt.Errorf("%s holds %v, want the file and one conflict copy", a.site, got)
		}
		return nil
	})
	got := a.files()
	contents := slices.Sorted(maps.Values(got))
	if !slices.Equal(contents, []string{`{"state":"preempted"}`, `{"state":"running"}`}) {
		t.Fatalf("contents %v: both edits must be kept", contents)
	}
	for p := range got {
		if p != "job.json" && !strings.Contains(p, "sync-conflict") {
			t.Errorf("copy %q is not named as a conflict copy", p)
		}
	}
}

func TestDeleteAgainstEditKeepsTheEdit(t *testing.T) {
	_, fs := threeFolders(t, client.Share{Name: "cfg"})
	a, b := fs[0], fs[1]
	a.write("lineage.txt", "v1")
	syncUntil(t, fs, same(fs, map[string]string{"lineage.txt": "v1"}))
	a.remove("lineage.txt")
	b.write("lineage.txt", "v2")
	for _, f := range []*folder{a, b} {
		if _, err := f.s.SyncOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	syncUntil(t, fs, same(fs, map[string]string{"lineage.txt": "v2"}))
}

// TestNotVisibleBeforeStable: under `all`, with one site cut off, a
// version reaches the other site (chunks and manifest) but must not become
// visible there; once the link is restored it does.
func TestNotVisibleBeforeStable(t *testing.T) {
	c, fs := threeFolders(t, client.Share{Name: "ckpt", Visibility: "all"})
	a, b := fs[0], fs[1]
	c.Isolate(ap, true)
	a.write("step-100/shard-0", strings.Repeat("w", 3<<20))
	// The version and its chunks reach eu, but `all` cannot hold.
	stabilizertest.Eventually(t, 0, func() error {
		if _, err := a.s.SyncOnce(ctxT(t)); err != nil {
			return err
		}
		vs, err := c.svc(eu).List(ctxT(t), "ckpt", "step-100/shard-0")
		if err != nil || len(vs) != 1 {
			return fmt.Errorf("eu knows %d versions: %v", len(vs), err)
		}
		if vs[0].Stable {
			t.Fatal("stable under all with a site cut off")
		}
		for _, ch := range vs[0].Chunks {
			if d, _ := c.svc(eu).chunks.data(ctxT(t), [32]byte(ch.Hash)); d == nil {
				return fmt.Errorf("eu lacks a chunk")
			}
		}
		return nil
	})
	for range 5 {
		if _, err := b.s.SyncOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := b.files(); len(got) != 0 {
			t.Fatalf("eu shows %v before the version is stable", slices.Collect(maps.Keys(got)))
		}
	}
	c.Isolate(ap, false)
	syncUntil(t, fs, func() error {
		got, ok := b.files()["step-100/shard-0"]
		if !ok || !bytes.Equal([]byte(got), bytes.Repeat([]byte("w"), 3<<20)) {
			return fmt.Errorf("eu does not show the shard yet")
		}
		return nil
	})
}

// TestCheckpointCommitAppearsWhole: a directory committed by its marker
// appears at the other sites complete, with every shard, or not at all.
func TestCheckpointCommitAppearsWhole(t *testing.T) {
	_, fs := threeFolders(t, client.Share{Name: "ckpt", CommitMarker: ".metadata", CommitDirs: "step-*"})
	a, b := fs[0], fs[1]
	a.write("step-200/__0_0.distcp", strings.Repeat("0", 1<<20))
	a.write("step-200/__1_0.distcp", strings.Repeat("1", 1<<20))
	for range 3 {
		if _, err := a.s.SyncOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.s.SyncOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := b.files(); len(got) != 0 {
			t.Fatalf("eu shows %v before the marker", slices.Collect(maps.Keys(got)))
		}
	}
	a.write("step-200/.metadata", "dcp")
	want := a.files()
	syncUntil(t, fs, func() error {
		got := b.files()
		if len(got) > 0 && len(got) < len(want) {
			t.Fatalf("eu shows part of the commit: %v", slices.Collect(maps.Keys(got)))
		}
		return same(fs, want)()
	})
}
