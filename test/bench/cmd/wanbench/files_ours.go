package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/wan"
)

// Our side of the file-sync bench: one stabilizerd per site behind the
// in-process emulated WAN (sites.go), and one `stabsync run` per site on a
// folder of its own, talking to its site directly, as a client in the
// region would.

// fsCluster is our sites, their links and their clients.
type fsCluster struct {
	*siteCluster
	clients map[string]*proc
	folders map[string]string
	conn    *grpc.ClientConn // to the origin's site
	api     filesharepb.FileShareClient
}

// startFSCluster starts the sites of topo in dir behind links of bw each,
// creates the share at origin and starts a client per site on
// dir/<site>/folder. Close it also after an error.
func startFSCluster(ctx context.Context, o fsOptions, topo *wan.Topology, dir string) (*fsCluster, error) {
	c := &fsCluster{clients: map[string]*proc{}, folders: map[string]string{}}
	stabsync, err := findBinary("stabsync")
	if err != nil {
		return c, err
	}
	c.siteCluster, err = startSites(topo, dir, o.bandwidth, "")
	if err != nil {
		return c, err
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
		c.clients[site], c.folders[site] = p, folder
	}
	fmt.Fprintf(o.progress, "ours: share %q (visibility majority, commit by %s in %s), stabsync run at every site, settle %s\n",
		fsShare, fsMarker, fsCommitDirs, o.settle)
	return c, nil
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

// exited names a process of ours that died (a site or a client), with
// the end of its log.
func (c *fsCluster) exited() error {
	var ps []*proc
	if c.siteCluster != nil {
		ps = c.siteProcs()
	}
	for _, p := range c.clients {
		ps = append(ps, p)
	}
	return exitedOf(ps)
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
	c.siteCluster.Close(progress)
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
