package core

import (
	"fmt"
	"slices"

	"github.com/stabilizer/stabilizer/frontier"
)

// Core is the deterministic protocol state machine of one site. See the
// package documentation for the contract between a Core and its driver.
type Core struct {
	cfg      Config
	schemaFP uint64
	self     int
	n        int // sites
	nlevels  int

	tick  uint64
	phys  int64 // latest physical time given to Tick
	clock HLC   // latest timestamp issued or observed

	streams  map[StreamID]*stream
	list     []*stream   // every stream, in creation order, for determinism
	own      []*stream   // this site's streams, in creation order
	byOrigin [][]*stream // streams by origin site index

	peers []*peer // by site index; nil at self
	// relayOrigins counts the peers whose streams this site relays;
	// relayScan, that inputs came since the last Ready relayed all it
	// could (relayPending).
	relayOrigins int
	relayScan    bool
	// hops are other origins' routed streams whose first hop this site
	// is (route.go): it relays them while their origins are up too.
	hops []*stream

	preds     map[string]*pred
	predNames []string // sorted
	// every holds the predicates evaluated on every stream, sorted by
	// name: the named ones and the transient ones scoped to AllStreams.
	// Stable times are published for these; originTime is indexed by
	// position here.
	every []*pred
	// scopes holds, per stream name, its streams and the transient
	// predicates scoped to it (scope.go).
	scopes map[string]*scopeList
	// scoping lists the scope additions since the last Ready, which
	// evaluates them.
	scoping []scoping
	// predSlots is how many predicate indexes are in use or free: the
	// most any stream's releases can grow to. freeSlots are indexes that
	// removed transient predicates left, for the next definition.
	predSlots int
	freeSlots []int
	// durableAdv counts, while Ready runs, the frontier advances and stable
	// times of predicates that are persisted: those need an fsync.
	durableAdv int

	// originT is the latest clock heartbeat of each origin; at self, the
	// latest clock persisted through Ready.Clock.
	originT []HLC
	// originDirty marks origins whose streams' frontiers under a predicate
	// of every, or heartbeat, changed; originTime caches each origin's
	// time per predicate of every, by position.
	originDirty []bool
	originTime  [][]HLC
	stableTick  uint64 // tick of the last stable-time computation
	stableDone  bool
	// timeForce has the next Ready compute stable times even if this
	// tick's are computed: a predicate was scoped to every stream.
	timeForce bool

	rowVer uint64 // bumped at every change of this site's own row
	// durableVer is the rowVer of the last change to a received or
	// persisted cell: acks that writes wait for, sent without AckInterval.
	durableVer uint64
	// changes logs own-row changes in rowVer order, so that an Acks delta
	// costs what changed, not every stream: a peer's delta is the tail
	// after its ackSentVer. Trimmed once every peer was sent it.
	changes    []change
	dirtyCells []cellRef
	timeDirty  bool

	pendingMsgs []Message // Hello, Positions and Reject, sent before data
	truncs      []Truncation
	behind      []Position
	// lost: per own stream name, what peers hold and saw of it beyond
	// this site's log (it lost its store): Append refuses to reuse those
	// seqs (truncate.go).
	lost map[string]lostAt
	// joining: a fresh site (no state) has not yet heard every peer's
	// row, so it cannot know whether peers hold entries of its own
	// streams from an earlier incarnation whose store was wiped: it
	// neither appends nor sends clock heartbeats (Join, Joining).
	joining bool
	// recoveryDirty: joining or lost changed since the last Ready.
	recoveryDirty bool
	// incarnation names this site's store (Ready.Incarnation); incStored,
	// that a Ready handed it out.
	incarnation uint64
	incStored   bool
	// reserveClock: the clock observed a time this site's earlier
	// incarnation may have exposed (a snapshot's, a peer's memory of our
	// heartbeat); the next Ready persists a reservation above it.
	reserveClock bool
	pendingDefs  []PredicateDef
	errs         []error

	nextHB   uint64 // tick at which the next clock heartbeat is due
	nextFull uint64 // tick at which the next whole-row Acks is due

	// Set between Ready and Advance.
	awaiting   bool
	readyClock HLC
	readyHeads []uint64 // per own stream, heads at readyClock

	// reserved is the latest Ready.Clock: no heartbeat exposes a time above
	// it, and a restart issues timestamps above it.
	reserved HLC
}

type cellRef struct {
	s     *stream
	level int
}

type change struct {
	cellRef
	ver uint64
}

