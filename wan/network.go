package wan

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Sentinel errors.
var (
	// ErrClosed is returned by operations on a closed Network or Proxy.
	ErrClosed = errors.New("wan: closed")
	// ErrUnknownSite is returned for a site the topology does not name.
	ErrUnknownSite = errors.New("wan: unknown site")
)

type linkKey struct{ from, to string }

// Network is a set of directed links between named sites. Links are made on
// first use; with a topology they start with its shaping.
type Network struct {
	cfg     Config
	log     hclog.Logger
	metrics *metrics

	mu struct {
		sync.Mutex
		links      map[linkKey]*Link
		forwarders map[*forwarder]struct{} // every Proxy's and Demux's
		addrs      map[string]string       // registered address -> site
		closed     bool
	}
}

// NewNetwork validates cfg and returns an empty network. It starts no
// goroutines; proxies do, and Close stops them.
func NewNetwork(cfg Config) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	m, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	n := &Network{cfg: c, log: c.Logger.Named("wan"), metrics: m}
	n.mu.links = make(map[linkKey]*Link)
	n.mu.forwarders = make(map[*forwarder]struct{})
	n.mu.addrs = make(map[string]string)
	return n, nil
}

// Topology returns the topology the network was made with, or nil.
func (n *Network) Topology() *Topology { return n.cfg.Topology }

// Link returns the directed link from one site to another, making it (and
// its reverse) on first use. With a topology, both sites must be in it.
func (n *Network) Link(from, to string) (*Link, error) {
	if from == "" || to == "" {
		return nil, fmt.Errorf("wan: link %q->%q: site names must not be empty", from, to)
	}
	if from == to {
		return nil, fmt.Errorf("wan: link %q->%q: a link joins two different sites", from, to)
	}
	if t := n.cfg.Topology; t != nil {
		for _, s := range []string{from, to} {
			if !t.HasSite(s) {
				return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownSite, s, strings.Join(t.Sites, ", "))
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.mu.links[linkKey{from, to}]; ok {
		return l, nil
	}
	ab, ba := n.newLinkLocked(from, to), n.newLinkLocked(to, from)
	ab.rev, ba.rev = ba, ab
	return ab, nil
}

func (n *Network) newLinkLocked(from, to string) *Link {
	l := &Link{n: n, from: from, to: to, m: n.metrics.forLink(from, to)}
	h := fnv.New64a()
	h.Write([]byte(from + "\x00" + to))
	l.mu.shaper.rng = rand.New(rand.NewPCG(n.cfg.Seed, h.Sum64()))
	if t := n.cfg.Topology; t != nil {
		if cfg, err := t.LinkConfig(from, to); err == nil {
			l.mu.shaper.cfg = cfg
		}
	}
	l.publishLocked()
	n.mu.links[linkKey{from, to}] = l
	return l
}

// Links returns every link made so far, sorted by (from, to).
func (n *Network) Links() []*Link {
	n.mu.Lock()
	out := make([]*Link, 0, len(n.mu.links))
	for _, l := range n.mu.links {
		out = append(out, l)
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b *Link) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	return out
}

// Close closes every proxy and demultiplexer (and so every connection
// through the network) and waits for their goroutines. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	n.mu.closed = true
	fs := make([]*forwarder, 0, len(n.mu.forwarders))
	for f := range n.mu.forwarders {
		fs = append(fs, f)
	}
	n.mu.Unlock()
	var errs []error
	for _, f := range fs {
		if err := f.close(); err != nil {
			errs = append(errs, fmt.Errorf("wan: close %s: %w", f.addr(), err))
		}
	}
	return errors.Join(errs...)
}

func (n *Network) addForwarder(f *forwarder) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrClosed
	}
	n.mu.forwarders[f] = struct{}{}
	return nil
}

func (n *Network) removeForwarder(f *forwarder) {
	n.mu.Lock()
	delete(n.mu.forwarders, f)
	n.mu.Unlock()
}

// Link is one direction between two sites. Its shaping applies to bytes
// sent from From to To on every connection through the network: to the
// requests of connections From dials To, and to the responses of
// connections To dials From. All methods are safe for concurrent use and
// take effect on traffic already flowing.
type Link struct {
	n        *Network
	from, to string
	rev      *Link
	m        linkMetrics

	mu struct {
		sync.Mutex
		shaper shaper
		cut    bool
		// restored is closed by Restore; non-nil only while cut.
		restored chan struct{}
		// The last cut: bytes in flight across it are delivered only
		// after the restore, as TCP retransmits them.
		cutAt, restoredAt time.Time
		// dialProxies are the proxies DialContext made, by target.
		dialProxies map[string]*Proxy
	}
}

