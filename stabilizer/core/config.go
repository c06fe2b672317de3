package core

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/stabilizer/stabilizer/frontier"
)

// Defaults for zero Config fields.
const (
	DefaultMaxBatchBytes        = 256 << 10
	DefaultMaxInflightBytes     = 4 << 20
	DefaultMaxBulkInflightBytes = 16 << 20
	DefaultMaxMemoryBytes       = 8 << 20
	DefaultMaxUnapplied         = 4096
	DefaultAckInterval          = 1
	DefaultHeartbeatInterval    = 10
	DefaultFullAckInterval      = 100
	DefaultResendTicks          = 50
	DefaultClockReserve         = int64(100e6) // 100ms in nanoseconds
	// DefaultRelayDelay: 300 ms at the millisecond tick the package
	// documentation suggests.
	DefaultRelayDelay = 300
	// MaxStreamName bounds stream names, which travel in every entry.
	MaxStreamName = 200
)

// Storage reads back what the driver persisted from Ready.Entries. The core
// calls it from Ready when a peer or the local application needs entries that
// are no longer held in memory (after a restart, or after they were trimmed to
// keep memory bounded). It must be deterministic: the same call on the same
// persisted data returns the same entries.
type Storage interface {
	// Entries returns the persisted entries lo, lo+1, … of stream, none above
	// hi, stopping once maxBytes of payload are exceeded but always returning
	// at least entry lo. Entries that were never persisted are an error.
	Entries(stream StreamID, lo, hi uint64, maxBytes int) ([]Entry, error)
}

