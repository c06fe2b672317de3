package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Stream is the name of every site's kv stream (kvpb.Stream).
const Stream = kvpb.Stream

// Sentinel errors; returned errors wrap them and name the operand.
var (
	ErrNotFound      = errors.New("kv: key not found")
	ErrKeyTooLarge   = errors.New("kv: key too large")
	ErrValueTooLarge = errors.New("kv: value too large")
	ErrBadKey        = errors.New("kv: bad key")
	ErrUnsatisfiable = errors.New("kv: predicate can never hold")
	ErrQuorum        = errors.New("kv: quorum not reached")
	ErrBadRead       = errors.New("kv: bad read mode")
)

// Defaults for zero Config fields.
const (
	DefaultWait          = "majority"
	DefaultTimeout       = 10 * time.Second
	DefaultMaxKeyBytes   = 4096
	DefaultMaxValueBytes = 4 << 20
)

// Reader answers quorum reads for one other site: its version of a key,
// from everything it has acknowledged.
type Reader interface {
	LocalGet(ctx context.Context, key string) (Version, bool, error)
}

// Config configures a Store.
type Config struct {
	// Node is the site; New registers the store as its kv applier, so call
	// New before Node.Start. Required.
	Node *stabilizer.Node
	// DefaultWait is the predicate writes wait for when they name none.
	// Default "majority".
	DefaultWait string
	// DefaultTimeout bounds waits of requests without a deadline. Default 10s.
	DefaultTimeout time.Duration
	// MaxKeyBytes defaults to 4096, MaxValueBytes to 4 MiB (a file's version
	// record names its chunks: 4 MiB holds some 70,000 refs, a file of about
	// 30 GiB).
	MaxKeyBytes, MaxValueBytes int
	// Peers reach the other sites for quorum reads, by site name.
	Peers map[string]Reader
	// Logger; default none.
	Logger hclog.Logger
	// Registerer for metrics; default none.
	Registerer prometheus.Registerer
	// Retention: what the site keeps of the log and of each key's history
	// (retention.go).
	Retention
}

// Store is the wide-area key/value store of one site: writes go through the
// site's kv stream, every site applies every site's stream with last writer
// wins, and reads choose how stable what they see must be.
type Store struct {
	cfg   Config
	node  *stabilizer.Node
	state state
	log   hclog.Logger

	mu struct {
		sync.Mutex
		pending  map[string]Version // own writes not yet applied: visible at once
		watchers map[*watcher]struct{}
		// restoring: origins whose state is being copied from a peer
		// (transfer.go); reads wait for none and are refused meanwhile.
		restoring map[string]bool
	}
	// compiled caches predicates by source: every write checks its wait.
	compiled predCache
	ret      *retainer // the background work: log truncation, pruning
}

// predCache holds compiled predicates by source, up to
// maxCachedPredicates: a client that sends many distinct inline ones
// cannot grow it without bound.
type predCache struct {
	mu sync.Mutex
	m  map[string]*compiledPred
}

const maxCachedPredicates = 1024

func (c *predCache) get(src string) (*compiledPred, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[src]
	return p, ok
}

func (c *predCache) put(src string, p *compiledPred) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedPredicates {
		// Start over: the sources in use come back at their next request.
		c.m = make(map[string]*compiledPred)
	}
	c.m[src] = p
}

type compiledPred struct {
	p           *frontier.Predicate
	satisfiable bool // for this site's own writes
}

