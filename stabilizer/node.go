package stabilizer

import (
	"cmp"
	"container/list"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// Sentinel errors; returned errors wrap them with the operand named.
var (
	// ErrStopped: the node was closed, or failed and stopped.
	ErrStopped = errors.New("stabilizer: stopped")
	// ErrNotStarted: an operation that needs the running loop before Start.
	ErrNotStarted = errors.New("stabilizer: not started")
	// ErrUnknownPredicate: neither a known name nor a valid predicate.
	ErrUnknownPredicate = core.ErrUnknownPredicate
	// ErrUnknownStream: no such stream at this site.
	ErrUnknownStream = core.ErrUnknownStream
	// ErrBadStreamName: a stream name is empty or too long.
	ErrBadStreamName = core.ErrBadStreamName
	// ErrJoining: a site that started with an empty store has not heard
	// every peer yet (Config.JoinTimeout); appends wait for it.
	ErrJoining = core.ErrJoining
	// ErrLostEntries: this site's store was wiped and peers hold entries
	// of its own stream; appends wait until state transfer brought them
	// back.
	ErrLostEntries = core.ErrLostEntries
)

// The node's defaults for zero fields of Config.Core.
const (
	DefaultMaxBatchBytes    = 1 << 20
	DefaultMaxInflightBytes = 16 << 20
	DefaultMaxMemoryBytes   = 32 << 20
	// DefaultResendAfter is how long a channel may go without progress
	// before it is reopened: several of the longest inter-region round
	// trips, so that an ocean crossing is not mistaken for a lost session.
	DefaultResendAfter = 3 * time.Second
	// DefaultJoinTimeout: a fresh site's first append waits this long at
	// most to hear every peer.
	DefaultJoinTimeout = 30 * time.Second
	// DefaultFullAckEvery is how often the whole ack row is resent to
	// repair lost deltas.
	DefaultFullAckEvery = time.Second
	// DefaultHeartbeatEvery is how often an origin tells every peer its
	// clock and heads, which is what moves stable times while it writes
	// nothing. Each heartbeat advances every receiver's stable times, a
	// write to fsync before it is published: at 10ms that was 200 fsyncs a
	// second per idle site of three.
	DefaultHeartbeatEvery = 50 * time.Millisecond
	// DefaultRelayAfter is how long an origin must have been unreachable
	// before this site relays what it persisted of the origin's streams to
	// connected sites that lack it: longer than a reconnect after a
	// dropped connection takes, short next to an outage.
	DefaultRelayAfter = 300 * time.Millisecond
)

// Config configures a Node. Zero fields take the documented defaults.
type Config struct {
	// Site is this site's name; it must be in Schema.Sites. Required.
	Site string
	// Schema lists every site, the groups and custom levels. Required.
	Schema *frontier.Schema
	// Predicates are configured named predicates (name -> source).
	Predicates map[string]string
	// Dir holds the site's pebble database and, in Dir/bulk, the segment
	// store of its bulk streams. Required. Snapshots served to peers
	// (state transfer) are kept beside it, in Dir + ".snapshots".
	Dir string
	// FS is the filesystem under Dir: every file access of the site's
	// storage, pebble's and the bulk store's, goes through it, so that
	// tests can drop unsynced writes, fail writes and fsyncs, or corrupt
	// files (github.com/cockroachdb/pebble/v2/vfs, vfs/errorfs). Default:
	// the operating system's. A site on another FS should set
	// MinFreeBytes to -1: the disk guard reads the operating system's.
	FS vfs.FS
	// StateTransferRate bounds, in bytes per second, the snapshot data
	// this site sends to one peer (state transfer); 0: only the window
	// (DefaultTransferWindow) and the bulk connection's share of the link
	// bound it.
	StateTransferRate int64
	// JoinTimeout is how long a site that starts with an empty store
	// waits to hear every peer before its first append, so that a site
	// whose store was wiped learns which of its seqs peers hold before it
	// gives out new ones (see core.Config.JoinPeers). Past it, the site
	// appends anyway and logs which peers it did not hear. Default
	// DefaultJoinTimeout; -1 never waits.
	JoinTimeout time.Duration
	// Transport reaches the other sites. Required when there are any.
	Transport Transport
	// Logger; default: a null logger.
	Logger hclog.Logger
	// Registerer for metrics; default: none registered.
	Registerer prometheus.Registerer
	// TickInterval is the core's unit of time: acks of levels above
	// persisted are coalesced for at most one tick (received and persisted
	// acks leave at once), heartbeats and resends count ticks. Default 1ms.
	TickInterval time.Duration
	// Core tunes the protocol core (batch sizes, in-flight bytes, tick
	// counts); Site, Schema, Predicates, Storage and Rand are set by the
	// node. Where the core's own defaults suit a simulation more than
	// disks and networks whose round trips take an fsync, the node sets
	// zero fields to its own defaults: MaxBatchBytes 1 MiB,
	// MaxInflightBytes 16 MiB, MaxMemoryBytes 32 MiB, and the tick counts
	// ResendTicks, FullAckInterval, HeartbeatInterval and RelayDelay from
	// DefaultResendAfter, DefaultFullAckEvery, DefaultHeartbeatEvery and
	// DefaultRelayAfter at TickInterval (RelayDelay -1 never relays).
	Core core.Config
	// Now is the physical clock for the HLC. Default time.Now.
	Now func() time.Time
	// SyncDelay is how long writes that nobody waits for (applied acks,
	// stable times, clock heartbeats, frontiers no write waits on) may
	// wait for a later fsync to carry them before they get one of their
	// own; what they expose leaves the site only once they are durable.
	// Writes that something waits for (entries, frontiers of waiting
	// writes) are fsynced at once. Default DefaultSyncDelay (10ms).
	SyncDelay time.Duration
	// MaxInlinePredicates bounds the inline predicates (sources sent in
	// place of a name) in use at once: past it, calls with a new one fail
	// with ErrTooManyPredicates. Every one the core holds is evaluated on
	// each stream of the names it was used on (or every stream, see Hold)
	// whose acks change. Default 1024.
	MaxInlinePredicates int
	// IdleInlinePredicates is how many inline predicates no call uses any
	// more stay in the core, the most recently used, so that the next call
	// with the same source costs no definition. Default 64; -1 keeps none.
	IdleInlinePredicates int
	// MinFreeBytes is the free space under Dir (available to unprivileged
	// users) below which the site is full: it refuses appends with
	// ErrDiskFull and drops peers' data until space is back (disk.go).
	// Default DefaultMinFreeBytes (256 MiB), at most 5% of the
	// filesystem's size; -1 turns the guard off.
	MinFreeBytes int64
	// statfs replaces the filesystem's free space in tests (export_test.go).
	statfs statfsFunc
}

// Validate reports every bad field.
func (c *Config) Validate() error {
	var errs []error
	if c.Site == "" {
		errs = append(errs, errors.New("stabilizer: config: Site: missing"))
	}
	if c.Schema == nil {
		errs = append(errs, errors.New("stabilizer: config: Schema: missing"))
	} else if err := c.Schema.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("stabilizer: config: Schema: %w", err))
	} else if _, ok := c.Schema.SiteIndex(c.Site); !ok && c.Site != "" {
		errs = append(errs, fmt.Errorf("stabilizer: config: Site: %q is not one of %v", c.Site, c.Schema.Sites))
	} else if len(c.Schema.Sites) > 1 && c.Transport == nil {
		errs = append(errs, errors.New("stabilizer: config: Transport: missing (needed to reach the other sites)"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("stabilizer: config: Dir: missing"))
	}
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("stabilizer: config: TickInterval: %v is negative", c.TickInterval))
	}
	if c.SyncDelay < 0 {
		errs = append(errs, fmt.Errorf("stabilizer: config: SyncDelay: %v is negative", c.SyncDelay))
	}
	if c.MaxInlinePredicates < 0 {
		errs = append(errs, fmt.Errorf("stabilizer: config: MaxInlinePredicates: %d is negative", c.MaxInlinePredicates))
	}
	if c.IdleInlinePredicates < -1 {
		errs = append(errs, fmt.Errorf("stabilizer: config: IdleInlinePredicates: %d is below -1", c.IdleInlinePredicates))
	}
	if c.MinFreeBytes < -1 {
		errs = append(errs, fmt.Errorf("stabilizer: config: MinFreeBytes: %d is below -1 (-1 turns the disk guard off)", c.MinFreeBytes))
	}
	return errors.Join(errs...)
}

