package stpeer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/wan"
)

// ErrUnknownSite is returned for a site the cluster does not run.
var ErrUnknownSite = errors.New("stpeer: unknown site")

// Options configures Start.
type Options struct {
	// Binary is the syncthing executable (see test/peers/syncthing).
	// Required.
	Binary string
	// Dir holds each site's home and folder (Dir/<site>/home,
	// Dir/<site>/folder) and log (Dir/<site>/syncthing.log). Required; it
	// is made if missing and nothing in it is removed.
	Dir string
	// Sites to run, one instance each. Default: every site of Topology.
	Sites []string
	// Topology gives the links their delay, jitter and loss. Required.
	Topology *wan.Topology
	// Bandwidth, if not zero, replaces the topology's bandwidth on every
	// link.
	Bandwidth wan.Bandwidth
	// Origin, if set, is the one site that writes: its folder is sendonly
	// and every other one receiveonly. Default: sendreceive everywhere.
	Origin string
	// Log, if set, also receives every instance's output, each line
	// prefixed with its site. Default: only the log files.
	Log io.Writer
}

func (o *Options) validate() error {
	var errs []error
	if o.Binary == "" {
		errs = append(errs, errors.New("stpeer: options: Binary is empty"))
	}
	if o.Dir == "" {
		errs = append(errs, errors.New("stpeer: options: Dir is empty"))
	}
	if o.Topology == nil {
		errs = append(errs, errors.New("stpeer: options: Topology is nil"))
	} else {
		for _, s := range o.Sites {
			if !o.Topology.HasSite(s) {
				errs = append(errs, fmt.Errorf("stpeer: options: Sites: %q is not in topology %s", s, o.Topology.Name))
			}
		}
	}
	if len(o.Sites) == 1 || (len(o.Sites) == 0 && o.Topology != nil && len(o.Topology.Sites) < 2) {
		errs = append(errs, fmt.Errorf("stpeer: options: Sites: %v: need at least two", o.Sites))
	}
	seen := map[string]bool{}
	for _, s := range o.Sites {
		if seen[s] {
			errs = append(errs, fmt.Errorf("stpeer: options: Sites: %q appears twice", s))
		}
		seen[s] = true
	}
	if o.Origin != "" && len(o.Sites) > 0 && !seen[o.Origin] {
		errs = append(errs, fmt.Errorf("stpeer: options: Origin: %q is not one of Sites %v", o.Origin, o.Sites))
	}
	if o.Bandwidth < 0 {
		errs = append(errs, fmt.Errorf("stpeer: options: Bandwidth: %d is negative", int64(o.Bandwidth)))
	}
	return errors.Join(errs...)
}

// Cluster is one Syncthing instance per site, every pair connected through
// the emulated links of its wan.Network.
type Cluster struct {
	opts  Options
	reg   *prometheus.Registry
	net   *wan.Network
	hc    *http.Client
	sites map[string]*instance
	order []string
	logMu sync.Mutex // serializes the instances' lines onto Options.Log

	closeOnce sync.Once
	closeErr  error
}

// instance is one site's syncthing.
type instance struct {
	site, deviceID string
	home, folder   string
	log            string
	listen, gui    string
	api            *rest

	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and was waited for

	mu struct {
		sync.Mutex
		cursor  int  // last ItemFinished event ID read
		waiting bool // a WaitInSync is reading from cursor
	}
}