// From is the sending site.
func (l *Link) From() string { return l.from }

// To is the receiving site.
func (l *Link) To() string { return l.to }

// Reverse is the link in the other direction.
func (l *Link) Reverse() *Link { return l.rev }

// String is "from->to".
func (l *Link) String() string { return l.from + "->" + l.to }

// Config returns the link's current shaping.
func (l *Link) Config() LinkConfig {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.shaper.cfg
}

// Set changes the link's shaping. Bytes already inside the link keep the
// schedule they were given; bytes sent from now on get the new one, and
// never overtake earlier bytes of their connection.
func (l *Link) Set(cfg LinkConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("wan: link %s: %w", l, err)
	}
	l.mu.Lock()
	l.mu.shaper.cfg = cfg
	l.publishLocked()
	l.mu.Unlock()
	l.n.log.Info("link set", "link", l.String(), "delay", cfg.Delay, "jitter", cfg.Jitter,
		"bandwidth", cfg.Bandwidth.String(), "loss", cfg.Loss)
	return nil
}

// Cut stops the link passing anything, like a partition: connections stay
// open and see silence; what their peers send is held (up to
// Config.MaxHeld per connection, then senders block) and delivered after
// Restore, as TCP would retransmit it. Cutting a cut link does nothing.
func (l *Link) Cut() {
	l.mu.Lock()
	if l.mu.cut {
		l.mu.Unlock()
		return
	}
	l.mu.cut = true
	l.mu.cutAt = time.Now()
	l.mu.restored = make(chan struct{})
	l.m.cut.Set(1)
	l.mu.Unlock()
	l.n.log.Info("link cut", "link", l.String())
}

// Restore lets a cut link pass again. Bytes held or in flight during the cut
// are sent again from the restore, at the link's rate, and arrive a delay
// later. Restoring a link that is not cut does
// nothing.
func (l *Link) Restore() {
	l.mu.Lock()
	if !l.mu.cut {
		l.mu.Unlock()
		return
	}
	l.mu.cut = false
	l.mu.restoredAt = time.Now()
	close(l.mu.restored)
	l.mu.restored = nil
	l.m.cut.Set(0)
	l.mu.Unlock()
	l.n.log.Info("link restored", "link", l.String())
}

// IsCut reports whether the link is cut.
func (l *Link) IsCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.cut
}

func (l *Link) publishLocked() {
	cfg := l.mu.shaper.cfg
	l.m.delay.Set(cfg.Delay.Seconds())
	l.m.bandwidth.Set(float64(cfg.Bandwidth))
}

// linkState is what a pipe's writer needs to know before delivering.
type linkState struct {
	cut               bool
	restored          <-chan struct{}
	cutAt, restoredAt time.Time
	delay             time.Duration
}

func (l *Link) state() linkState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return linkState{
		cut:        l.mu.cut,
		restored:   l.mu.restored,
		cutAt:      l.mu.cutAt,
		restoredAt: l.mu.restoredAt,
		delay:      l.mu.shaper.cfg.Delay,
	}
}

// schedule books a chunk of n bytes that reached the link at now and
// returns when it was sent (after its turn at the bandwidth limit; done is
// the same on the link's virtual clock), when it arrives, and whether a
// loss was drawn for it. backlogSince is the previous chunk's done if the
// sender has had bytes waiting ever since, else zero (see shaper.admit).
func (l *Link) schedule(now time.Time, n int, backlogSince, prev time.Time) (sent, done, arrive time.Time, lost bool) {
	rtt := l.rev.Config().Delay // read first: never hold two links' locks
	l.mu.Lock()
	defer l.mu.Unlock()
	sent, done = l.mu.shaper.admit(now, n, backlogSince)
	arrive, lost = l.mu.shaper.arrival(sent, n, prev, l.mu.shaper.cfg.Delay+rtt)
	return sent, done, arrive, lost
}

// rebook spends n bytes retransmitted at the restore of a cut on the
// bandwidth limit, so bytes read after them wait their turn.
func (l *Link) rebook(restoredAt time.Time, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.shaper.admit(restoredAt, n, time.Time{})
}

// chunkSize is how much to read at once for this link's current rate.
func (l *Link) chunkSize() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.shaper.cfg.Bandwidth.chunkSize()
}