// Node is one site: the protocol core driven by one goroutine that persists
// to pebble, sends through the Transport, delivers to applications and
// publishes frontiers. See the package documentation.
type Node struct {
	cfg   Config
	log   hclog.Logger
	store *storage.Store
	// bulk persists the bulk streams' entries apart from store (bulk.go);
	// bulkNames are their names, fixed at Start.
	bulk      bulkWriter
	bulkNames []string
	core      *core.Core
	m         *metrics
	disk      *diskGuard

	inputs chan func()
	ctrl   chan func() // control-plane input, taken before data
	// bulkIn is the bulk plane's input, taken after data and control: a
	// KV write's frame never waits in line behind file chunks. bulkOut
	// carries the bulk messages of released Readies to sendBulk, so that
	// encoding megabytes of chunks, or waiting for room in the bulk
	// lane's queue, never holds up the release of what comes after.
	bulkIn  chan func()
	bulkOut chan *core.Message
	// The loop hands each Ready to the writer on toWrite; the writer
	// applies it to the store (ordered, not yet durable) and says so on
	// applied, and the loop calls Advance, so the next Ready can be built
	// and applied while this one's fsync runs. The completer releases each
	// Ready (messages, deliveries, frontiers) once it is durable, in order,
	// and hands it back on completed. hurry asks the completer to end a
	// wait for a later fsync when the loop has work but no room; recheck,
	// to look again whether a write now waits for what it holds back.
	toWrite   chan *core.Ready
	applied   chan applied
	toRelease chan *job
	completed chan *job
	hurry     chan struct{}
	recheck   chan struct{}
	// Only the loop touches these: a Ready is with the writer; Readies
	// taken and not yet completed, and how many of those are fsyncing.
	applying    bool
	outstanding int
	syncing     int
	ctx         context.Context // canceled by Close, for the node's own calls
	cancel      context.CancelFunc
	stop        chan struct{}
	done        chan struct{}
	closed      chan struct{} // closed once Close has closed everything

	// taken counts the Readies the loop handed to the writer (loop only);
	// released, those the completer released, in the same order
	// (completer only): the k-th taken is the k-th released.
	taken    uint64
	released uint64

	// State transfer (transfer*.go): snapshots served, requests in
	// flight, transfers received, and which streams' deliveries are held.
	src        sources
	recv       receivers
	xfers      transferStats
	lastReport time.Time
	gate       gate
	// rtt: the peers' round trips (rtt.go).
	rtt rttTable
	// joinBy: when a joining site gives up waiting for every peer (loop).
	joinBy time.Time
	// given: per striped transfer, the bytes appended to each stripe
	// (loop; stripes.go).
	given map[string][]int64

	mu struct {
		sync.Mutex
		started bool
		closed  bool
		err     error // why the loop stopped, if it failed
		// closeErr is what Close returned, for the calls that waited.
		closeErr error
		apps     map[string]*appQueue
		bulk     []string // streams registered with HandleBulk
		// stripes: each stripe's index (HandleStriped); striped: each
		// striped transfer's stripes.
		stripes map[string]int
		striped map[string][]string
		// namespaces are the names Namespace handed out.
		namespaces map[string]bool
		// transfer: per stream name, how its application's state is
		// transferred to a site that lacks the log (EnableStateTransfer).
		transfer map[string]*transfer
		// inline are the inline predicates the core holds (inline.go):
		// inUse of them in use, the others idle, most recent first.
		inline map[string]*inline
		idle   *list.List
		inUse  int
		// defs are the core's run-time predicates, for Predicates.
		defs []PredicateDef
		// channels are the application channels, by tag (channels.go).
		channels map[byte]ChannelHandler
		planes   map[string]uint8
	}
	wg  sync.WaitGroup
	pub publisher
	// legacy holds the keys of records in an earlier release's format that
	// restoreState found, for Start to rewrite.
	legacy [][]byte
}

