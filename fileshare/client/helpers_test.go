package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/filesharetest"
)

// env is a fake cluster with a share and clients in temp dirs.
type env struct {
	t     *testing.T
	cl    *filesharetest.Cluster
	sites map[string]*filesharetest.Server
	share string
}

func newEnv(t *testing.T, share *filesharepb.Share, sites ...string) *env {
	t.Helper()
	if len(sites) == 0 {
		sites = []string{"us-east-1", "eu-west-1"}
	}
	e := &env{t: t, cl: filesharetest.NewCluster(), sites: map[string]*filesharetest.Server{}, share: share.Name}
	for _, s := range sites {
		e.sites[s] = e.cl.Start(t, s)
	}
	e.cl.CreateShare(t, share)
	return e
}

type tclient struct {
	*Syncer
	t    *testing.T
	dir  string
	name string
}

// client initializes a folder at site and opens it.
func (e *env) client(name, site string, o Options) *tclient {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	cfg := Config{Sites: []string{e.sites[site].Addr}, Share: e.share, SettleTime: Duration(time.Nanosecond), RetryInterval: Duration(20 * time.Millisecond)}
	if _, err := Init(context.Background(), dir, cfg, InitOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return e.open(name, dir, o)
}

func (e *env) open(name, dir string, o Options) *tclient {
	e.t.Helper()
	if o.Logger == nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Output: testWriter{e.t}, Level: hclog.Debug})
	}
	s, err := Open(dir, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return &tclient{Syncer: s, t: e.t, dir: dir, name: name}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

// round runs one round, failing the test on an error.
func (c *tclient) round() Result {
	c.t.Helper()
	res, err := c.SyncOnce(context.Background())
	if err != nil {
		c.t.Fatalf("%s: round: %v", c.name, err)
	}
	return res
}

// quiesce runs rounds at every client until one pass does nothing.
func quiesce(t *testing.T, cs ...*tclient) {
	t.Helper()
	for range 30 {
		busy := false
		for _, c := range cs {
			res := c.round()
			if res.Actions > 0 || res.Unsettled > 0 || res.Failed > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
	}
	t.Fatal("clients did not quiesce in 30 passes")
}

func (c *tclient) write(p, content string) {
	c.t.Helper()
	full := filepath.Join(c.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *tclient) read(p string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(c.dir, filepath.FromSlash(p)))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// files returns every synced file of the folder and its content.
func (c *tclient) files() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.dir, p)
		if d.IsDir() && rel == ".stabsync" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.t.Fatal(err)
	}
	return out
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		<-tick.C
	}
}
