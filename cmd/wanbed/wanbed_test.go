package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpLinkDown runs the real binaries: up on ec2-3, a link cut shown by
// status, and down stopping every process it started.
func TestUpLinkDown(t *testing.T) {
	bin := t.TempDir()
	for _, c := range []string{"wanbed", "stabilizerd"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, c), "../"+c).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
	dir := t.TempDir()
	wanbed := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(bin, "wanbed"), append(args, "--dir", dir)...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), &exitErr{ee, string(ee.Stderr)}
		}
		return string(out), err
	}
	out, err := wanbed("up", "--topology", "ec2-3", "-o", "json")
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() { _, _ = wanbed("down") })
	var sites []siteState
	if err := json.Unmarshal([]byte(out), &sites); err != nil || len(sites) != 3 {
		t.Fatalf("up -o json: %q %v", out, err)
	}
	if _, err := wanbed("up", "--topology", "ec2-3"); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Fatalf("second up: %v", err)
	}
	if out, err = wanbed("link", "set", "us-east-1", "eu-west-1", "--cut"); err != nil || !strings.Contains(out, "CUT") {
		t.Fatalf("cut: %q %v", out, err)
	}
	if _, err = wanbed("link", "set", "us-east-1", "mars-1", "--rtt", "10ms"); err == nil || !strings.Contains(err.Error(), "mars-1") {
		t.Fatalf("unknown site: %v", err)
	}
	out, err = wanbed("status")
	if err != nil || strings.Count(out, "healthy") != 3 || strings.Count(out, "CUT") != 2 {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if _, err := wanbed("down"); err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if alive(s.PID) {
			t.Fatalf("site %s (pid %d) still runs after down", s.Site, s.PID)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "us-east-1")); err != nil {
		t.Fatalf("down removed data: %v", err)
	}
}

type exitErr struct {
	*exec.ExitError
	stderr string
}

func (e *exitErr) Error() string { return e.ExitError.Error() + ": " + e.stderr }

// TestBenchMoved: `wanbed bench` points at the benchmark's new home.
func TestBenchMoved(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"bench", "kv", "--topology", "ec2-5", "--out", t.TempDir()})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "make bench") || !strings.Contains(err.Error(), "wanbench kv") {
		t.Fatalf("wanbed bench: %v, want a pointer to make bench and wanbench", err)
	}
}