// New opens the site's storage. Register applications with Handle, then
// call Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SyncDelay == 0 {
		cfg.SyncDelay = DefaultSyncDelay
	}
	if cfg.MaxInlinePredicates == 0 {
		cfg.MaxInlinePredicates = DefaultMaxInlinePredicates
	}
	if cfg.IdleInlinePredicates == 0 {
		cfg.IdleInlinePredicates = DefaultIdleInlinePredicates
	}
	m, err := newMetrics(cfg.Registerer, cfg.Site)
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(storage.Config{Dir: cfg.Dir, FS: cfg.FS, Logger: cfg.Logger.Named("storage"), Registerer: cfg.Registerer})
	if err != nil {
		return nil, fmt.Errorf("stabilizer: %w", err)
	}
	seg, err := openBulk(&cfg)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger,
		store:  st,
		m:      m,
		inputs: make(chan func(), 4096),
		ctrl:   make(chan func(), 1024),
		bulkIn: make(chan func(), 1024),
		// The core bounds the bulk bytes in flight per peer; this bounds
		// the messages (each a batch of entries) waiting to be encoded.
		bulkOut: make(chan *core.Message, 4096),
		// Buffered so that no stage ever blocks on the next: one Ready is
		// applied at a time and at most maxOutstanding are out.
		toWrite:   make(chan *core.Ready, 1),
		applied:   make(chan applied, 1),
		toRelease: make(chan *job, maxOutstanding),
		completed: make(chan *job, maxOutstanding),
		hurry:     make(chan struct{}, 1),
		recheck:   make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	n.bulk.seg = seg
	n.bulk.wake = make(chan struct{}, 1)
	n.bulk.room = make(chan struct{}, 1)
	n.disk = newDiskGuard(&cfg, m)
	n.disk.check()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.mu.apps = map[string]*appQueue{}
	n.mu.namespaces = map[string]bool{}
	n.mu.transfer = map[string]*transfer{}
	n.mu.inline = map[string]*inline{}
	n.mu.idle = list.New()
	n.mu.planes = map[string]uint8{}
	n.mu.stripes = map[string]int{}
	n.mu.striped = map[string][]string{}
	n.pub.init()
	n.rtt.init()
	return n, nil
}