// Start runs one instance per site as doc.go describes and returns once
// every pair is connected through its emulated links. On error, whatever it
// started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(opts.Sites) == 0 {
		opts.Sites = slices.Clone(opts.Topology.Sites)
	}
	reg := prometheus.NewRegistry()
	n, err := wan.NewNetwork(wan.Config{Topology: opts.Topology, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("stpeer: %w", err)
	}
	c := &Cluster{
		opts:  opts,
		reg:   reg,
		net:   n,
		hc:    &http.Client{Transport: &http.Transport{}},
		sites: make(map[string]*instance),
		order: opts.Sites,
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	apiKey, err := randomKey()
	if err != nil {
		return err
	}
	ports, err := local.FreePorts(2 * len(c.order))
	if err != nil {
		return err
	}
	for i, site := range c.order {
		in := &instance{
			site:   site,
			home:   filepath.Join(c.opts.Dir, site, "home"),
			folder: filepath.Join(c.opts.Dir, site, "folder"),
			log:    filepath.Join(c.opts.Dir, site, "syncthing.log"),
			listen: ports[2*i],
			gui:    ports[2*i+1],
			done:   make(chan struct{}),
		}
		in.api = &rest{site: site, base: "http://" + in.gui, apiKey: apiKey, hc: c.hc}
		if in.deviceID, err = c.generate(ctx, in); err != nil {
			return err
		}
		c.sites[site] = in
	}
	// One proxy per directed pair: from's instance dials to's device at
	// the proxy of the from->to link.
	proxies := make(map[[2]string]string)
	for _, from := range c.order {
		for _, to := range c.order {
			if from == to {
				continue
			}
			l, err := c.net.Link(from, to)
			if err != nil {
				return fmt.Errorf("stpeer: %w", err)
			}
			if c.opts.Bandwidth != 0 {
				cfg := l.Config()
				cfg.Bandwidth = c.opts.Bandwidth
				if err := l.Set(cfg); err != nil {
					return fmt.Errorf("stpeer: link %s: %w", l, err)
				}
			}
			p, err := l.Proxy(c.sites[to].listen)
			if err != nil {
				return fmt.Errorf("stpeer: proxy %s: %w", l, err)
			}
			proxies[[2]string{from, to}] = p.Addr()
		}
	}
	for _, site := range c.order {
		in := c.sites[site]
		cfg := instanceConfig{
			Site: site, DeviceID: in.deviceID, Listen: in.listen, GUI: in.gui, APIKey: apiKey,
			FolderPath: in.folder, FolderType: c.folderType(site),
		}
		for _, peer := range c.order {
			if peer != site {
				cfg.Peers = append(cfg.Peers, peerConfig{Site: peer, DeviceID: c.sites[peer].deviceID, Addr: proxies[[2]string{site, peer}]})
			}
		}
		if err := os.MkdirAll(in.folder, 0o755); err != nil {
			return fmt.Errorf("stpeer: %s: %w", site, err)
		}
		if err := cfg.write(filepath.Join(in.home, "config.xml")); err != nil {
			return err
		}
	}
	for _, site := range c.order {
		if err := c.serve(c.sites[site]); err != nil {
			return err
		}
	}
	for _, site := range c.order {
		if err := c.subscribe(ctx, c.sites[site]); err != nil {
			return err
		}
	}
	return c.waitConnected(ctx)
}

func (c *Cluster) folderType(site string) string {
	switch c.opts.Origin {
	case "":
		return folderSendReceive
	case site:
		return folderSendOnly
	default:
		return folderReceiveOnly
	}
}

// generate makes the instance's keys (and a config.xml that start
// replaces) and returns its device ID.
func (c *Cluster) generate(ctx context.Context, in *instance) (string, error) {
	if err := os.MkdirAll(in.home, 0o700); err != nil {
		return "", fmt.Errorf("stpeer: %s: %w", in.site, err)
	}
	cmd := exec.CommandContext(ctx, c.opts.Binary, "generate", "--home", in.home, "--no-default-folder", "--skip-port-probing")
	cmd.Env = append(os.Environ(), "STNOUPGRADE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("stpeer: %s: syncthing generate: %w: %s", in.site, err, bytes.TrimSpace(out))
	}
	return parseDeviceID(out)
}

// serve starts the instance's `syncthing serve` and the goroutine that
// waits for it.
func (c *Cluster) serve(in *instance) error {
	logf, err := os.OpenFile(in.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("stpeer: %s: %w", in.site, err)
	}
	cmd := exec.Command(c.opts.Binary, "serve",
		"--home", in.home,
		"--no-browser",
		"--no-restart",
		"--gui-address", "http://"+in.gui,
		"--logflags", "3",
	)
	cmd.Env = append(os.Environ(), "STNOUPGRADE=1")
	var out io.Writer = logf
	if c.opts.Log != nil {
		out = io.MultiWriter(logf, &prefixWriter{mu: &c.logMu, w: c.opts.Log, prefix: in.site + ": "})
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own: a Ctrl-C at the terminal reaches only
	// the bench, which stops the instances in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("stpeer: %s: start syncthing: %w", in.site, err)
	}
	in.cmd = cmd
	// Ends when the process does; Close waits for it. With Options.Log,
	// exec copies the output through a pipe into logf, which must stay
	// open until Wait is done with it.
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(in.done)
	}()
	return nil
}