type pred struct {
	name     string
	idx      int // index into stream.rel, in order of definition
	src      string
	version  uint64
	compiled *frontier.Predicate
	// persistedOnly: the predicate reads no level but `persisted`, whose
	// acks are durable where they are made (FrontierAdvance.Settled).
	persistedOnly bool
	// transient: defined by DefineTransient; neither persisted nor
	// versioned, scoped, and removable.
	transient bool
	// every: evaluated on every stream, as named predicates are and
	// transient ones scoped to AllStreams; else on the streams of the
	// names whose lists it is in.
	every bool
	lists []*scopeList
	// stable is the stable time published (every) or last answered by
	// StableTime (scoped), which it never goes below while the scope
	// stays the same.
	stable HLC
}

// New returns a Core for cfg.Site that resumes from st (the zero State for a
// fresh site).
func New(cfg Config, st State) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	self, _ := cfg.Schema.SiteIndex(cfg.Site)
	c := &Core{
		cfg:      cfg,
		self:     self,
		n:        len(cfg.Schema.Sites),
		nlevels:  cfg.Schema.NumLevels(),
		streams:  make(map[StreamID]*stream),
		preds:    make(map[string]*pred),
		scopes:   make(map[string]*scopeList),
		peers:    make([]*peer, len(cfg.Schema.Sites)),
		originT:  make([]HLC, len(cfg.Schema.Sites)),
		byOrigin: make([][]*stream, len(cfg.Schema.Sites)),

		originDirty: make([]bool, len(cfg.Schema.Sites)),
		originTime:  make([][]HLC, len(cfg.Schema.Sites)),
	}
	c.schemaFP = SchemaFingerprint(cfg.Schema)
	for i, name := range cfg.Schema.Sites {
		if i != self {
			c.peers[i] = &peer{idx: i, name: name, relay: make([]relayState, len(cfg.Schema.Sites))}
		}
	}
	for _, name := range frontier.BuiltinNames() {
		// A built-in can be meaningless for a schema (one_remote with a
		// single site): it is then left out, and naming it is an
		// unknown-predicate error.
		_ = c.definePredicate(name, frontier.Builtins[name], 1)
	}
	names := make([]string, 0, len(cfg.Predicates))
	for name := range cfg.Predicates {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := c.definePredicate(name, cfg.Predicates[name], 1); err != nil {
			return nil, fmt.Errorf("core: config: Predicates[%q]: %w", name, err)
		}
	}
	if err := c.restore(st); err != nil {
		return nil, err
	}
	c.incarnation, c.incStored = st.Incarnation, st.Incarnation != 0
	if c.incarnation == 0 {
		c.incarnation = c.cfg.Rand.Uint64() | 1
	}
	fresh := len(st.Heads) == 0 && len(st.Acks) == 0 && st.Clock.IsZero()
	c.joining = c.cfg.JoinPeers && c.n > 1 && (fresh || st.Recovery.Joining)
	c.recoveryDirty = c.joining && !st.Recovery.Joining
	for _, v := range st.Recovery.Void {
		if s, ok := c.streams[v.Stream]; ok && s.own {
			s.void = v
		}
	}
	for _, pi := range st.Recovery.Peers {
		if i, ok := c.cfg.Schema.SiteIndex(pi.Site); ok && i != self {
			c.peers[i].incarnation = pi.Incarnation
		}
	}
	for _, h := range st.Recovery.Held {
		i, ok := c.cfg.Schema.SiteIndex(h.Site)
		if h.Stream.Origin != c.cfg.Site || !ok {
			return nil, fmt.Errorf("%w: lost stream %s held at %q", ErrBadState, h.Stream, h.Site)
		}
		c.noteLost(h.Stream.Name, h.Seq, i)
	}
	for _, l := range st.Recovery.Seen {
		if l.Stream.Origin != c.cfg.Site {
			return nil, fmt.Errorf("%w: lost stream %s is not this site's", ErrBadState, l.Stream)
		}
		c.noteLost(l.Stream.Name, l.Seq, -1)
	}
	if c.joining || c.hasLost() {
		// Our heads may not be all we issued: our own time stands still
		// until they are (see hbDue).
		c.originT[c.self] = HLC{}
	}
	return c, nil
}

func (c *Core) definePredicate(name, src string, version uint64) error {
	p, err := frontier.Compile(src, c.cfg.Schema)
	if err != nil {
		return err
	}
	c.define(name, &pred{src: src, version: version, compiled: p})
	return nil
}