// Site returns this site's name.
func (n *Node) Site() string { return n.cfg.Site }

// Schema returns the sites, groups and levels predicates compile against.
func (n *Node) Schema() *frontier.Schema { return n.cfg.Schema }

// Start restores the core from storage and starts the loop and the
// transport.
func (n *Node) Start() error {
	n.mu.Lock()
	if n.mu.started || n.mu.closed {
		n.mu.Unlock()
		return fmt.Errorf("stabilizer: start: %w", ErrStopped)
	}
	n.mu.started = true
	n.bulkNames = append(slices.Clone(n.cfg.Core.BulkStreams), n.mu.bulk...)
	stripes := maps.Clone(n.cfg.Core.BulkStripes)
	if len(n.mu.stripes) > 0 {
		if stripes == nil {
			stripes = map[string]int{}
		}
		maps.Copy(stripes, n.mu.stripes)
	}
	n.mu.Unlock()
	if err := n.migrateBulk(n.ctx); err != nil {
		return err
	}
	state, err := n.restoreState()
	if err != nil {
		return err
	}
	ccfg := n.cfg.Core
	ccfg.Site, ccfg.Schema, ccfg.Predicates = n.cfg.Site, n.cfg.Schema, n.cfg.Predicates
	ccfg.Storage = logReader{n}
	ccfg.BulkStreams = n.bulkNames
	ccfg.BulkStripes = stripes
	// A round trip to a peer includes its fsync, often milliseconds: the
	// window must cover that at full speed, and entries queued behind it
	// should stay in memory rather than be read back from pebble.
	if ccfg.MaxBatchBytes == 0 {
		ccfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if ccfg.MaxInflightBytes == 0 {
		ccfg.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if ccfg.MaxMemoryBytes == 0 {
		ccfg.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	// The core counts ticks; its defaults assume coarse ones. At 1 ms
	// ticks they would reopen a channel before a 150 ms round trip can
	// answer, so the node derives them from durations.
	if ccfg.ResendTicks == 0 {
		ccfg.ResendTicks = int(DefaultResendAfter / n.cfg.TickInterval)
	}
	if ccfg.HeartbeatInterval == 0 {
		ccfg.HeartbeatInterval = max(1, int(DefaultHeartbeatEvery/n.cfg.TickInterval))
	}
	if ccfg.FullAckInterval == 0 {
		ccfg.FullAckInterval = max(1, int(DefaultFullAckEvery/n.cfg.TickInterval))
	}
	if ccfg.RelayDelay == 0 {
		ccfg.RelayDelay = max(1, int(DefaultRelayAfter/n.cfg.TickInterval))
	}
	if n.cfg.JoinTimeout >= 0 {
		ccfg.JoinPeers = true
		n.joinBy = n.cfg.Now().Add(cmp.Or(n.cfg.JoinTimeout, DefaultJoinTimeout))
	}
	var seed [16]byte
	_, _ = crand.Read(seed[:])
	ccfg.Rand = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	c, err := core.New(ccfg, state)
	if err != nil {
		return fmt.Errorf("stabilizer: %w", err)
	}
	// The clock's physical part comes from ticks: without one now, writes
	// appended before the loop's first tick would be stamped near time
	// zero and lose every last-writer-wins contest.
	c.Tick(n.cfg.Now().UnixNano())
	n.core = c
	n.setDefs(c.Predicates())
	for _, f := range state.Frontiers {
		n.pub.seed(f)
	}
	for _, s := range state.StableTimes {
		n.pub.setStable(s)
	}
	n.startApps()
	if len(n.cfg.Schema.Sites) > 1 {
		n.wg.Add(2)
		go n.runTransfers()
		go n.runPings()
	}
	n.wg.Add(5)
	go n.loop()
	go n.writer()
	go n.completer()
	go n.runBulk()
	go n.sendBulk()
	n.startDiskGuard()
	if n.cfg.Transport != nil {
		if err := n.cfg.Transport.Start(handler{n}); err != nil {
			n.Close()
			return fmt.Errorf("stabilizer: start transport: %w", err)
		}
	}
	n.log.Info("site started", "site", n.cfg.Site, "streams", len(state.Heads))
	return nil
}

// Close stops the transport, the loop and the applications, and closes
// storage. It is idempotent: every call returns only once the node is
// closed (storage too), with the error that stopped the node, if one did,
// also when another Close (such as the one a storage failure starts) is
// already running.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		<-n.closed
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.mu.closeErr
	}
	n.mu.closed = true
	started := n.mu.started
	n.mu.Unlock()
	defer close(n.closed)
	var errs []error
	if started && n.cfg.Transport != nil {
		errs = append(errs, n.cfg.Transport.Close())
	}
	close(n.stop)
	n.cancel()
	n.wg.Wait()
	n.pub.close()
	errs = append(errs, n.bulk.seg.Close(), n.store.Close())
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.closeErr = errors.Join(append([]error{n.mu.err}, errs...)...)
	return n.mu.closeErr
}

// fail stops the node after an error it cannot continue past (storage).
func (n *Node) fail(err error) {
	n.log.Error("site stopping", "error", err)
	n.mu.Lock()
	if n.mu.err == nil {
		n.mu.err = err
	}
	n.mu.Unlock()
	go n.Close()
}

// do runs f on the loop goroutine, where the core may be touched, and waits
// for it.
func (n *Node) do(ctx context.Context, f func()) error {
	doneCh := make(chan struct{})
	if err := n.submit(ctx, func() { f(); close(doneCh) }); err != nil {
		return err
	}
	select {
	case <-doneCh:
		return nil
	case <-n.done:
		return ErrStopped
	}
}

func (n *Node) submit(ctx context.Context, f func()) error {
	return n.submitTo(ctx, n.inputs, f)
}

func (n *Node) submitTo(ctx context.Context, ch chan func(), f func()) error {
	n.mu.Lock()
	started, closed := n.mu.started, n.mu.closed
	n.mu.Unlock()
	if closed {
		return ErrStopped
	}
	if !started || n.core == nil {
		return ErrNotStarted
	}
	select {
	case ch <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
}

// loop is the one goroutine that touches the core. It never waits for the
// disk: Readies are written by the writer goroutine and released by the
// completer while the loop keeps feeding the core inputs, which go into the
// next Ready.
func (n *Node) loop() {
	defer n.wg.Done()
	defer close(n.done)
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			now := n.cfg.Now()
			n.core.Tick(now.UnixNano())
			n.checkJoin(now)
		case a := <-n.applied:
			if !n.appliedReady(a) {
				return
			}
		case j := <-n.completed:
			n.completedReady(j)
		case f := <-n.ctrl:
			f()
		case f := <-n.inputs:
			f()
		case f := <-n.bulkIn:
			f()
		}
		n.drain()
		n.nextReady()
	}
}

