package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Plane is one of the independent channels between sites. Each plane of
// each peer has its own gRPC connection, so control frames never queue
// behind data frames, nor data frames behind bulk ones.
type Plane uint8

const (
	// Data carries stream messages.
	Data Plane = iota
	// Control carries acknowledgements and other small, urgent frames.
	Control
	// Bulk carries bulk stream messages (file chunks). It is dialed at the
	// Data address, on a connection of its own, with a queue of
	// DataQueueBytes.
	Bulk
)

// Planes lists every plane.
var Planes = [...]Plane{Data, Control, Bulk}

func (p Plane) String() string {
	switch p {
	case Data:
		return "data"
	case Control:
		return "control"
	case Bulk:
		return "bulk"
	}
	return fmt.Sprintf("plane(%d)", uint8(p))
}

// Sentinel errors; match with errors.Is.
var (
	// ErrUnknownPeer: the named peer is not in the configuration (locally),
	// or the remote site does not know us (returned through Handler.Down).
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrProtocolVersion: the peer speaks another protocol version.
	ErrProtocolVersion = errors.New("transport: protocol version mismatch")
	// ErrWrongCluster: the peer belongs to another cluster.
	ErrWrongCluster = errors.New("transport: wrong cluster")
	// ErrWrongSite: the address reached a site other than the one dialed.
	ErrWrongSite = errors.New("transport: wrong site")
	// ErrUnauthenticated: with TLS, the peer's certificate does not name
	// the site it claims to be.
	ErrUnauthenticated = errors.New("transport: peer not authenticated")
	// ErrHandshake: the peer rejected or garbled the handshake otherwise.
	ErrHandshake = errors.New("transport: handshake failed")
	// ErrNotConnected: no session to the peer on that plane; the frame was
	// not queued.
	ErrNotConnected = errors.New("transport: not connected")
	// ErrQueueFull: the non-blocking send found the queue full.
	ErrQueueFull = errors.New("transport: send queue full")
	// ErrFrameTooLarge: the frame exceeds Config.MaxFrameSize.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrClosed: the transport is closed (or not started).
	ErrClosed = errors.New("transport: closed")
)

// Defaults of zero Config fields.
const (
	DefaultMaxFrameSize      = 16 << 20
	DefaultDataQueueBytes    = 32 << 20
	DefaultControlQueueBytes = 1 << 20
	DefaultBatchBytes        = 1 << 20
	DefaultBackoffMin        = 50 * time.Millisecond
	DefaultBackoffMax        = 5 * time.Second
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultKeepaliveTime     = 10 * time.Second
)

// PeerAddr is where a peer listens: one address per plane. An empty
// Control means the peer serves both planes on Data's address (each plane
// still gets its own connection).
type PeerAddr struct {
	Data, Control string
}