// define adds or replaces a named predicate, evaluated on every stream; it
// takes the index and stable time of the one it replaces, else a free
// index, and has every frontier evaluated afresh.
func (c *Core) define(name string, p *pred) {
	p.name, p.every = name, true
	p.persistedOnly = readsOnly(p.compiled, frontier.Persisted, c.nlevels)
	if old, ok := c.preds[name]; ok {
		p.idx, p.stable = old.idx, old.stable
	} else {
		c.add(p)
	}
	c.preds[name] = p
	c.every = insertPred(c.every, p)
	for _, s := range c.list {
		s.dirty = true
	}
	c.everyChanged()
}

// add gives a new predicate an index, a free one if any, and its name.
func (c *Core) add(p *pred) {
	if n := len(c.freeSlots); n > 0 {
		p.idx, c.freeSlots = c.freeSlots[n-1], c.freeSlots[:n-1]
	} else {
		p.idx = c.predSlots
		c.predSlots++
	}
	i, _ := slices.BinarySearch(c.predNames, p.name)
	c.predNames = slices.Insert(c.predNames, i, p.name)
}

func readsOnly(p *frontier.Predicate, level, levels int) bool {
	for l := range levels {
		if p.ReadsLevel(l) != (l == level) {
			return false
		}
	}
	return true
}

func (c *Core) restore(st State) error {
	for _, d := range st.Predicates {
		if _, ok := frontier.Builtins[d.Name]; ok {
			return fmt.Errorf("%w: predicate %q: %w", ErrBadState, d.Name, ErrBuiltinPredicate)
		}
		if err := c.definePredicate(d.Name, d.Source, d.Version); err != nil {
			return fmt.Errorf("%w: predicate %q: %w", ErrBadState, d.Name, err)
		}
	}
	get := func(id StreamID) (*stream, error) {
		if s, ok := c.streams[id]; ok {
			return s, nil
		}
		o, ok := c.cfg.Schema.SiteIndex(id.Origin)
		if !ok {
			return nil, fmt.Errorf("%w: stream %s: origin %q: %w", ErrBadState, id, id.Origin, ErrUnknownPeer)
		}
		return c.newStream(id, o), nil
	}
	for _, h := range st.Heads {
		s, err := get(h.Stream)
		if err != nil {
			return err
		}
		s.head, s.written, s.durable, s.headHLC = h.Seq, h.Seq, h.Seq, h.HLC
		c.clock = maxHLC(c.clock, h.HLC)
	}
	for _, t := range st.Truncated {
		s, err := get(t.Stream)
		if err != nil {
			return err
		}
		if t.Seq > s.head {
			return fmt.Errorf("%w: stream %s truncated to %d beyond its head %d", ErrBadState, s.id, t.Seq, s.head)
		}
		s.floor, s.floorHLC = t.Seq, t.HLC
	}
	for _, a := range st.Acks {
		s, err := get(a.Stream)
		if err != nil {
			return err
		}
		site, ok := c.cfg.Schema.SiteIndex(a.Site)
		if !ok || a.Level < 0 || a.Level >= c.nlevels {
			return fmt.Errorf("%w: ack cell %s site %q level %d", ErrBadState, a.Stream, a.Site, a.Level)
		}
		if i := a.Level*c.n + site; a.Seq > s.acks[i] {
			s.acks[i], s.hlcs[i] = a.Seq, a.HLC
		}
	}
	for _, s := range c.list {
		// A bulk stream's received cell may stand above what its bulk
		// store kept through a crash (see BulkPersisted).
		if i := frontier.Received*c.n + c.self; s.lane == laneBulk && s.acks[i] > s.head {
			s.acks[i], s.hlcs[i] = s.head, s.headHLC
		}
		// What is persisted was received and persisted, whatever the
		// saved cells say: those may predate the last write.
		c.setOwn(s, frontier.Received, s.head, s.headHLC)
		c.setOwn(s, frontier.Persisted, s.durable, s.headHLC)
		s.appPos = s.acks[frontier.Applied*c.n+c.self]
	}
	for _, a := range st.Applied {
		s, ok := c.streams[a.Stream]
		if !ok {
			return fmt.Errorf("%w: applied position of %s: %w", ErrBadState, a.Stream, ErrUnknownStream)
		}
		s.appPos = a.Seq
	}
	for _, s := range c.list {
		// The application's own position is durable: ack it even if the
		// ack cell was lost with the last write before a crash.
		c.setOwn(s, frontier.Applied, s.appPos, HLC{})
		if s.appPos > s.durable {
			return fmt.Errorf("%w: stream %s applied %d beyond persisted %d", ErrBadState, s.id, s.appPos, s.durable)
		}
		s.delivered = s.appPos
	}
	for _, f := range st.Frontiers {
		s, err := get(f.Stream)
		if err != nil {
			return err
		}
		p, ok := c.preds[f.Predicate]
		if !ok {
			// A predicate no longer configured: its releases are moot.
			continue
		}
		*s.release(p.idx) = release{seq: f.Seq, version: f.Version, hlc: f.HLC}
	}
	for _, t := range st.StableTimes {
		if p, ok := c.preds[t.Predicate]; ok {
			p.stable = t.Time
		}
	}
	c.clock = maxHLC(c.clock, st.Clock)
	c.reserved = st.Clock
	// Every message this site ever stamped is at or below the restored
	// clock, and every one to come is above it: the clock and today's heads
	// form a valid heartbeat.
	c.originT[c.self] = st.Clock
	for _, s := range c.own {
		s.hbHead = s.head
	}
	for o := range c.originDirty {
		c.originDirty[o] = true
	}
	c.timeDirty = true
	return nil
}