// drain runs what else is waiting, control input first and bulk input
// last, so that everything that arrived together goes into one Ready (one
// fsync).
func (n *Node) drain() {
	for range 4096 {
		f := n.waiting()
		if f == nil {
			return
		}
		f()
	}
}

// waiting takes the first input that waits, looking at control, then data,
// then bulk; nil when none does.
func (n *Node) waiting() func() {
	for _, ch := range [...]chan func(){n.ctrl, n.inputs, n.bulkIn} {
		select {
		case f := <-ch:
			return f
		default:
		}
	}
	return nil
}

// nextReady hands the core's next Ready to the writer unless one is being
// applied or too many are out: maxSyncing waiting for their own fsync, or
// maxOutstanding in all (the rest wait for a later fsync to carry them).
func (n *Node) nextReady() {
	if n.applying || n.syncing >= maxSyncing || !n.core.HasReady() {
		return
	}
	if n.outstanding >= maxOutstanding {
		select {
		case n.hurry <- struct{}{}:
		default:
		}
		return
	}
	rd := n.core.Ready()
	if rd.Empty() {
		// Nothing to write or release: no round trip through the writer
		// and the completer.
		n.core.Advance()
		return
	}
	n.applying = true
	n.outstanding++
	n.taken++
	n.toWrite <- &rd // never blocks: one Ready is applied at a time
}

// appliedReady advances the core once the writer applied its Ready: the
// Ready's writes are in the store, ordered before everything later, and the
// completer releases nothing of it before they are durable.
func (n *Node) appliedReady(a applied) bool {
	n.applying = false
	if a.err != nil {
		n.fail(fmt.Errorf("stabilizer: persist: %w", a.err))
		return false
	}
	if a.sync {
		n.syncing++
	}
	n.core.Advance()
	return true
}

// completedReady acks what no application handles of a released Ready.
func (n *Node) completedReady(j *job) {
	rd := j.rd
	n.outstanding--
	if j.sync {
		n.syncing--
	}
	n.ackUnhandled(rd.Deliver)
	n.m.observeReady(rd)
	for _, err := range rd.Errors {
		n.log.Warn("core", "error", err)
	}
}
