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
	// One site crashes and comes back; down then stops the new process.
	if out, err := wanbed("site", "kill", "ap-northeast-1"); err != nil || !strings.Contains(out, "killed") || alive(sites[2].PID) {
		t.Fatalf("site kill: %q %v (pid %d alive %v)", out, err, sites[2].PID, alive(sites[2].PID))
	}
	if _, err := wanbed("site", "kill", "ap-northeast-1"); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Fatalf("kill of a dead site: %v", err)
	}
	if _, err := wanbed("site", "start", "mars-1"); err == nil || !strings.Contains(err.Error(), `no site "mars-1"`) {
		t.Fatalf("start of an unknown site: %v", err)
	}
	if out, err := wanbed("site", "start", "ap-northeast-1"); err != nil || !strings.Contains(out, "started") {
		t.Fatalf("site start: %q %v", out, err)
	}
	st, err := loadState(dir)
	if err != nil || st.Sites[2].PID == sites[2].PID || !alive(st.Sites[2].PID) {
		t.Fatalf("after start: %+v %v", st, err)
	}
	if out, err := wanbed("site", "stop", "us-east-1"); err != nil || !strings.Contains(out, "stopped") || alive(sites[0].PID) {
		t.Fatalf("site stop: %q %v", out, err)
	}
	sites[2].PID = st.Sites[2].PID // down must stop the restarted one
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

// TestTrainingScenario runs the training scenario, shortened, with real
// processes: every check it prints must pass, and nothing it started may
// outlive it.
func TestTrainingScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and kills a region (about 30 s)")
	}
	bin := t.TempDir()
	for _, c := range []string{"wanbed", "stabilizerd", "stabsync"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, c), "../"+c).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "wanbed"), "scenario", "training", "--dir", dir, "--checkpoints", "1",
		"--shards", "2", "--shard-mib", "1", "--write-rate-mib", "4", "--interval", "200ms", "--ttl", "2s", "--bw", "")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scenario: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\nPASS "); n != 6 || strings.Contains(string(out), "\nFAIL ") {
		t.Fatalf("want 6 checks passed, none failed; got %d\n%s", n, out)
	}
	for _, want := range []string{"REGION LOST", "JOB RESUMED from step-000001", "REFUSED", "caught up"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Agents {
		if alive(a.PID) {
			t.Errorf("agent %s (pid %d) still runs", a.Name, a.PID)
		}
	}
}

// TestTrainingScenarioBadFlags: wrong sizes are refused before anything
// starts, naming the flag.
func TestTrainingScenarioBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--shards", "1"}, {"--ttl", "10ms"}, {"--checkpoints", "0"}} {
		root := newRoot()
		root.SetArgs(append([]string{"scenario", "training", "--dir", t.TempDir()}, args...))
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "")) {
			t.Errorf("%v: %v, want an error naming %s", args, err, args[0])
		}
	}
}

func TestReadEventsSkipsACutLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.jsonl")
	if err := os.WriteFile(p, []byte(`{"t":1,"ev":"a","step":2}`+"\n"+`{"t":2,"ev":"b`), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err := readEvents(p)
	if err != nil || len(evs) != 1 || evs[0].Ev != "a" || evs[0].Step != 2 {
		t.Fatalf("readEvents: %+v %v", evs, err)
	}
}