// SchemaFingerprint hashes what ack cells depend on: the sites and the
// levels, in order (FNV-1a). Groups do not matter to the protocol. Messages
// carry it so that differently configured sites refuse each other.
func SchemaFingerprint(s *frontier.Schema) uint64 {
	h := uint64(14695981039346656037)
	add := func(str string) {
		for i := 0; i < len(str); i++ {
			h = (h ^ uint64(str[i])) * 1099511628211
		}
		h = (h ^ 0xff) * 1099511628211 // separator
	}
	for _, site := range s.Sites {
		add(site)
	}
	add("|")
	for _, l := range s.LevelNames() {
		add(l)
	}
	return h
}

// now issues a fresh timestamp, above every timestamp issued or observed.
func (c *Core) now() HLC {
	if c.phys > c.clock.Wall {
		c.clock = HLC{Wall: c.phys}
	} else {
		c.clock.Logical++
	}
	return c.clock
}

func (c *Core) observe(h HLC) { c.clock = maxHLC(c.clock, h) }

// setOwn raises a cell of this site's own row.
func (c *Core) setOwn(s *stream, level int, seq uint64, hlc HLC) {
	i := level*c.n + c.self
	if seq <= s.acks[i] {
		return
	}
	s.acks[i], s.hlcs[i] = seq, hlc
	c.rowVer++
	s.cellVer[level] = c.rowVer
	if level <= frontier.Persisted {
		c.durableVer = c.rowVer
	}
	c.changes = append(c.changes, change{cellRef{s, level}, c.rowVer})
	s.dirty = true
	c.timeDirty = true
	if !s.queued[level] {
		s.queued[level] = true
		c.dirtyCells = append(c.dirtyCells, cellRef{s, level})
	}
}

// Append adds payload to this site's stream name and returns its seq and
// HLC. The entry is handed out in the next Ready's Entries; it leaves the
// site only in that Ready or a later one, after the driver persisted it. The core keeps payload: the
// caller must not modify it afterwards.
func (c *Core) Append(name string, payload []byte) (uint64, HLC, error) {
	if err := checkStreamName(name); err != nil {
		return 0, HLC{}, fmt.Errorf("core: append: %w", err)
	}
	if c.joining {
		return 0, HLC{}, fmt.Errorf("core: append to %s: %w", name, ErrJoining)
	}
	id := StreamID{Origin: c.cfg.Site, Name: name}
	s, ok := c.streams[id]
	if l := c.lost[name]; l.top() > c.headOf(id) {
		return 0, HLC{}, fmt.Errorf("core: append to %s: %w: peers hold it up to seq %d and saw it up to %d, this site's log ends at %d; install a snapshot first",
			id, ErrLostEntries, l.maxHeld(), l.seen, c.headOf(id))
	}
	if !ok {
		s = c.newStream(id, c.self)
	}
	e := Entry{Stream: id, Seq: s.head + 1, HLC: c.now(), Payload: payload}
	s.push(e)
	if s.lane != laneBulk {
		c.setOwn(s, frontier.Received, e.Seq, e.HLC)
	}
	return e.Seq, e.HLC, nil
}

