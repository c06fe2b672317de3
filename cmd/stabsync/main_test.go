package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/client"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/filesharetest"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

func stabsync(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestBadInput(t *testing.T) {
	cl := filesharetest.NewCluster()
	site := cl.Start(t, "us-east-1")
	cl.CreateShare(t, &filesharepb.Share{Name: "docs"})
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"init", filepath.Join(dir, "nope"), "--share", "docs", "--site", site.Addr}, 1, "nope does not exist"},
		{[]string{"init", dir, "--share", "docs", "--site", "localhost"}, 2, `site 1 "localhost": want host:port`},
		{[]string{"init", dir, "--share", "docs"}, 2, "--site HOST:PORT is required"},
		{[]string{"init", dir, "--share", "nosuch", "--site", site.Addr}, 1, "unknown share nosuch"},
		{[]string{"init", dir, "--share", "docs", "--site", site.Addr, "--marker", ".m"}, 2, "need --create"},
		{[]string{"status", dir}, 1, "is not initialized"},
		{[]string{"status", filepath.Join(dir, "nope")}, 1, "does not exist"},
		{[]string{"status", dir, "-o", "yaml"}, 2, `-o "yaml": unknown output format`},
		{[]string{"versions"}, 2, "takes 1 argument(s) (PATH)"},
		{[]string{"restore", "x"}, 2, "--version V is required"},
		{[]string{"wait", dir, "--within", "0s"}, 2, "--within 0s: must be positive"},
		{[]string{"restore", "--missing", "x", "-C", dir}, 2, "takes 0 argument(s)"},
	} {
		code, _, stderr := stabsync(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("stabsync %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
	}
}

func TestCommandsAgainstAFakeSite(t *testing.T) {
	cl := filesharetest.NewCluster()
	site := cl.Start(t, "us-east-1")
	dir := t.TempDir()
	code, out, stderr := stabsync(t, "init", dir, "--share", "ckpt", "--site", site.Addr, "--create", "--marker", ".metadata", "--commit-dirs", "step-*", "--settle", "1ns")
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "commit marker .metadata in step-*") {
		t.Errorf("init said %q", out)
	}
	if code, _, stderr := stabsync(t, "init", dir, "--share", "ckpt", "--site", site.Addr); code != 1 || !strings.Contains(stderr, "initialized already") {
		t.Errorf("second init: exit %d, %q", code, stderr)
	}

	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := client.Open(dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("v2, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	code, out, stderr = stabsync(t, "status", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var st client.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	if len(st.Files) != 1 || st.Files[0].Path != "a.txt" || st.Files[0].State != client.StateSynced || st.Running {
		t.Fatalf("status: %+v", st)
	}

	code, out, stderr = stabsync(t, "versions", "a.txt", "-C", dir, "-o", "json")
	var vs []client.VersionInfo
	if code != 0 || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 2 || !vs[1].Current || vs[0].Current {
		t.Fatalf("versions: exit %d %s\n%s", code, stderr, out)
	}
	if code, _, stderr := stabsync(t, "versions", "b.txt", "-C", dir); code != 1 || !strings.Contains(stderr, "b.txt: share ckpt has no version of it") {
		t.Errorf("versions of an unknown path: exit %d, %q", code, stderr)
	}
	if code, _, stderr := stabsync(t, "restore", "a.txt", "--version", "nosuch", "-C", dir); code != 1 || !strings.Contains(stderr, "version nosuch: unknown version") {
		t.Errorf("restore of an unknown version: exit %d, %q", code, stderr)
	}
	code, out, stderr = stabsync(t, "restore", "a.txt", "--version", vs[0].ID, "-C", dir)
	if code != 0 || !strings.Contains(out, "restored as") {
		t.Fatalf("restore: exit %d, %s %s", code, out, stderr)
	}
	s, err = client.Open(dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "v1" {
		t.Fatalf("after restore a.txt = %q", b)
	}

	if code, out, stderr := stabsync(t, "wait", dir, "--within", "5s"); code != 0 || !strings.Contains(out, "in sync (1 files)") {
		t.Fatalf("wait on a synced folder: exit %d, %q %q", code, out, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := stabsync(t, "wait", dir, "--within", "300ms"); code != 1 || !strings.Contains(stderr, "b.txt local") ||
		!strings.Contains(stderr, "stabsync run is not running") {
		t.Fatalf("wait with a file not published: exit %d, %q", code, stderr)
	}
	if err := os.Remove(filepath.Join(dir, "b.txt")); err != nil {
		t.Fatal(err)
	}

	code, out, _ = stabsync(t, "conflicts", dir, "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("conflicts -o json: exit %d, %q", code, out)
	}
	code, out, _ = stabsync(t, "status", dir)
	if code != 0 || !strings.Contains(out, "a.txt") || !strings.Contains(out, "synced") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if code, out, _ := stabsync(t, "run", "--help"); code != 0 || !strings.Contains(out, "Examples:") {
		t.Fatalf("run --help: %d %s", code, out)
	}
}

// TestProgressOfTransfersSideBySide: transfers reported from several
// goroutines at once end up in one bar that reaches their total, and a
// failed one is said on a line of its own.
func TestProgressOfTransfersSideBySide(t *testing.T) {
	var buf testhelp.SyncBuffer
	b := newBars(&buf)
	trs := make([]client.Transfer, 4)
	for i := range trs {
		trs[i] = client.Transfer{Dir: client.Upload, Path: fmt.Sprintf("step-1/shard-%d", i), Bytes: 4 << 20}
		b.Started(trs[i])
	}
	var wg sync.WaitGroup
	for i, tr := range trs {
		wg.Go(func() {
			for range 4 {
				tr.Done += 1 << 20
				b.Advanced(tr)
			}
			var err error
			if i == 3 {
				err = errors.New("site unavailable")
			}
			b.Finished(tr, err)
		})
	}
	wg.Wait()
	out := buf.String()
	if !strings.Contains(out, "17/17 MB") || !strings.Contains(out, "upload step-1/shard-3: stopped after 4.0MiB of 4.0MiB: site unavailable") {
		t.Fatalf("progress output:\n%s", out)
	}
	if b.bar != nil || len(b.active) != 0 {
		t.Fatalf("a bar is left with %d transfers", len(b.active))
	}
}
