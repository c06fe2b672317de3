package wan

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
)

// DemuxConfig says where a Demux listens, where it forwards and how it
// tells the sites its connections come from apart.
type DemuxConfig struct {
	// Listen is the address to accept connections on. Default: the
	// network's Config.ListenHost at a free port (see Demux.Addr).
	Listen string
	// To is the site the connections go to. Required.
	To string
	// Target is the address of To that connections are forwarded to.
	// Required.
	Target string
	// Sources maps the IP address a connection comes from (its remote
	// address without the port, e.g. "10.77.2.2") to the site it comes
	// from. Required; no source may be To itself, whose connections cross
	// no link.
	Sources map[string]string
}

// Validate reports every bad field.
func (c DemuxConfig) Validate() error {
	var errs []error
	if c.To == "" {
		errs = append(errs, errors.New("wan: demux: To: missing"))
	}
	if c.Target == "" {
		errs = append(errs, errors.New("wan: demux: Target: missing"))
	}
	if len(c.Sources) == 0 {
		errs = append(errs, errors.New("wan: demux: Sources: missing"))
	}
	for _, src := range slices.Sorted(maps.Keys(c.Sources)) {
		site := c.Sources[src]
		if _, err := netip.ParseAddr(src); err != nil {
			errs = append(errs, fmt.Errorf("wan: demux: Sources[%q]: not an IP address", src))
		}
		switch {
		case site == "":
			errs = append(errs, fmt.Errorf("wan: demux: Sources[%q]: empty site name", src))
		case site == c.To:
			errs = append(errs, fmt.Errorf("wan: demux: Sources[%q]: %q is To, which crosses no link to itself", src, site))
		}
	}
	return errors.Join(errs...)
}

// Demux accepts connections for one site from several on one address, and
// forwards each to its target through the link from the site it comes
// from, which it tells by the connection's source address. The bytes of a
// connection from site S travel on the S->To link, its replies on the
// reverse, exactly as through S's Proxy to the target.
//
// It is for programs that cannot be given a different address per peer:
// every member of an etcd cluster dials the one peer URL another member
// advertises, so a Proxy per link cannot know which link a connection
// belongs to. With each member in its own network namespace (so its
// connections come from an address of its own), a Demux on the advertised
// URL can.
//
// Like Link.DialContext, every connection first costs its link's round
// trip (the TCP handshake), waiting while either direction is cut: the
// client's kernel accepts it at once, but its bytes enter the link only
// after that. A connection from an address that is not in Sources is reset
// at once.
type Demux struct {
	cfg   DemuxConfig
	links map[netip.Addr]*Link
	fw    *forwarder
}

// Demux starts a demultiplexer. Every site of cfg.Sources and cfg.To must
// be in the network's topology, if it has one. Close it when done, or close
// the Network.
func (n *Network) Demux(cfg DemuxConfig) (*Demux, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Demux{cfg: cfg, links: make(map[netip.Addr]*Link, len(cfg.Sources))}
	var errs []error
	for _, src := range slices.Sorted(maps.Keys(cfg.Sources)) {
		l, err := n.Link(cfg.Sources[src], cfg.To)
		if err != nil {
			errs = append(errs, fmt.Errorf("wan: demux Sources[%q]: %w", src, err))
			continue
		}
		d.links[netip.MustParseAddr(src).Unmap()] = l
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if d.cfg.Listen == "" {
		d.cfg.Listen = net.JoinHostPort(n.cfg.ListenHost, "0")
	}
	fw, err := n.startForwarder(forwarderConfig{
		listen:    d.cfg.Listen,
		target:    cfg.Target,
		log:       n.log.With("demux", cfg.To, "target", cfg.Target),
		route:     func(src netip.Addr) *Link { return d.links[src] },
		handshake: true,
	})
	if err != nil {
		return nil, fmt.Errorf("wan: demux to %s at %s: %w", cfg.Target, d.cfg.Listen, err)
	}
	d.fw = fw
	return d, nil
}

// Addr is the address the demultiplexer accepts on.
func (d *Demux) Addr() string { return d.fw.addr() }

// Target is the address connections are forwarded to.
func (d *Demux) Target() string { return d.cfg.Target }

// To is the site connections go to.
func (d *Demux) To() string { return d.cfg.To }

// Close stops accepting, resets every connection through the
// demultiplexer and waits for its goroutines. It is idempotent.
func (d *Demux) Close() error {
	if err := d.fw.close(); err != nil {
		return fmt.Errorf("wan: close demux %s: %w", d.Addr(), err)
	}
	return nil
}