// Config configures a Core. The zero value of a field means its default.
type Config struct {
	// Site is this site's name; it must be in Schema.Sites. Required.
	Site string
	// Schema lists the sites, groups and custom levels. Required.
	Schema *frontier.Schema
	// Predicates are configured named predicates (name -> source), version 1
	// unless State holds a later version. Built-in names are refused.
	Predicates map[string]string
	// Storage reads persisted entries back. Required.
	Storage Storage
	// Rand is the source of session identifiers. Default: a generator seeded
	// from the site name, which is deterministic; drivers should seed it from
	// real entropy so that sessions of successive runs differ.
	Rand *rand.Rand
	// MaxBatchBytes bounds one Data message. Default 256 KiB.
	MaxBatchBytes int
	// MaxInflightBytes bounds the bytes sent to one destination and not yet
	// acknowledged received by it. Default 4 MiB.
	MaxInflightBytes int
	// BulkStreams names the streams (of every origin) whose messages travel
	// on a lane of their own: a window of MaxBulkInflightBytes, in Data
	// messages marked Bulk (PlaneBulk), so that bulk transfers, file chunks,
	// never queue other streams' messages behind them; and whose entries
	// the driver persists apart, in a bulk store with fsyncs of its own
	// (Ready.BulkEntries, BulkPersisted). Sites must agree.
	BulkStreams []string
	// BulkStripes routes bulk streams through the receivers (see Routes in
	// the package documentation): a bulk stream named here, with stripe
	// index i, goes from its origin to one peer only, the (i mod m)-th of
	// its m peers in Schema order, which relays it to the others as it
	// persists it. Give an origin's stripes of one transfer consecutive
	// indexes, one per peer, and every link into a receiver carries part
	// of it. Ignored with fewer than three sites or without relays
	// (RelayDelay -1). Sites must agree.
	BulkStripes map[string]int
	// MaxBulkInflightBytes bounds the bulk lane's bytes sent to one
	// destination and not yet acknowledged persisted (a site holds bulk
	// entries in memory until its bulk store made them durable, see
	// Ready.BulkEntries). Default 16 MiB, about a round trip of 100 ms at
	// 160 MB/s.
	MaxBulkInflightBytes int
	// MaxMemoryBytes bounds the persisted entries of one stream kept in
	// memory; older ones are read back through Storage. Default 8 MiB.
	MaxMemoryBytes int
	// MaxUnapplied bounds the messages of one stream handed to the
	// application and not yet Applied. Default 4096.
	MaxUnapplied int
	// AckInterval is the least number of ticks between two Acks messages
	// to one peer that carry changed cells of levels above persisted
	// (applied, custom). Changes of received and persisted go in the next
	// Ready, with whatever else changed. Default 1.
	AckInterval int
	// HeartbeatInterval is the number of ticks between clock heartbeats
	// (Acks carrying Clock and Heads) to every peer. Default 10.
	HeartbeatInterval int
	// ClockReserve is how far ahead of a heartbeat's time, in HLC wall
	// nanoseconds, the clock reservation it persists reaches (Ready.Clock):
	// heartbeats below it need no fsync. After a restart the site's clock
	// starts at the reservation, up to ClockReserve ahead of physical time,
	// until physical time catches up. Default 100ms.
	ClockReserve int64
	// FullAckInterval is the number of ticks between Acks carrying the whole
	// row, which repairs any lost delta. Default 100.
	FullAckInterval int
	// LazyFrontiers lets frontier and stable-time advances leave the site
	// without an fsync of their own: a Ready holding only those does not
	// MustSync (the driver still writes them, unsynced; a later sync makes
	// them durable). That takes an fsync off the path from the last ack to
	// a waiter. The price, after a crash (not a clean close): a frontier may
	// come back lower than it was published until the acks return, and a
	// seq whose release was lost may be released again, possibly under a
	// newer predicate version. Default false: every published advance is
	// durable first.
	LazyFrontiers bool
	// ResendTicks is how many ticks a channel may go without progress while
	// data is in flight, or without an answer to Hello, before the core
	// opens a new session. Default 50.
	ResendTicks int
	// JoinPeers makes a site that starts with an empty store wait to hear
	// every peer (their rows and their answers to its Hello) before it
	// appends or sends clock heartbeats (Joining): only then does it know
	// whether its store was wiped while peers held entries of its
	// streams, whose seqs it must not give out again (Lost). Default
	// false: a fresh site appends at once, and a wiped site that does
	// so breaks "a seq names one message".
	JoinPeers bool
	// RelayDelay is how many ticks an origin must have been disconnected
	// from this site before this site relays the origin's streams, from
	// its own log, to connected peers that lack what it persisted of them
	// (see Relay in the package documentation). A holder that is not the
	// preferred relay of a stream waits as long again without the peer
	// making progress. Default 300; -1 never relays.
	RelayDelay int
}