// Validate reports every bad field, one line each: a missing Node, a
// DefaultWait that is no predicate this site knows, negative limits, peers
// that are not other sites of the schema.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv: config: "+format, args...))
	}
	if c.Node == nil {
		bad("Node: missing")
	} else {
		if c.DefaultWait != "" {
			if _, err := c.Node.Predicate(context.Background(), c.DefaultWait); err != nil {
				bad("DefaultWait: %q: %v", c.DefaultWait, err)
			}
		}
		for _, p := range slices.Sorted(maps.Keys(c.Peers)) {
			switch _, ok := c.Node.Schema().SiteIndex(p); {
			case !ok:
				bad("Peers[%q]: not one of the sites %v", p, c.Node.Schema().Sites)
			case p == c.Node.Site():
				bad("Peers[%q]: this site itself; quorum reads ask it directly", p)
			case c.Peers[p] == nil:
				bad("Peers[%q]: nil", p)
			}
		}
	}
	if c.DefaultTimeout < 0 {
		bad("DefaultTimeout: %v is negative", c.DefaultTimeout)
	}
	if c.MaxKeyBytes < 0 {
		bad("MaxKeyBytes: %d is negative", c.MaxKeyBytes)
	}
	if c.MaxValueBytes < 0 {
		bad("MaxValueBytes: %d is negative", c.MaxValueBytes)
	}
	c.Retention.validate(bad)
	return errors.Join(errs...)
}