func (in *instance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// exitError describes an instance that exited, with the end of its log.
func (in *instance) exitError() error {
	b, _ := os.ReadFile(in.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Errorf("stpeer: %s: syncthing exited (%v); end of %s:\n%s", in.site, in.cmd.ProcessState, in.log, b)
}

// pollEvery is how often Start polls while it waits for the instances.
const pollEvery = 50 * time.Millisecond

// subscribe waits for the instance's REST API and makes its ItemFinished
// subscription, setting the cursor to the last event before it.
func (c *Cluster) subscribe(ctx context.Context, in *instance) error {
	for {
		evs, err := in.api.events(ctx, 0, 0)
		if err == nil {
			in.mu.Lock()
			for _, ev := range evs {
				in.mu.cursor = max(in.mu.cursor, ev.ID)
			}
			in.mu.Unlock()
			return nil
		}
		if in.exited() {
			return in.exitError()
		}
		if serr := local.Sleep(ctx, pollEvery); serr != nil {
			return fmt.Errorf("stpeer: %s: REST API not up: %w (last: %v)", in.site, serr, err)
		}
	}
}

// waitConnected polls until every instance is connected to every other,
// and each pair's links carry a connection.
func (c *Cluster) waitConnected(ctx context.Context) error {
	var last error
	for {
		last = c.connectedAll(ctx)
		if last == nil {
			return nil
		}
		for _, site := range c.order {
			if in := c.sites[site]; in.exited() {
				return in.exitError()
			}
		}
		if err := local.Sleep(ctx, pollEvery); err != nil {
			return fmt.Errorf("stpeer: waiting for connections: %w (last: %v)", err, last)
		}
	}
}

func (c *Cluster) connectedAll(ctx context.Context) error {
	for _, site := range c.order {
		conns, err := c.Connections(ctx, site)
		if err != nil {
			return err
		}
		for _, peer := range c.order {
			if peer != site && !conns[peer].Connected {
				return fmt.Errorf("stpeer: %s is not connected to %s", site, peer)
			}
		}
	}
	open, err := c.gather("wan_connections")
	if err != nil {
		return err
	}
	for i, a := range c.order {
		for _, b := range c.order[i+1:] {
			if open[Link{a, b}]+open[Link{b, a}] < 1 {
				return fmt.Errorf("stpeer: %s and %s are connected, but not through their emulated links", a, b)
			}
		}
	}
	return nil
}

// Sites returns the sites the cluster runs, in Options order.
func (c *Cluster) Sites() []string { return slices.Clone(c.order) }

// FolderPath returns the directory of the shared folder at site, or "" for
// a site the cluster does not run.
func (c *Cluster) FolderPath(site string) string {
	if in, ok := c.sites[site]; ok {
		return in.folder
	}
	return ""
}

// Network returns the emulated WAN the instances talk through, to change
// or cut its links.
func (c *Cluster) Network() *wan.Network { return c.net }

func (c *Cluster) instance(site string) (*instance, error) {
	in, ok := c.sites[site]
	if !ok {
		return nil, fmt.Errorf("%w %q (running: %s)", ErrUnknownSite, site, strings.Join(c.order, ", "))
	}
	return in, nil
}

// Scan rescans the folder at site and returns once the scan is done, so
// that the files written there before the call are announced to the others.
func (c *Cluster) Scan(ctx context.Context, site string) error {
	in, err := c.instance(site)
	if err != nil {
		return err
	}
	return in.api.scan(ctx)
}

// Connections returns site's view of its connections
// (/rest/system/connections), by remote site.
func (c *Cluster) Connections(ctx context.Context, site string) (map[string]Conn, error) {
	in, err := c.instance(site)
	if err != nil {
		return nil, err
	}
	byID, err := in.api.connections(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Conn, len(byID))
	for _, peer := range c.order {
		if conn, ok := byID[c.sites[peer].deviceID]; ok {
			out[peer] = conn
		}
	}
	return out, nil
}

// Link names a directed emulated link.
type Link struct{ From, To string }

// WireBytes returns, per directed link, the bytes the link has delivered
// since Start (its wan_delivered_bytes_total): everything the instances
// exchanged, TLS and protocol framing included.
func (c *Cluster) WireBytes() (map[Link]int64, error) {
	return c.gather("wan_delivered_bytes_total")
}

// gather reads one of the network's per-link metrics.
func (c *Cluster) gather(name string) (map[Link]int64, error) {
	return GatherLinks(c.reg, name)
}

// GatherLinks reads one per-link metric (wan_delivered_bytes_total,
// wan_connections, ...) of a wan.Network registered in g, by directed
// link. The file-sync bench reads our own sites' links with it too, so
// that both systems are measured alike.
func GatherLinks(g prometheus.Gatherer, name string) (map[Link]int64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("stpeer: reading link metrics: %w", err)
	}
	out := make(map[Link]int64)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l Link
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "from":
					l.From = lp.GetValue()
				case "to":
					l.To = lp.GetValue()
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[l] = int64(v)
		}
	}
	return out, nil
}

// stopGrace is how long Close waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// Close stops every instance (SIGTERM to its process group, SIGKILL after
// 10 s) and waits for it, then closes the emulated network. It removes no
// file. It is idempotent.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var started []*instance
		for _, site := range c.order {
			if in := c.sites[site]; in != nil && in.cmd != nil {
				started = append(started, in)
				_ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGTERM)
			}
		}
		grace := time.NewTimer(stopGrace)
		defer grace.Stop()
		var errs []error
		for _, in := range started {
			select {
			case <-in.done:
				continue
			case <-grace.C:
			}
			errs = append(errs, fmt.Errorf("stpeer: %s: syncthing (pid %d) did not stop on SIGTERM; killed it", in.site, in.cmd.Process.Pid))
			_ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
			<-in.done
		}
		c.hc.CloseIdleConnections()
		if err := c.net.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stpeer: %w", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func randomKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("stpeer: api key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// prefixWriter writes whole lines to w, each prefixed. Instances' writers
// share w, so each line is written under mu, which they share too.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.mu.Lock()
		_, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.mu.Unlock()
		p.buf = p.buf[i+1:]
		if err != nil {
			return len(b), err
		}
	}
}