// BulkPersisted tells the core that the driver made the entries of bulk
// stream id up to seq durable in its bulk store (Ready.BulkEntries): the
// site acks them received and persisted, and they may now be sent,
// relayed and delivered. seq beyond what Readies handed out is an error;
// at or below what was confirmed before, nothing changes.
//
// The origin acks its own bulk entries received only together with
// persisted: a received cell ahead of its bulk store would, after a power
// cut took what the store had not synced, claim seqs the origin then gives
// to other messages. A receiver acks a bulk entry received on arrival, as
// any other, so that a peer whose store was wiped learns from its row what
// it holds; after a crash that cell may stand above what the receiver
// kept (received is a level of memory), which is why relays and the bulk
// window go by persisted cells.
func (c *Core) BulkPersisted(id StreamID, seq uint64) error {
	s, ok := c.streams[id]
	if !ok {
		return fmt.Errorf("core: bulk persisted %s: %w", id, ErrUnknownStream)
	}
	if s.lane != laneBulk {
		return fmt.Errorf("core: bulk persisted %s: %w: not a bulk stream", id, ErrBadState)
	}
	if seq > s.written {
		return fmt.Errorf("core: bulk persisted %s %d: %w: handed out up to %d", id, seq, ErrBadState, s.written)
	}
	if seq <= s.durable {
		return nil
	}
	h, _ := s.memHLC(seq) // above durable, so in memory
	s.durable = seq
	c.setOwn(s, frontier.Received, seq, h)
	c.setOwn(s, frontier.Persisted, seq, h)
	c.relayScan = true
	return nil
}

// Tick advances time by one tick; now is the physical time in nanoseconds
// for the hybrid logical clock (it may stand still or jump; it is never
// taken to move backwards).
func (c *Core) Tick(now int64) {
	c.tick++
	c.phys = max(c.phys, now)
	c.relayScan = true
	c.checkRoutes()
	for _, p := range c.peers {
		// A refused channel waits for the driver to reconnect: the peer
		// said why, and asking again every few ticks would not change it.
		if p == nil {
			continue
		}
		c.tickRelay(p)
		if !p.connected || p.rejected != nil {
			continue
		}
		stuck := !p.established || p.inflight() || c.waitsSnapshot(p)
		if stuck && c.tick-p.progressTick >= uint64(c.cfg.ResendTicks) {
			// The Hello or some data went unanswered: start over from
			// what the destination says it holds.
			c.newSession(p)
		}
	}
}

// Connected tells the core that connections to peer are up: it opens a new
// session of the data channel (a Hello; data follows once the peer answered
// with its positions) and sends the whole ack row on the control plane.
func (c *Core) Connected(peer string) error {
	p, err := c.peer(peer)
	if err != nil {
		return fmt.Errorf("core: connected: %w", err)
	}
	c.relayScan = true
	p.connected = true
	p.rejected = nil
	p.needFull = true
	p.heard = false
	c.originBack(p)
	c.newSession(p)
	if p.helloSession != 0 {
		// Our answer to the peer's Hello may have been sent before our
		// connection to it was up, and lost: answer again. An answer to
		// a session the peer has left is ignored there.
		c.answerHello(p)
	}
	return nil
}

// Disconnected tells the core that the connections to peer broke: nothing is
// sent on its data channel until Connected.
func (c *Core) Disconnected(peer string) error {
	p, err := c.peer(peer)
	if err != nil {
		return fmt.Errorf("core: disconnected: %w", err)
	}
	c.relayScan = true
	if p.connected {
		p.downTick = c.tick
	}
	p.connected = false
	p.established = false
	p.heard = false
	p.resetInflight()
	p.relayEpoch++
	return nil
}

func (c *Core) peer(name string) (*peer, error) {
	i, ok := c.cfg.Schema.SiteIndex(name)
	if !ok || i == c.self {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownPeer, name, c.cfg.Schema.Sites)
	}
	return c.peers[i], nil
}

// Applied tells the core that the application consumed every delivered
// message of stream up to seq; the site acks `applied` for them.
func (c *Core) Applied(id StreamID, seq uint64) error {
	s, ok := c.streams[id]
	if !ok {
		return fmt.Errorf("core: applied %s: %w", id, ErrUnknownStream)
	}
	if seq > s.delivered {
		return fmt.Errorf("core: applied %s %d: %w (delivered up to %d)", id, seq, ErrNotDelivered, s.delivered)
	}
	if seq <= s.appPos {
		return nil
	}
	s.appPos = seq
	var hlc HLC
	for len(s.unapplied) > 0 && s.unapplied[0].seq <= seq {
		hlc = s.unapplied[0].hlc
		s.unapplied = s.unapplied[1:]
	}
	c.setOwn(s, frontier.Applied, seq, hlc)
	return nil
}

