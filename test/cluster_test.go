package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// bin holds the binaries built once for all tests.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stabilizer-test-bin")
	if err != nil {
		panic(err)
	}
	for _, c := range []string{"stabilizerd", "kvctl", "stabsync"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, c), "../cmd/"+c).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", c, err, out)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type siteInfo struct {
	Site   string `json:"site"`
	Config string `json:"config"`
	Client string `json:"client"`
	HTTP   string `json:"http"`
}

// cluster is a set of stabilizerd processes made by genconfig.
type cluster struct {
	t     *testing.T
	dir   string
	sites []siteInfo
	procs map[string]*exec.Cmd
}

func startCluster(t *testing.T, names ...string) *cluster {
	c := genCluster(t, names...)
	for _, s := range c.sites {
		c.start(s.Site)
	}
	return c
}

// genCluster writes the sites' configs with genconfig and starts nothing.
func genCluster(t *testing.T, names ...string) *cluster {
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(bin, "stabilizerd"), "genconfig", "--sites", strings.Join(names, ","), "--dir", dir, "-o", "json").Output()
	if err != nil {
		t.Fatalf("genconfig: %v", err)
	}
	c := &cluster{t: t, dir: dir, procs: map[string]*exec.Cmd{}}
	if err := json.Unmarshal(out, &c.sites); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) info(site string) siteInfo {
	for _, s := range c.sites {
		if s.Site == site {
			return s
		}
	}
	c.t.Fatalf("no site %s", site)
	return siteInfo{}
}

// start runs a site and waits until its health endpoint answers.
func (c *cluster) start(site string) {
	s := c.info(site)
	logf, err := os.OpenFile(filepath.Join(c.dir, site+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "stabilizerd"), "--config", s.Config)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	logf.Close()
	c.procs[site] = cmd
	testhelp.Eventually(c.t, 20*time.Second, func() error {
		resp, err := http.Get("http://" + s.HTTP + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		return fmt.Errorf("%s did not become healthy: %v\n%s", site, err, c.log(site))
	})
}

// until polls cond with testhelp.Eventually until deadline, a bound the
// poll shares with the rest of its test (a context's deadline, say).
func until(t testing.TB, deadline time.Time, cond func() error) {
	t.Helper()
	// Eventually takes 0 or less for its default: a deadline already past
	// still gets one call and fails at once.
	testhelp.Eventually(t, max(time.Until(deadline), time.Nanosecond), cond)
}

func (c *cluster) log(site string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, site+".log"))
	return string(b)
}

// kill9 kills a site with SIGKILL: no shutdown, no flush.
func (c *cluster) kill9(site string) {
	p := c.procs[site]
	_ = p.Process.Signal(syscall.SIGKILL)
	_ = p.Wait()
	delete(c.procs, site)
}

// stop sends SIGTERM and expects a clean exit.
func (c *cluster) stop(site string) {
	p := c.procs[site]
	_ = p.Process.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		c.t.Errorf("%s exited with %v\n%s", site, err, c.log(site))
	}
	delete(c.procs, site)
}

func (c *cluster) stopAll() {
	for site := range c.procs {
		c.stop(site)
	}
	if c.t.Failed() {
		for _, s := range c.sites {
			c.t.Logf("log of %s:\n%s", s.Site, c.log(s.Site))
		}
	}
}

// kvctl runs kvctl against a site and returns stdout, stderr and the exit
// status.
func (c *cluster) kvctl(site string, args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kvctl"), append([]string{"--endpoint", c.info(site).Client}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