// New creates the store and registers it with the node.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DefaultWait == "" {
		cfg.DefaultWait = DefaultWait
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxKeyBytes == 0 {
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if cfg.MaxValueBytes == 0 {
		cfg.MaxValueBytes = DefaultMaxValueBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	cfg.Retention.setDefaults()
	ns, err := cfg.Node.Namespace(namespace)
	if err != nil {
		return nil, fmt.Errorf("kv: %w", err)
	}
	s := &Store{cfg: cfg, node: cfg.Node, state: state{ns: ns}, log: cfg.Logger}
	if err := s.state.open(context.Background()); err != nil {
		return nil, err
	}
	s.mu.pending = map[string]Version{}
	s.mu.watchers = map[*watcher]struct{}{}
	s.ret = newRetainer(s, cfg.Retention, cfg.Registerer)
	if err := cfg.Node.Handle(Stream, s); err != nil {
		return nil, err
	}
	if err := cfg.Node.EnableStateTransfer(Stream, ns, transferApp{s}); err != nil {
		return nil, err
	}
	return s, nil
}

// WriteOptions say what a write waits for.
type WriteOptions struct {
	// Wait is a predicate name or source; "" means the default, "none"
	// returns as soon as the write has its seq.
	Wait string
	// Timeout bounds the wait when ctx has no deadline; 0: the default.
	Timeout time.Duration
}

// WriteResult says where a write landed.
type WriteResult struct {
	Origin string
	Seq    uint64
	HLC    stabilizer.HLC
}

// Put writes key = value and waits for the predicate to cover the write.
func (s *Store) Put(ctx context.Context, key string, value []byte, o WriteOptions) (WriteResult, error) {
	return s.writeOne(ctx, Op{Key: key, Value: value}, o)
}

// Delete removes key and waits for the predicate to cover the deletion.
func (s *Store) Delete(ctx context.Context, key string, o WriteOptions) (WriteResult, error) {
	return s.writeOne(ctx, Op{Key: key, Delete: true}, o)
}

func (s *Store) writeOne(ctx context.Context, op Op, o WriteOptions) (WriteResult, error) {
	// WriteBatch's own error is also every failed op's: the op's says all.
	res, _ := s.WriteBatch(ctx, []Op{op}, o)
	return res[0].WriteResult, res[0].Err
}

// Op is one write of a batch: a put of Value, or a deletion.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// OpResult is what became of one op of a batch: where it was written,
// and Err when it was refused or its wait failed.
type OpResult struct {
	WriteResult
	Err error
}

// WriteBatch writes ops, each its own version with its own seq, appending
// them together (one step of the node's loop for all) and waiting once for
// o.Wait to cover the last. It returns one result per op, in order. An
// invalid op fails alone. A bad wait predicate fails every valid op and
// writes nothing; a failed wait fails the written ops its frontier had not
// reached, and their results still say where they were written. The error,
// when not nil, is that of the first valid op that failed.
func (s *Store) WriteBatch(ctx context.Context, ops []Op, o WriteOptions) ([]OpResult, error) {
	ctx, cancel := s.withTimeout(ctx, o.Timeout)
	defer cancel()
	b, err := s.Append(ctx, ops, o)
	if err != nil {
		return b.Results, err
	}
	return b.Results, b.Wait(ctx)
}

// Batch is a batch of writes that Append has made and not yet waited for.
type Batch struct {
	// Results holds one result per op, in order; Wait sets the Err of the
	// ops whose wait failed.
	Results []OpResult

	s        *Store
	ops      []Op
	wait     string // the predicate, never ""
	stream   stabilizer.StreamID
	last     uint64    // the seq of the last written op; 0 if none was
	deadline time.Time // when the wait gives up
}

// Append is WriteBatch without the wait: it checks ops, appends the valid
// ones together and returns at once with their results; Wait waits for
// them. The timeout, o.Timeout (or ctx's deadline, or the default), counts
// from now. The error, when not nil, failed every valid op: a bad wait
// predicate (nothing written) or a failed append. ctx bounds only the
// append; pass Wait its own.
func (s *Store) Append(ctx context.Context, ops []Op, o WriteOptions) (*Batch, error) {
	b := &Batch{Results: make([]OpResult, len(ops)), s: s, ops: ops, wait: o.Wait, deadline: s.deadline(ctx, o.Timeout)}
	if b.wait == "" {
		b.wait = s.cfg.DefaultWait
	}
	if err := s.checkSatisfiable(ctx, b.wait); err != nil {
		for i := range b.Results {
			b.Results[i].Err = err
		}
		return b, err
	}
	payloads, valid := s.encodeOps(ops, b.Results)
	if len(valid) == 0 {
		return b, nil
	}
	as, err := s.node.AppendBatch(ctx, Stream, payloads)
	if err != nil {
		for _, i := range valid {
			b.Results[i].Err = fmt.Errorf("kv: write %q: %w", ops[i].Key, err)
		}
		return b, b.Results[valid[0]].Err
	}
	s.mu.Lock()
	for j, i := range valid {
		a := as[j]
		v := Version{Key: ops[i].Key, Value: ops[i].Value, Deleted: ops[i].Delete, Origin: a.Stream.Origin, Seq: a.Seq, HLC: a.HLC}
		if cur, ok := s.mu.pending[v.Key]; !ok || v.Newer(&cur) {
			s.mu.pending[v.Key] = v
		}
		b.Results[i].WriteResult = WriteResult{Origin: a.Stream.Origin, Seq: a.Seq, HLC: a.HLC}
	}
	s.mu.Unlock()
	last := as[len(as)-1]
	b.stream, b.last = last.Stream, last.Seq
	return b, nil
}

// waits tells whether Wait has anything to wait for.
func (b *Batch) waits() bool { return b.last != 0 && b.wait != "none" }

// Wait waits once for the batch's predicate to cover its last write, until
// the batch's deadline or the end of ctx. When the wait fails, the written
// ops the frontier had not reached fail with the error Put would return
// for them, and Wait returns the first; the others succeeded (frontiers
// only grow). Call it once, from one goroutine.
func (b *Batch) Wait(ctx context.Context) error {
	if !b.waits() {
		return nil
	}
	if d, ok := ctx.Deadline(); !ok || d.After(b.deadline) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, b.deadline)
		defer cancel()
	}
	err := b.s.node.WaitFor(ctx, b.stream, b.wait, b.last)
	if err == nil {
		return nil
	}
	var we *stabilizer.WaitError
	errors.As(err, &we)
	var first error
	for i := range b.Results {
		r := &b.Results[i]
		if r.Err != nil || r.Seq == 0 || we != nil && r.Seq <= we.Frontier {
			continue
		}
		cause := err
		if we != nil && we.Seq != r.Seq {
			// The op's own seq, as its own wait would have said.
			own := *we
			own.Seq = r.Seq
			cause = &own
		}
		r.Err = fmt.Errorf("kv: write %q: %w", b.ops[i].Key, cause)
		if first == nil {
			first = r.Err
		}
	}
	return first
}