// Report acknowledges stream up to seq at a custom level. Reports only
// raise: a lower seq than already reported is ignored.
func (c *Core) Report(id StreamID, level string, seq uint64) error {
	s, ok := c.streams[id]
	if !ok {
		return fmt.Errorf("core: report %s: %w", id, ErrUnknownStream)
	}
	li, ok := c.cfg.Schema.LevelIndex(level)
	if !ok || li < frontier.CustomLevelBase {
		return fmt.Errorf("core: report %s: %w: %q (custom levels: %v)", id, ErrUnknownLevel, level, c.cfg.Schema.Levels)
	}
	if seq > s.delivered {
		return fmt.Errorf("core: report %s %s %d: %w (delivered up to %d)", id, level, seq, ErrNotDelivered, s.delivered)
	}
	hlc := c.hlcAt(s, seq)
	for _, u := range s.unapplied {
		if u.seq == seq {
			hlc = u.hlc
		}
	}
	c.setOwn(s, li, seq, hlc)
	return nil
}

// SetPredicate defines or redefines a named predicate and returns its new
// version. Frontiers already released stay released under the versions that
// released them; the new version releases only what it holds for.
func (c *Core) SetPredicate(name, src string) (uint64, error) {
	if name == "" {
		return 0, fmt.Errorf("core: set predicate: %w: empty name", ErrUnknownPredicate)
	}
	if _, ok := frontier.Builtins[name]; ok {
		return 0, fmt.Errorf("core: set predicate %q: %w", name, ErrBuiltinPredicate)
	}
	version := uint64(1)
	if old, ok := c.preds[name]; ok {
		if old.transient {
			return 0, fmt.Errorf("core: set predicate %q: %w: a transient predicate has that name", name, ErrNamedPredicate)
		}
		version = old.version + 1
	}
	if err := c.definePredicate(name, src, version); err != nil {
		return 0, fmt.Errorf("core: set predicate %q: %w", name, err)
	}
	c.pendingDefs = append(c.pendingDefs, PredicateDef{Name: name, Source: src, Version: version})
	return version, nil
}

// DefineTransient defines a predicate that lives only while the driver
// needs it, such as one a client sent inline: it is neither persisted nor
// versioned (its source never changes), its frontier advances and stable
// time ask for no fsync (they are a function of the ack table, which only
// grows), and RemoveTransient forgets it. It is defined with an empty
// scope: it is evaluated on no stream until ScopeTransient adds stream
// names (or every stream) to its scope. Defining a name already defined as
// transient does nothing and returns false.
func (c *Core) DefineTransient(name string, p *frontier.Predicate) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("core: define predicate: %w: empty name", ErrUnknownPredicate)
	}
	if old, ok := c.preds[name]; ok {
		if old.transient {
			return false, nil
		}
		return false, fmt.Errorf("core: define predicate %q: %w", name, ErrNamedPredicate)
	}
	np := &pred{name: name, src: p.String(), version: 1, compiled: p, transient: true,
		persistedOnly: readsOnly(p, frontier.Persisted, c.nlevels)}
	c.add(np)
	c.preds[name] = np
	return true, nil
}

// RemoveTransient forgets a predicate DefineTransient defined: its
// frontiers and stable time are evaluated no more, and its index is free
// for the next definition. Removing an unknown name does nothing.
func (c *Core) RemoveTransient(name string) error {
	p, ok := c.preds[name]
	if !ok {
		return nil
	}
	if !p.transient {
		return fmt.Errorf("core: remove predicate %q: %w", name, ErrNamedPredicate)
	}
	delete(c.preds, name)
	if i, found := slices.BinarySearch(c.predNames, name); found {
		c.predNames = slices.Delete(c.predNames, i, i+1)
	}
	// Only streams in its scope hold releases of it.
	c.scopeStreams(p, func(s *stream) {
		if p.idx < len(s.rel) {
			s.rel[p.idx] = release{}
		}
	})
	if p.every {
		c.every = deletePred(c.every, p)
		c.everyChanged()
	}
	c.unlist(p)
	c.freeSlots = append(c.freeSlots, p.idx)
	c.scoping = slices.DeleteFunc(c.scoping, func(sc scoping) bool { return sc.p == p })
	return nil
}