// Config configures New. Zero fields mean the documented defaults.
type Config struct {
	// Cluster names the cluster; peers of another cluster are rejected.
	// Required.
	Cluster string
	// Site is the local site's name. Required.
	Site string
	// Peers maps every other site's name to its addresses. An entry for
	// Site itself is ignored, so one peer list can serve every site.
	Peers map[string]PeerAddr
	// Listeners are the local listeners to serve (for example one for data
	// and one for control); Close closes them. At least one is required.
	Listeners []net.Listener
	// Dialer opens connections to peer addresses; the emulated WAN can be
	// put here. Default: TCP.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// ClientCredentials and ServerCredentials secure the connections
	// (mutual TLS between sites). Both nil requires Insecure. Certificates
	// name their site (a DNS SAN equal to the site name): a client checks
	// that the server is the site it dialed, whatever the address, and when
	// the server sees a client certificate it accepts the handshake only if
	// the certificate names the site the handshake claims.
	ClientCredentials credentials.TransportCredentials
	ServerCredentials credentials.TransportCredentials
	// Insecure allows plaintext connections when no credentials are set.
	Insecure bool
	// Logger receives the transport's logs. Default: none. Pass a Named
	// logger.
	Logger hclog.Logger
	// Registerer receives the metrics (stabilizer_transport_*). Default:
	// not registered.
	Registerer prometheus.Registerer
	// MaxFrameSize is the largest frame. Default 16 MiB.
	MaxFrameSize int
	// DataQueueBytes and ControlQueueBytes bound each peer's unsent frames
	// per plane. Default 32 MiB and 1 MiB. A frame larger than the bound is
	// still accepted into an empty queue.
	DataQueueBytes, ControlQueueBytes int
	// BatchBytes bounds how many bytes of queued frames are sent in one gRPC
	// message. Default 1 MiB.
	BatchBytes int
	// BackoffMin and BackoffMax bound the delay between reconnection
	// attempts, which doubles from BackoffMin up to BackoffMax, with jitter.
	// Default 50 ms and 5 s.
	BackoffMin, BackoffMax time.Duration
	// HandshakeTimeout bounds connecting plus the handshake. Default 10 s.
	HandshakeTimeout time.Duration
	// KeepaliveTime is the idle time after which a connection is probed, so
	// a silently dead peer is noticed. Default 10 s.
	KeepaliveTime time.Duration
	// DialOptions and ServerOptions are appended to the transport's own.
	DialOptions   []grpc.DialOption
	ServerOptions []grpc.ServerOption

	// protocolVersion overrides ProtocolVersion in tests.
	protocolVersion uint16
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("transport: config: "+format, args...))
	}
	if c.Cluster == "" {
		bad("Cluster: missing")
	}
	if c.Site == "" {
		bad("Site: missing")
	}
	names := make([]string, 0, len(c.Peers))
	for name := range c.Peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := c.Peers[name]
		if name == "" {
			bad("Peers: a site with an empty name")
		}
		if name != c.Site && a.Data == "" {
			bad("Peers[%q].Data: missing", name)
		}
	}
	for _, f := range []struct{ name, v string }{{"Cluster", c.Cluster}, {"Site", c.Site}} {
		if len(f.v) > maxNameLen {
			bad("%s: %.20q… is %d bytes, longer than %d", f.name, f.v, len(f.v), maxNameLen)
		}
	}
	if len(c.Listeners) == 0 {
		bad("Listeners: missing (at least one is needed)")
	}
	for i, l := range c.Listeners {
		if l == nil {
			bad("Listeners[%d]: nil", i)
		}
	}
	if c.ClientCredentials == nil && c.ServerCredentials == nil && !c.Insecure {
		bad("ClientCredentials, ServerCredentials: missing (set both, or Insecure for plaintext)")
	}
	if (c.ClientCredentials == nil) != (c.ServerCredentials == nil) {
		bad("ClientCredentials, ServerCredentials: only one is set (set both)")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxFrameSize", int64(c.MaxFrameSize)},
		{"DataQueueBytes", int64(c.DataQueueBytes)},
		{"ControlQueueBytes", int64(c.ControlQueueBytes)},
		{"BatchBytes", int64(c.BatchBytes)},
		{"BackoffMin", int64(c.BackoffMin)},
		{"BackoffMax", int64(c.BackoffMax)},
		{"HandshakeTimeout", int64(c.HandshakeTimeout)},
		{"KeepaliveTime", int64(c.KeepaliveTime)},
	} {
		if f.v < 0 {
			bad("%s: %d is negative", f.name, f.v)
		}
	}
	if c.MaxFrameSize > 1<<30 {
		bad("MaxFrameSize: %d is above 1 GiB", c.MaxFrameSize)
	}
	if c.BackoffMin > 0 && c.BackoffMax > 0 && c.BackoffMin > c.BackoffMax {
		bad("BackoffMin: %v is above BackoffMax %v", c.BackoffMin, c.BackoffMax)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Dialer == nil {
		var d net.Dialer
		c.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxFrameSize, DefaultMaxFrameSize)
	def(&c.DataQueueBytes, DefaultDataQueueBytes)
	def(&c.ControlQueueBytes, DefaultControlQueueBytes)
	def(&c.BatchBytes, DefaultBatchBytes)
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defd(&c.BackoffMin, DefaultBackoffMin)
	defd(&c.BackoffMax, DefaultBackoffMax)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	defd(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	defd(&c.KeepaliveTime, DefaultKeepaliveTime)
	if c.protocolVersion == 0 {
		c.protocolVersion = ProtocolVersion
	}
	return c
}