// encodeOps checks every op, sets the refused ones' errors in res, and
// returns the payloads of the others with their indexes in ops.
func (s *Store) encodeOps(ops []Op, res []OpResult) (payloads [][]byte, valid []int) {
	for i, op := range ops {
		err := s.checkKey(op.Key)
		if err == nil && len(op.Value) > s.cfg.MaxValueBytes {
			err = fmt.Errorf("%w: %q: value is %d bytes, the limit is %d", ErrValueTooLarge, op.Key, len(op.Value), s.cfg.MaxValueBytes)
		}
		if err != nil {
			res[i].Err = err
			continue
		}
		kind := opPut
		if op.Delete {
			kind = opDelete
		}
		payloads = append(payloads, encodeOp(kind, op.Key, op.Value))
		valid = append(valid, i)
	}
	return payloads, valid
}

func (s *Store) checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrBadKey)
	case len(key) > s.cfg.MaxKeyBytes:
		return fmt.Errorf("%w: key of %d bytes, the limit is %d", ErrKeyTooLarge, len(key), s.cfg.MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadKey, key)
	}
	return nil
}

// deadline is when a wait of d that starts now ends: d == 0 means ctx's
// deadline, or the default timeout if ctx has none.
func (s *Store) deadline(ctx context.Context, d time.Duration) time.Time {
	if d == 0 {
		if dl, ok := ctx.Deadline(); ok {
			return dl
		}
		d = s.cfg.DefaultTimeout
	}
	return time.Now().Add(d)
}

func (s *Store) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok && d == 0 {
		return context.WithCancel(ctx)
	}
	if d == 0 {
		d = s.cfg.DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// compile resolves a predicate name or source to a compiled predicate.
func (s *Store) compile(ctx context.Context, p string) (*frontier.Predicate, error) {
	c, err := s.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	return c.p, nil
}

// lookup compiles a predicate once per source; names are resolved on every
// call, since a named predicate can be changed.
func (s *Store) lookup(ctx context.Context, p string) (*compiledPred, error) {
	src := p
	if named, ok := s.node.PredicateSource(p); ok {
		src = named
	}
	if c, ok := s.compiled.get(src); ok {
		return c, nil
	}
	if _, err := s.node.Predicate(ctx, p); err != nil {
		return nil, err
	}
	fp, err := frontier.Compile(src, s.node.Schema())
	if err != nil {
		return nil, err
	}
	self, _ := s.node.Schema().SiteIndex(s.node.Site())
	c := &compiledPred{p: fp, satisfiable: fp.Satisfiable(self, self)}
	s.compiled.put(src, c)
	return c, nil
}

// checkSatisfiable refuses a wait that this configuration can never
// satisfy for this site's writes, instead of timing out.
func (s *Store) checkSatisfiable(ctx context.Context, p string) error {
	c, err := s.lookup(ctx, p)
	if err != nil {
		return fmt.Errorf("kv: wait: %w", err)
	}
	if !c.satisfiable {
		return fmt.Errorf("%w: %q can never hold for writes from %s with sites %s", ErrUnsatisfiable, p, s.node.Site(), strings.Join(s.node.Schema().Sites, ", "))
	}
	return nil
}

// Apply is the kv stream's applier: it writes versions with last writer
// wins and tells watchers.
func (s *Store) Apply(ctx context.Context, entries []stabilizer.Entry) error {
	origin := entries[0].Stream.Origin
	s.mu.Lock()
	watch := len(s.mu.watchers) > 0
	s.mu.Unlock()
	// A Watch that starts during this call sees changes from the next one:
	// it starts later, as far as it can tell.
	changed, err := s.state.apply(origin, entries, watch)
	if err != nil {
		return err
	}
	last := entries[len(entries)-1].Seq
	s.mu.Lock()
	if origin == s.node.Site() {
		for k, v := range s.mu.pending {
			if v.Seq <= last {
				delete(s.mu.pending, k)
			}
		}
	}
	ws := make([]*watcher, 0, len(s.mu.watchers))
	for w := range s.mu.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.offer(changed)
	}
	return nil
}

