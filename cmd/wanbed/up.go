package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
	"github.com/stabilizer/stabilizer/wan"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// upOptions are the flags of `wanbed up`.
type upOptions struct {
	topology   string
	dir        string
	predicates map[string]string
	stabd      string // path of the stabilizerd binary
	progress   io.Writer
}

// up starts the WAN process and one stabilizerd per site behind it.
func up(o upOptions) (*state, error) {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return nil, err
	}
	if old, err := loadState(o.dir); err == nil {
		for _, s := range old.Sites {
			if alive(s.PID) {
				return nil, fmt.Errorf("a testbed already runs in %s (site %s, pid %d): wanbed down --dir %s first", o.dir, s.Site, s.PID, o.dir)
			}
		}
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	stabd, err := findStabilizerd(o.stabd)
	if err != nil {
		return nil, err
	}
	// The sites' ports stay bound until the WAN process has bound its
	// proxies (on free ports), so that no proxy takes a site's port.
	listen, release, err := siteconfig.HoldListen("127.0.0.1", len(topo.Sites))
	if err != nil {
		return nil, err
	}
	defer release()
	// Every site reaches every other site's data, control and client
	// address through a proxy on the directed link between them.
	var routes []route
	for i, from := range topo.Sites {
		for j, to := range topo.Sites {
			if i == j {
				continue
			}
			for plane, addr := range map[string]string{"data": listen[j].Data, "control": listen[j].Control, "client": listen[j].Client} {
				routes = append(routes, route{From: from, To: to, Plane: plane, Target: addr})
			}
		}
		_ = i
	}
	b, _ := json.Marshal(routes)
	if err := os.WriteFile(filepath.Join(o.dir, "routes.json"), b, 0o644); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(o.dir, "proxies.json"))
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	st := &state{Topology: o.topology, Started: time.Now()}
	st.WAN.Log = filepath.Join(o.dir, "wan.log")
	if st.WAN.PID, err = spawn(self, st.WAN.Log, "serve-wan", "--dir", o.dir, "--topology", o.topology); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.progress, "wan: %d emulated links (%s) in process %d\n", len(topo.Sites)*(len(topo.Sites)-1), topo.Name, st.WAN.PID)
	proxies, err := waitProxies(o.dir, st.WAN.PID, st.WAN.Log)
	if err != nil {
		return nil, err
	}
	st.WAN.Control, st.WAN.Routes = proxies.Control, proxies.Routes
	release()
	via := map[[3]string]string{}
	for _, r := range proxies.Routes {
		via[[3]string{r.From, r.To, r.Plane}] = r.Listen
	}
	gen, err := siteconfig.Generate(siteconfig.GenerateOptions{
		Sites: topo.Sites, Groups: topo.Groups, Dir: o.dir, Listen: listen, Predicates: o.predicates,
		Route: func(from, to, plane, _ string) string { return via[[3]string{from, to, plane}] },
	})
	if err != nil {
		return nil, err
	}
	for _, g := range gen {
		s := siteState{Site: g.Site, Config: g.Config, Client: g.Client, HTTP: g.HTTP, Log: filepath.Join(o.dir, g.Site+".log")}
		if s.PID, err = spawn(stabd, s.Log, "--config", g.Config); err != nil {
			return nil, err
		}
		st.Sites = append(st.Sites, s)
		fmt.Fprintf(o.progress, "%s: pid %d, client %s, http http://%s/\n", s.Site, s.PID, s.Client, s.HTTP)
	}
	if err := saveState(o.dir, st); err != nil {
		return nil, err
	}
	for _, s := range st.Sites {
		if err := waitHealthy(s); err != nil {
			return st, err
		}
	}
	return st, nil
}

// restartSite starts a stopped site again from its config and data folder.
func restartSite(dir string, st *state, site string) error {
	stabd, err := findStabilizerd("")
	if err != nil {
		return err
	}
	for i := range st.Sites {
		s := &st.Sites[i]
		if s.Site != site {
			continue
		}
		if alive(s.PID) {
			return fmt.Errorf("site %s still runs (pid %d)", site, s.PID)
		}
		if s.PID, err = spawn(stabd, s.Log, "--config", s.Config); err != nil {
			return err
		}
		if err := saveState(dir, st); err != nil {
			return err
		}
		return waitHealthy(*s)
	}
	return fmt.Errorf("no site %s in the testbed", site)
}

// findStabilizerd looks beside wanbed, then on PATH.
func findStabilizerd(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "stabilizerd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("stabilizerd")
	if err != nil {
		return "", errors.New("stabilizerd not found beside wanbed or on PATH (build it: go build -o bin/ ./cmd/..., or pass --stabilizerd)")
	}
	return p, nil
}

// spawn starts a detached process (its own session, so it outlives this
// command) logging to logPath.
func spawn(bin, logPath string, args ...string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

type proxiesFile struct {
	Control string  `json:"control"`
	Routes  []route `json:"routes"`
}

func waitProxies(dir string, pid int, logPath string) (*proxiesFile, error) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(dir, "proxies.json")); err == nil {
			var p proxiesFile
			if err := json.Unmarshal(b, &p); err == nil {
				return &p, nil
			}
		}
		if !alive(pid) {
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the WAN process exited:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("the WAN process did not start its links within 15s (see " + logPath + ")")
}

func waitHealthy(s siteState) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + s.HTTP + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !alive(s.PID) {
			log, _ := os.ReadFile(s.Log)
			return fmt.Errorf("site %s exited:\n%s", s.Site, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("site %s not healthy within 30s (see %s)", s.Site, s.Log)
}

// down stops every process of the testbed: SIGTERM, then SIGKILL after a
// grace period. Data and logs stay.
func down(dir string, out io.Writer) error {
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	var agents, pids []int
	for _, a := range st.Agents {
		agents = append(agents, a.PID)
	}
	stopPIDs(agents, out)
	for _, s := range st.Sites {
		pids = append(pids, s.PID)
	}
	stopPIDs(pids, out)
	stopPIDs([]int{st.WAN.PID}, out)
	return nil
}

func stopPIDs(pids []int, out io.Writer) {
	for _, pid := range pids {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		if !waitExit(pid, deadline) {
			fmt.Fprintf(out, "pid %d did not stop on SIGTERM; killing it\n", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitExit polls until pid has exited or deadline passed, and reports
// whether it exited.
func waitExit(pid int, deadline time.Time) bool {
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling the process table
	}
	return true
}

// zombie reports whether pid has exited but was not reaped (its parent,
// an earlier wanbed, is gone, so init will reap it).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