// Validate reports every bad field of c, not only the first.
func (c *Config) Validate() error {
	var errs []error
	if c.Schema == nil {
		errs = append(errs, errors.New("core: config: Schema: missing"))
	} else {
		if err := c.Schema.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("core: config: Schema: %w", err))
		}
		if _, ok := c.Schema.SiteIndex(c.Site); !ok {
			errs = append(errs, fmt.Errorf("core: config: Site: %q is not one of the schema's sites %v", c.Site, c.Schema.Sites))
		}
	}
	if c.Site == "" {
		errs = append(errs, errors.New("core: config: Site: missing"))
	}
	if c.Storage == nil {
		errs = append(errs, errors.New("core: config: Storage: missing"))
	}
	for name, v := range map[string]int{
		"MaxBatchBytes": c.MaxBatchBytes, "MaxInflightBytes": c.MaxInflightBytes,
		"MaxBulkInflightBytes": c.MaxBulkInflightBytes,
		"MaxMemoryBytes":       c.MaxMemoryBytes, "MaxUnapplied": c.MaxUnapplied,
		"AckInterval": c.AckInterval, "HeartbeatInterval": c.HeartbeatInterval,
		"FullAckInterval": c.FullAckInterval, "ResendTicks": c.ResendTicks,
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("core: config: %s: %d is negative", name, v))
		}
	}
	if c.RelayDelay < -1 {
		errs = append(errs, fmt.Errorf("core: config: RelayDelay: %d is below -1", c.RelayDelay))
	}
	if c.ClockReserve < 0 {
		errs = append(errs, fmt.Errorf("core: config: ClockReserve: %d is negative", c.ClockReserve))
	}
	for name := range c.Predicates {
		if _, ok := frontier.Builtins[name]; ok {
			errs = append(errs, fmt.Errorf("core: config: Predicates[%q]: %w", name, ErrBuiltinPredicate))
		}
	}
	// Sort for a deterministic message: map iteration above may reorder.
	sortErrors(errs)
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	def(&c.MaxInflightBytes, DefaultMaxInflightBytes)
	def(&c.MaxBulkInflightBytes, DefaultMaxBulkInflightBytes)
	def(&c.MaxMemoryBytes, DefaultMaxMemoryBytes)
	def(&c.MaxUnapplied, DefaultMaxUnapplied)
	def(&c.AckInterval, DefaultAckInterval)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.FullAckInterval, DefaultFullAckInterval)
	def(&c.ResendTicks, DefaultResendTicks)
	def(&c.RelayDelay, DefaultRelayDelay)
	if c.ClockReserve == 0 {
		c.ClockReserve = DefaultClockReserve
	}
	if c.Rand == nil {
		var seed uint64
		for _, b := range []byte(c.Site) {
			seed = seed*131 + uint64(b)
		}
		c.Rand = rand.New(rand.NewPCG(seed, 0x5ab1e))
	}
	return c
}

// State is what a restarted core resumes from; the driver assembles it from
// what it persisted out of earlier Readies. The zero State is a fresh site.
type State struct {
	// Heads: for every stream in the local log (own and remote), the highest
	// persisted seq (all of 1..Seq are persisted) and that entry's HLC.
	Heads []Position
	// Acks: the latest persisted value of every cell of Ready.Acks.
	Acks []AckCell
	// Applied: the application's own durable position per stream, when it
	// keeps one; delivery resumes after it. A stream without one resumes
	// after its persisted `applied` ack.
	Applied []Position
	// Predicates: the latest PredicateDef of every name from Ready.Predicates.
	Predicates []PredicateDef
	// Frontiers: the latest FrontierAdvance per (stream, predicate) from
	// Ready.Frontiers, as a FrontierState.
	Frontiers []FrontierState
	// StableTimes: the latest per predicate from Ready.StableTimes.
	StableTimes []StableTime
	// Clock: the latest Ready.Clock.
	Clock HLC
	// Truncated: per stream, the highest seq dropped from the log
	// (Ready.Truncations), with its HLC when known.
	Truncated []Position
	// Recovery: the latest Ready.Recovery.
	Recovery Recovery
	// Incarnation: Ready.Incarnation, once stored.
	Incarnation uint64
}

// Recovery is what a site that may have lost its store must remember
// across restarts until it is whole again: that it has not heard every
// peer since it started empty (Core.Joining), and its own streams that
// peers hold beyond its log (Core.Lost).
type Recovery struct {
	Joining bool
	// Held: per own stream and peer (Site), the highest seq the peer
	// holds; Seen: per own stream, the highest this site's own row
	// reached as peers remember it. Both only where above the log's head.
	Held []AckCell
	Seen []Position
	// Peers: the incarnation of each peer that Held speaks of, so that
	// after a restart a peer wiped meanwhile stops counting.
	Peers []PeerIncarnation
	// Void: own streams' abandoned seqs, From..To: they name no message
	// anywhere, so a peer lacking them skips them without a snapshot.
	Void []VoidRange
}

// VoidRange is a range of seqs of one stream that name no message.
type VoidRange struct {
	Stream   StreamID
	From, To uint64
}

// PeerIncarnation is a peer's incarnation as this site last heard it.
type PeerIncarnation struct {
	Site        string
	Incarnation uint64
}
