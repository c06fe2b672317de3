package lin

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Defaults for zero Config fields, sized for sites 100–300 ms apart: a
// heartbeat every 200 ms keeps followers quiet, and an election starts only
// after 2–4 s without one (raft randomizes the timeout in [E, 2E)), so one
// slow round trip or a lost heartbeat does not depose a leader.
const (
	DefaultNamespace       = "lin"
	DefaultTickInterval    = 100 * time.Millisecond
	DefaultHeartbeatTicks  = 2
	DefaultElectionTicks   = 20
	DefaultSnapshotEntries = 10000
	DefaultCatchUpEntries  = 1000
	DefaultMaxLeaseTTL     = 10 * time.Minute
	DefaultMaxValueBytes   = 1 << 20
	DefaultMaxKeyBytes     = 4096
	DefaultMaxInflightMsgs = 256
	DefaultMaxSizePerMsg   = 1 << 20
)

// Transport carries raft messages to the other voters. Send must not block
// for long (queue and return); it may drop a message, which raft recovers
// from by resending. The owner delivers what arrives from a peer with
// Node.Step.
type Transport interface {
	Send(to string, msg []byte) error
}

// Clock is the node's monotonic clock: lease deadlines are measured with
// it. Only differences of its readings matter, never their absolute value.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Config configures a Node. The zero value of every field except Site,
// Voters, Store and Transport means the documented default.
type Config struct {
	// Site is this site's name; it must be one of Voters. Required.
	Site string
	// Voters are the sites of the raft group (3 or 5 for a WAN
	// deployment). Every site must be configured with the same set; it
	// cannot change once the group has started. Required.
	Voters []string
	// Preferred is the site that should lead while it is healthy (reachable
	// and caught up): the leader hands leadership to it. Default: none.
	Preferred string
	// Namespace is the site's key space for the raft log, hard state and
	// snapshots (stabilizer.Node.Namespace; kv's sites name it
	// DefaultNamespace). Required. The node does not close it.
	Namespace *stabilizer.Namespace
	// Transport reaches the other voters. Required.
	Transport Transport
	// TickInterval is raft's unit of time. Default 100 ms.
	TickInterval time.Duration
	// HeartbeatTicks is the leader's heartbeat interval in ticks. Default 2.
	HeartbeatTicks int
	// ElectionTicks is the election timeout in ticks; it must exceed
	// HeartbeatTicks. Default 20.
	ElectionTicks int
	// SnapshotEntries is how many applied entries trigger a snapshot of
	// the state machine and the compaction of the log, provided their
	// commands also add up to the size of the last snapshot (so that a
	// large state is not rewritten every few thousand small writes).
	// Default 10000.
	SnapshotEntries uint64
	// CatchUpEntries is how many entries before a snapshot stay in memory
	// so that a follower slightly behind catches up without a snapshot.
	// Default 1000.
	CatchUpEntries uint64
	// MaxLeaseTTL caps the TTL of a lease. Default 10 min.
	MaxLeaseTTL time.Duration
	// MaxValueBytes caps a value's size. Default 1 MiB.
	MaxValueBytes int
	// Clock measures lease deadlines. Default: the system's monotonic clock.
	Clock Clock
	// Logger receives the node's and raft's logs. Default: none.
	Logger hclog.Logger
}

// Validate reports every bad field of c, not only the first.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("lin: config: "+format, args...))
	}
	if c.Site == "" {
		bad("Site: missing")
	}
	if len(c.Voters) == 0 {
		bad("Voters: missing")
	}
	seen := map[string]bool{}
	for _, v := range c.Voters {
		if v == "" {
			bad("Voters: empty site name in %q", c.Voters)
		} else if seen[v] {
			bad("Voters: %q listed twice", v)
		}
		seen[v] = true
	}
	if c.Site != "" && len(c.Voters) > 0 && !slices.Contains(c.Voters, c.Site) {
		bad("Site: %q is not one of Voters %q", c.Site, c.Voters)
	}
	if c.Preferred != "" && !slices.Contains(c.Voters, c.Preferred) {
		bad("Preferred: %q is not one of Voters %q", c.Preferred, c.Voters)
	}
	if c.Namespace == nil {
		bad("Namespace: missing")
	}
	if c.Transport == nil {
		bad("Transport: missing")
	}
	if c.TickInterval < 0 {
		bad("TickInterval: %v is negative", c.TickInterval)
	}
	if c.HeartbeatTicks < 0 {
		bad("HeartbeatTicks: %d is negative", c.HeartbeatTicks)
	}
	if c.ElectionTicks < 0 {
		bad("ElectionTicks: %d is negative", c.ElectionTicks)
	}
	hb, el := c.HeartbeatTicks, c.ElectionTicks
	if hb == 0 {
		hb = DefaultHeartbeatTicks
	}
	if el == 0 {
		el = DefaultElectionTicks
	}
	if el <= hb {
		bad("ElectionTicks: %d must exceed HeartbeatTicks %d", el, hb)
	}
	if c.MaxLeaseTTL < 0 {
		bad("MaxLeaseTTL: %v is negative", c.MaxLeaseTTL)
	}
	if c.MaxValueBytes < 0 {
		bad("MaxValueBytes: %d is negative", c.MaxValueBytes)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = DefaultCatchUpEntries
	}
	if c.MaxLeaseTTL == 0 {
		c.MaxLeaseTTL = DefaultMaxLeaseTTL
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}
