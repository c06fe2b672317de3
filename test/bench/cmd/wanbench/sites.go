package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/test/bench/internal/stpeer"
	"github.com/stabilizer/stabilizer/wan"
)

// Our sites behind an emulated WAN that runs in this process: one
// stabilizerd per site, each reaching its peers through proxies of the
// in-process links, so that the links' byte counters can be read
// (wanbed's WAN process does not export them). The file bench, the soak
// and the wipe bench all start their sites this way.

// siteCluster is our sites and their links.
type siteCluster struct {
	net   *wan.Network
	reg   *prometheus.Registry
	sites []fsSite
	stabd string // the stabilizerd binary
	dir   string
}

// fsSite is one site as `stabilizerd genconfig -o json` prints it.
type fsSite struct {
	siteInfo
	Data    string `json:"data"`
	Control string `json:"control"`
	proc    *proc
}

// startSites starts the sites of topo in dir behind links of bw each and
// waits until every one is healthy. extra, if not empty, is appended to
// every site's config (top-level YAML lines, e.g.
// "state_transfer_rate: 1000000\n"). It always returns the cluster:
// Close it also after an error.
func startSites(topo *wan.Topology, dir string, bw wan.Bandwidth, extra string) (*siteCluster, error) {
	c := &siteCluster{dir: dir}
	var err error
	if c.stabd, err = findBinary("stabilizerd"); err != nil {
		return c, err
	}
	out, err := command(io.Discard, c.stabd, "genconfig", "--sites", strings.Join(topo.Sites, ","), "--dir", dir, "-o", "json")
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(out, &c.sites); err != nil {
		return c, fmt.Errorf("stabilizerd genconfig -o json: %w: %q", err, out)
	}
	if extra != "" {
		if !strings.HasSuffix(extra, "\n") {
			extra += "\n"
		}
		for _, s := range c.sites {
			if err := appendFile(s.Config, extra); err != nil {
				return c, err
			}
		}
	}
	if err := c.route(topo, bw); err != nil {
		return c, err
	}
	for i := range c.sites {
		if err := c.startSite(i); err != nil {
			return c, err
		}
	}
	for _, s := range c.sites {
		if err := waitHealthy(s.siteInfo, s.proc); err != nil {
			return c, err
		}
	}
	return c, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startSite starts site i's stabilizerd, its output appended to
// dir/<site>.log.
func (c *siteCluster) startSite(i int) error {
	s := &c.sites[i]
	p, err := start(c.stabd, c.logPath(s.Site), "--config", s.Config)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

func (c *siteCluster) logPath(site string) string { return filepath.Join(c.dir, site+".log") }

// dataDirs are the directories that hold a site's store: its data
// directory (genconfig's data_dir, the site's name beside its config) and
// the state-transfer snapshots kept beside it.
func (c *siteCluster) dataDirs(site string) []string {
	d := filepath.Join(c.dir, site)
	return []string{d, d + ".snapshots"}
}

// route makes the in-process WAN: for each ordered pair of sites, one
// proxy per plane on the pair's link, and rewrites each site's config to
// reach its peers through them. A proxy that took a port a site is to
// listen on (genconfig released them) is a failure to retry.
func (c *siteCluster) route(topo *wan.Topology, bw wan.Bandwidth) error {
	c.reg = prometheus.NewRegistry()
	n, err := wan.NewNetwork(wan.Config{Topology: topo, Registerer: c.reg})
	if err != nil {
		return err
	}
	c.net = n
	taken := map[string]bool{}
	for _, s := range c.sites {
		for _, a := range []string{s.Data, s.Control, s.Client, s.HTTP} {
			taken[a] = true
		}
	}
	for _, from := range c.sites {
		cfg, err := os.ReadFile(from.Config)
		if err != nil {
			return err
		}
		text := string(cfg)
		for _, to := range c.sites {
			if to.Site == from.Site {
				continue
			}
			l, err := n.Link(from.Site, to.Site)
			if err != nil {
				return err
			}
			if err := setBandwidth(l, bw); err != nil {
				return err
			}
			for _, target := range []string{to.Data, to.Control, to.Client} {
				p, err := l.Proxy(target)
				if err != nil {
					return err
				}
				if taken[p.Addr()] {
					return fmt.Errorf("proxy of %s took %s, a site's port; run again", l, p.Addr())
				}
				// Each peer address appears once in a site's config, as
				// the value of its data, control or client key.
				old := ": " + target + "\n"
				if strings.Count(text, old) != 1 {
					return fmt.Errorf("%s: peer address %s appears %d times", from.Config, target, strings.Count(text, old))
				}
				text = strings.Replace(text, old, ": "+p.Addr()+"\n", 1)
			}
		}
		if err := os.WriteFile(from.Config, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func setBandwidth(l *wan.Link, bw wan.Bandwidth) error {
	cfg := l.Config()
	cfg.Bandwidth = bw
	return l.Set(cfg)
}

// setAllBandwidth changes every link of n.
func setAllBandwidth(n *wan.Network, bw wan.Bandwidth) error {
	for _, l := range n.Links() {
		if err := setBandwidth(l, bw); err != nil {
			return err
		}
	}
	return nil
}

func (c *siteCluster) site(name string) fsSite {
	for _, s := range c.sites {
		if s.Site == name {
			return s
		}
	}
	return fsSite{}
}

func (c *siteCluster) sitesNames() []string {
	var out []string
	for _, s := range c.sites {
		out = append(out, s.Site)
	}
	return out
}

// siteProcs are the sites' processes that were started.
func (c *siteCluster) siteProcs() []*proc {
	var out []*proc
	for _, s := range c.sites {
		if s.proc != nil {
			out = append(out, s.proc)
		}
	}
	return out
}

// sitePIDs names the sites' processes for the memory figures.
func (c *siteCluster) sitePIDs() map[string]int {
	out := map[string]int{}
	for _, s := range c.sites {
		if s.proc != nil {
			out[s.Site] = s.proc.cmd.Process.Pid
		}
	}
	return out
}

// exited names a site of ours that died, with the end of its log.
func (c *siteCluster) exited() error { return exitedOf(c.siteProcs()) }

func exitedOf(ps []*proc) error {
	for _, p := range ps {
		if p.exited() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 1500 {
				b = b[len(b)-1500:]
			}
			return fmt.Errorf("%s exited; end of its log:\n%s", filepath.Base(p.log), b)
		}
	}
	return nil
}

// wireBytes reads the links' delivered bytes.
func (c *siteCluster) wireBytes() (map[stpeer.Link]int64, error) {
	return stpeer.GatherLinks(c.reg, "wan_delivered_bytes_total")
}

// Close stops the sites, then the links. It may be called on the
// cluster startSites returned with an error.
func (c *siteCluster) Close(progress io.Writer) {
	if c == nil {
		return
	}
	stopAll(c.siteProcs(), progress)
	if c.net != nil {
		_ = c.net.Close()
	}
}