// ReadOptions choose what a read may see. At most one of Stable, Quorum and
// Snapshot is set; none means the latest local state.
type ReadOptions struct {
	// Stable: the newest version behind its origin's frontier of this
	// predicate — it survives the failures the predicate protects against.
	Stable string
	// Quorum: ask every site, finish when the answering sites satisfy the
	// predicate's dual, and return the newest version: it sees every write
	// acknowledged under the predicate.
	Quorum string
	// Snapshot: the state at the predicate's global stable time, a
	// consistent cut across origins.
	Snapshot string
	// Session: positions of the caller's own writes (origin -> seq); the
	// read waits until this site applied them.
	Session map[string]uint64
	// Timeout bounds the read's waits when ctx has no deadline.
	Timeout time.Duration
}

// ReadResult is what a read found.
type ReadResult struct {
	Version
	Found bool
	// Snapshot is the time of a snapshot read.
	Snapshot stabilizer.HLC
	// Answered lists the sites whose answers a quorum read used.
	Answered []string
}

// Get reads one key.
func (s *Store) Get(ctx context.Context, key string, o ReadOptions) (ReadResult, error) {
	if err := s.checkKey(key); err != nil {
		return ReadResult{}, err
	}
	if err := s.available(); err != nil {
		return ReadResult{}, err
	}
	ctx, cancel := s.withTimeout(ctx, o.Timeout)
	defer cancel()
	if err := s.waitSession(ctx, o.Session); err != nil {
		return ReadResult{}, err
	}
	var res ReadResult
	var err error
	switch {
	case countSet(o.Stable, o.Quorum, o.Snapshot) > 1:
		return ReadResult{}, fmt.Errorf("%w: choose one of stable, quorum and snapshot", ErrBadRead)
	case o.Stable != "":
		res, err = s.getStable(ctx, key, o.Stable)
	case o.Quorum != "":
		res, err = s.getQuorum(ctx, key, o.Quorum)
	case o.Snapshot != "":
		res, err = s.getSnapshot(ctx, key, o.Snapshot)
	default:
		res.Version, res.Found, err = s.latest(key)
	}
	if err != nil {
		return ReadResult{}, err
	}
	if !res.Found || res.Deleted {
		return res, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return res, nil
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// latest is the local state, own unapplied writes included. It looks at
// the pending writes before the state: Apply writes a version to the state
// before it drops it from pending, so each version is seen in one or the
// other (the other order missed a write applied in between).
func (s *Store) latest(key string) (Version, bool, error) {
	s.mu.Lock()
	p, ok := s.mu.pending[key]
	s.mu.Unlock()
	v, found, err := s.state.latest(key)
	if err != nil {
		return Version{}, false, err
	}
	if ok && (!found || p.Newer(&v)) {
		return p, true, nil
	}
	return v, found, nil
}

// LocalGet answers a quorum read from everything this site acknowledged:
// it first waits until it applied every kv message it persisted.
func (s *Store) LocalGet(ctx context.Context, key string) (Version, bool, error) {
	if err := s.available(); err != nil {
		return Version{}, false, err
	}
	streams, err := s.node.Streams(ctx)
	if err != nil {
		return Version{}, false, err
	}
	for _, st := range streams {
		if st.Stream.Name == Stream && st.Persisted > 0 {
			if err := s.node.WaitFor(ctx, st.Stream, "applied(self)", st.Persisted); err != nil {
				return Version{}, false, err
			}
		}
	}
	return s.latest(key)
}

func (s *Store) waitSession(ctx context.Context, session map[string]uint64) error {
	for _, origin := range slices.Sorted(maps.Keys(session)) {
		if _, ok := s.node.Schema().SiteIndex(origin); !ok {
			return fmt.Errorf("kv: session: unknown site %q", origin)
		}
		id := stabilizer.StreamID{Origin: origin, Name: Stream}
		if err := s.node.WaitFor(ctx, id, "applied(self)", session[origin]); err != nil {
			return fmt.Errorf("kv: session: waiting for this site to apply %s up to %d: %w", id, session[origin], err)
		}
	}
	return nil
}
