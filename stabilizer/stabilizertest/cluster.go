package stabilizertest

import (
	"sync"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Options describe a Cluster. Only Sites is required.
type Options struct {
	// Sites are the sites' names, in configuration order.
	Sites []string
	// Groups and Levels complete the schema predicates compile against.
	Groups map[string][]string
	Levels []string
	// Predicates are every site's configured named predicates.
	Predicates map[string]string
	// Transport returns the transport of a site at each of its starts.
	// Default: the cluster's Network.
	Transport func(site string) stabilizer.Transport
	// Configure adjusts a site's node configuration at each start, after
	// the cluster filled it in (Core, SyncDelay, Now, …).
	Configure func(site string, cfg *stabilizer.Config)
	// Setup registers the site's applications (Handle, HandleChannel,
	// Namespace) on its new node at each start, before Start. An error
	// fails the test.
	Setup func(site string, n *stabilizer.Node) error
	// Started is called after a site's node started, at every start: an
	// application whose background work needs a running node starts it
	// here.
	Started func(site string, n *stabilizer.Node) error
	// Stopping is called before a site's node closes (Stop, and the end of
	// the test): an application stops what Started began.
	Stopping func(site string, n *stabilizer.Node)
	// Stopped lists sites that NewCluster leaves stopped: Start them.
	Stopped []string
	// Join makes sites that start with an empty folder wait to hear every
	// peer before their first append, as stabilizerd's do (the node's
	// default, Config.JoinTimeout): a test of wiped sites wants it. Off by
	// default, so that a test may cut links or leave sites stopped before
	// its first append.
	Join bool
}

// Cluster is a set of sites in one process, each a stabilizer.Node on its
// own folder in t.TempDir(), connected by a Network (or the transports
// Options.Transport makes).
type Cluster struct {
	T      testing.TB
	Schema *frontier.Schema
	Net    *Network
	opts   Options
	dirs   map[string]string

	mu    sync.Mutex
	nodes map[string]*stabilizer.Node
}

// NewCluster starts every site of o, but those of o.Stopped, and stops them
// all when the test ends.
func NewCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	c := &Cluster{T: t, Net: NewNetwork(), opts: o, dirs: map[string]string{}, nodes: map[string]*stabilizer.Node{},
		Schema: &frontier.Schema{Sites: o.Sites, Groups: o.Groups, Levels: o.Levels}}
	for _, s := range o.Sites {
		c.dirs[s] = t.TempDir()
	}
	// Registered after TempDir's cleanups, so it runs before them: the
	// nodes stop before their folders are removed.
	t.Cleanup(c.close)
	stopped := map[string]bool{}
	for _, s := range o.Stopped {
		stopped[s] = true
	}
	for _, s := range o.Sites {
		if !stopped[s] {
			c.Start(s)
		}
	}
	return c
}

func (c *Cluster) close() {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = map[string]*stabilizer.Node{}
	c.mu.Unlock()
	for site, n := range nodes {
		if c.opts.Stopping != nil {
			c.opts.Stopping(site, n)
		}
		_ = n.Close()
	}
	c.Net.Close()
}

// Sites returns the sites' names in configuration order.
func (c *Cluster) Sites() []string { return c.Schema.Sites }

// Dir returns a site's folder, which outlives its restarts.
func (c *Cluster) Dir(site string) string { return c.dirs[site] }

// Node returns a site's running node, nil while the site is stopped.
func (c *Cluster) Node(site string) *stabilizer.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[site]
}

// Config returns the configuration a site's node starts with.
func (c *Cluster) Config(site string) stabilizer.Config {
	cfg := stabilizer.Config{Site: site, Schema: c.Schema, Dir: c.dirs[site], Predicates: c.opts.Predicates,
		Logger: Logger(c.T, site)}
	if !c.opts.Join {
		cfg.JoinTimeout = -1
	}
	if c.opts.Transport != nil {
		cfg.Transport = c.opts.Transport(site)
	} else {
		cfg.Transport = c.Net.Transport(site)
	}
	if c.opts.Configure != nil {
		c.opts.Configure(site, &cfg)
	}
	return cfg
}

// Start starts a stopped site on its folder: a new node, set up by
// Options.Setup, resuming from what the last one persisted.
func (c *Cluster) Start(site string) *stabilizer.Node {
	c.T.Helper()
	if c.Node(site) != nil {
		c.T.Fatalf("stabilizertest: start %s: already running", site)
	}
	n, err := stabilizer.New(c.Config(site))
	if err != nil {
		c.T.Fatalf("stabilizertest: start %s: %v", site, err)
	}
	if c.opts.Setup != nil {
		if err := c.opts.Setup(site, n); err != nil {
			_ = n.Close()
			c.T.Fatalf("stabilizertest: set up %s: %v", site, err)
		}
	}
	if err := n.Start(); err != nil {
		_ = n.Close()
		c.T.Fatalf("stabilizertest: start %s: %v", site, err)
	}
	c.mu.Lock()
	c.nodes[site] = n
	c.mu.Unlock()
	if c.opts.Started != nil {
		if err := c.opts.Started(site, n); err != nil {
			c.T.Fatalf("stabilizertest: started %s: %v", site, err)
		}
	}
	return n
}

// Stop closes a site's node cleanly; its folder stays for Start.
func (c *Cluster) Stop(site string) {
	c.T.Helper()
	c.mu.Lock()
	n := c.nodes[site]
	delete(c.nodes, site)
	c.mu.Unlock()
	if n == nil {
		c.T.Fatalf("stabilizertest: stop %s: not running", site)
	}
	if c.opts.Stopping != nil {
		c.opts.Stopping(site, n)
	}
	if err := n.Close(); err != nil {
		c.T.Fatalf("stabilizertest: stop %s: %v", site, err)
	}
}

// Isolate cuts (cut) or restores every link between site and the others.
func (c *Cluster) Isolate(site string, cut bool) {
	for _, p := range c.Schema.Sites {
		switch {
		case p == site:
		case cut:
			c.Net.Cut(site, p)
		default:
			c.Net.Restore(site, p)
		}
	}
}

// OpenNode opens a node of one site on dir (t.TempDir() when ""), without
// starting it, for tests that need only a Namespace; it is closed when the
// test ends, or earlier by the close it returns.
func OpenNode(t testing.TB, site, dir string) (n *stabilizer.Node, close func() error) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	n, err := stabilizer.New(stabilizer.Config{Site: site, Schema: &frontier.Schema{Sites: []string{site}}, Dir: dir,
		Logger: Logger(t, site)})
	if err != nil {
		t.Fatalf("stabilizertest: open %s: %v", dir, err)
	}
	var once sync.Once
	var err2 error
	close = func() error {
		once.Do(func() { err2 = n.Close() })
		return err2
	}
	t.Cleanup(func() { _ = close() })
	return n, close
}
