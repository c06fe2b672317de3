package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stabilizer/stabilizer/kv/kvclient"
)

// The bench drives the testbed through its binaries, as a user would:
// `wanbed up -o json` / `wanbed down` for our sites on the emulated WAN,
// `stabilizerd genconfig -o json` and `stabilizerd --config` for the
// loopback sites, benchpeers for etcd and NATS. It reads their JSON output
// and imports none of their code.

// findBinary looks for the named binary beside wanbench, then on PATH.
func findBinary(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is neither beside wanbench nor on PATH; build the binaries with make build (or go build -o bin/ ./cmd/... at the root and in test/bench)", name)
	}
	return p, nil
}

// siteInfo is one site as `wanbed up -o json` and `stabilizerd genconfig
// -o json` print it.
type siteInfo struct {
	Site   string `json:"site"`
	Config string `json:"config"`
	Client string `json:"client"`
	HTTP   string `json:"http"`
}

// command runs a short-lived command in a process group of its own (so a
// Ctrl-C at the terminal reaches only wanbench, which then cleans up in
// order), its stderr copied to progress, and returns its stdout. A
// failure's error ends with the last line the command wrote to stderr.
func command(progress io.Writer, bin string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = io.MultiWriter(progress, &stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		last := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		return out, fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), args[0], err, last)
	}
	return out, nil
}

// testbed is a cluster `wanbed up` started: one stabilizerd per site behind
// the emulated WAN, in processes of their own.
type testbed struct {
	wanbed, dir string
	sites       []siteInfo
}

// wanbedUp starts a testbed of topology in dir with the named predicates.
// On error, what it started is stopped again.
func wanbedUp(topology, dir string, predicates map[string]string, progress io.Writer) (*testbed, error) {
	bin, err := findBinary("wanbed")
	if err != nil {
		return nil, err
	}
	b := &testbed{wanbed: bin, dir: dir}
	args := []string{"up", "--topology", topology, "--dir", dir, "-o", "json"}
	var preds []string
	for name, src := range predicates {
		preds = append(preds, name+"="+src)
	}
	if len(preds) > 0 {
		args = append(args, "--predicates", strings.Join(preds, ";"))
	}
	out, err := command(progress, bin, args...)
	if err == nil {
		err = json.Unmarshal(out, &b.sites)
		if err != nil {
			err = fmt.Errorf("wanbed up -o json: %w: %q", err, out)
		}
	}
	if err != nil {
		b.down(io.Discard)
		return nil, err
	}
	return b, nil
}

// down stops every process of the testbed (wanbed down); errors go to
// progress.
func (b *testbed) down(progress io.Writer) {
	if _, err := os.Stat(filepath.Join(b.dir, "wanbed.json")); err != nil {
		return // nothing was started
	}
	if _, err := command(progress, b.wanbed, "down", "--dir", b.dir); err != nil {
		fmt.Fprintln(progress, err)
	}
}

// proc is a long-running process the bench started and owns: in a session
// of its own (so a Ctrl-C at the terminal reaches only wanbench, which stops
// it in order), its output appended to a log file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once it exited and was waited for
}

// start starts bin with args, logging to logPath.
func start(bin, logPath string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	// This goroutine ends when the process does; stopAll waits for it.
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopAll sends SIGTERM to every process, waits up to 15 s for them, and
// kills what is left.
func stopAll(ps []*proc, out io.Writer) {
	for _, p := range ps {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	grace := time.NewTimer(15 * time.Second)
	defer grace.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
			continue
		case <-grace.C:
		}
		fmt.Fprintf(out, "pid %d did not stop on SIGTERM; killing it\n", p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// loopbackSites starts one stabilizerd per site on loopback, without
// emulated links (stabilizerd genconfig, then stabilizerd --config per
// site), and waits until each is healthy. Stop them with stopAll, also
// after an error.
func loopbackSites(dir string, sites []string, progress io.Writer) ([]siteInfo, []*proc, error) {
	stabd, err := findBinary("stabilizerd")
	if err != nil {
		return nil, nil, err
	}
	out, err := command(progress, stabd, "genconfig", "--sites", strings.Join(sites, ","), "--dir", dir, "-o", "json")
	if err != nil {
		return nil, nil, err
	}
	var gen []siteInfo
	if err := json.Unmarshal(out, &gen); err != nil {
		return nil, nil, fmt.Errorf("stabilizerd genconfig -o json: %w: %q", err, out)
	}
	var ps []*proc
	for _, g := range gen {
		p, err := start(stabd, filepath.Join(dir, g.Site+".log"), "--config", g.Config)
		if err != nil {
			return gen, ps, err
		}
		ps = append(ps, p)
	}
	for i, g := range gen {
		if err := waitHealthy(g, ps[i]); err != nil {
			return gen, ps, err
		}
	}
	if err := waitWritable(gen); err != nil {
		return gen, ps, err
	}
	fmt.Fprintf(progress, "%d sites on loopback: %s\n", len(gen), dir)
	return gen, ps, nil
}

// waitWritable has every site take one write under `all`: a site that
// starts with an empty store holds its first writes until it has heard
// every peer (it might be a site whose disk was wiped), so measurements
// begin only once all are connected and joined.
func waitWritable(sites []siteInfo) error {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for _, s := range sites {
		cl, err := kvclient.Dial(s.Client)
		if err != nil {
			return err
		}
		_, err = cl.Put(ctx, "wanbench/ready/"+s.Site, []byte("1"), "all", 40*time.Second)
		cl.Close()
		if err != nil {
			return fmt.Errorf("site %s did not take a first write: %w", s.Site, err)
		}
	}
	return nil
}

// waitHealthy polls the site's /healthz for up to 30 s.
func waitHealthy(s siteInfo, p *proc) error {
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get("http://" + s.HTTP + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("site %s exited:\n%s", s.Site, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("site %s not healthy within 30s (see %s)", s.Site, p.log)
}
