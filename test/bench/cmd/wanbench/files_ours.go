package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/test/bench/internal/stpeer"
	"github.com/stabilizer/stabilizer/wan"
)

// Our side of the file-sync bench: one stabilizerd per site, its peers
// reached through proxies of an emulated WAN that runs in this process
// (so that its per-link byte counters can be read: wanbed's WAN process
// does not export them), and one `stabsync run` per site on a folder of
// its own, talking to its site directly, as a client in the region would.

// fsCluster is our sites, their links and their clients.
type fsCluster struct {
	net     *wan.Network
	reg     *prometheus.Registry
	sites   []fsSite
	procs   []*proc // sites, then clients
	clients map[string]*proc
	folders map[string]string
	conn    *grpc.ClientConn // to the origin's site
	api     filesharepb.FileShareClient
}

// fsSite is one site as `stabilizerd genconfig -o json` prints it.
type fsSite struct {
	siteInfo
	Data    string `json:"data"`
	Control string `json:"control"`
	proc    *proc
}

// startFSCluster starts the sites of topo in dir behind links of bw each,
// creates the share at origin and starts a client per site on
// dir/<site>/folder. Close it also after an error.
func startFSCluster(ctx context.Context, o fsOptions, topo *wan.Topology, dir string) (*fsCluster, error) {
	c := &fsCluster{clients: map[string]*proc{}, folders: map[string]string{}}
	stabd, err := findBinary("stabilizerd")
	if err != nil {
		return c, err
	}
	stabsync, err := findBinary("stabsync")
	if err != nil {
		return c, err
	}
	out, err := command(io.Discard, stabd, "genconfig", "--sites", strings.Join(topo.Sites, ","), "--dir", dir, "-o", "json")
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(out, &c.sites); err != nil {
		return c, fmt.Errorf("stabilizerd genconfig -o json: %w: %q", err, out)
	}
	if err := c.route(topo, o.bandwidth); err != nil {
		return c, err
	}
	for i := range c.sites {
		s := &c.sites[i]
		if s.proc, err = start(stabd, filepath.Join(dir, s.Site+".log"), "--config", s.Config); err != nil {
			return c, err
		}
		c.procs = append(c.procs, s.proc)
	}
	for _, s := range c.sites {
		if err := waitHealthy(s.siteInfo, s.proc); err != nil {
			return c, err
		}
	}
	fmt.Fprintf(o.progress, "ours: %d sites up behind %d emulated links of %s each\n", len(c.sites), len(c.net.Links()), o.bandwidth)
	origin := c.site(o.origin)
	if c.conn, err = grpc.NewClient(origin.Client, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return c, err
	}
	c.api = filesharepb.NewFileShareClient(c.conn)
	// The share is created through the origin's client; the others find
	// it once the KV carried its definition there.
	order := append([]string{o.origin}, without(topo.Sites, o.origin)...)
	for _, site := range order {
		s := c.site(site)
		folder := filepath.Join(dir, site, "folder")
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return c, err
		}
		args := []string{"init", folder, "--share", fsShare, "--site", s.Client, "--settle", o.settle.String()}
		if site == o.origin {
			args = append(args, "--create", "--visibility", "majority", "--marker", fsMarker, "--commit-dirs", fsCommitDirs)
		}
		if err := retry(ctx, 20*time.Second, func() error { _, err := command(io.Discard, stabsync, args...); return err }); err != nil {
			return c, err
		}
		p, err := start(stabsync, filepath.Join(dir, site+"-stabsync.log"), "run", folder)
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, p)
		c.clients[site], c.folders[site] = p, folder
	}
	fmt.Fprintf(o.progress, "ours: share %q (visibility majority, commit by %s in %s), stabsync run at every site, settle %s\n",
		fsShare, fsMarker, fsCommitDirs, o.settle)
	return c, nil
}

// route makes the in-process WAN: for each ordered pair of sites, one
// proxy per plane on the pair's link, and rewrites each site's config to
// reach its peers through them. A proxy that took a port a site is to
// listen on (genconfig released them) is a failure to retry.
func (c *fsCluster) route(topo *wan.Topology, bw wan.Bandwidth) error {
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

func (c *fsCluster) site(name string) fsSite {
	for _, s := range c.sites {
		if s.Site == name {
			return s
		}
	}
	return fsSite{}
}

// sitePIDs and clientPIDs name the processes for the memory figures.
func (c *fsCluster) sitePIDs() map[string]int {
	out := map[string]int{}
	for _, s := range c.sites {
		if s.proc != nil {
			out[s.Site] = s.proc.cmd.Process.Pid
		}
	}
	return out
}

func (c *fsCluster) clientPIDs() map[string]int {
	out := map[string]int{}
	for site, p := range c.clients {
		out[site] = p.cmd.Process.Pid
	}
	return out
}

// stableAt reports whether the origin's site lists every file of the
// commit dir (want of them) as stable.
func (c *fsCluster) stableAt(ctx context.Context, dir string, want int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.api.List(ctx, &filesharepb.ListRequest{Share: fsShare})
	if err != nil {
		return false, err
	}
	n := 0
	for _, v := range resp.Versions {
		if strings.HasPrefix(v.Path, dir+"/") && !v.Deleted {
			if !v.Stable {
				return false, nil
			}
			n++
		}
	}
	return n >= want, nil
}

// exited names a process of ours that died, with the end of its log.
func (c *fsCluster) exited() error {
	for _, p := range c.procs {
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

// Close stops the clients, then the sites, then the links.
func (c *fsCluster) Close(progress io.Writer) {
	if c.conn != nil {
		c.conn.Close()
	}
	var clients []*proc
	for _, p := range c.clients {
		clients = append(clients, p)
	}
	stopAll(clients, progress)
	stopAll(c.procs, progress)
	if c.net != nil {
		_ = c.net.Close()
	}
}

// wireBytes reads the links' delivered bytes.
func (c *fsCluster) wireBytes() (map[stpeer.Link]int64, error) {
	return stpeer.GatherLinks(c.reg, "wan_delivered_bytes_total")
}

// retry runs f until it succeeds or within passes, 200 ms apart.
func retry(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func without(xs []string, x string) []string {
	var out []string
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}
