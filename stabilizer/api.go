package stabilizer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
)

// Appended is where Append put a message.
type Appended struct {
	Stream StreamID
	Seq    uint64
	HLC    HLC
}

// Append adds payload to this site's stream and returns its seq and HLC at
// once; the message becomes durable and is sent to every other site in the
// background. Wait for a predicate with WaitFor. The caller must not change
// payload afterwards. While the site's disk is full it fails wrapping
// ErrDiskFull.
func (n *Node) Append(ctx context.Context, stream string, payload []byte) (Appended, error) {
	if err := n.disk.admit(1); err != nil {
		return Appended{}, fmt.Errorf("stabilizer: append to %q: %w", stream, err)
	}
	var res Appended
	err := n.appendWait(ctx, func() error {
		seq, h, err := n.core.Append(stream, payload)
		res = Appended{Stream: StreamID{Origin: n.cfg.Site, Name: stream}, Seq: seq, HLC: h}
		return err
	})
	if err != nil {
		return Appended{}, fmt.Errorf("stabilizer: append to %q: %w", stream, err)
	}
	n.m.appends.Inc()
	return res, nil
}

// AppendBatch adds payloads, in order, to this site's stream: consecutive
// seqs, increasing HLCs, returned in order. Like Append it returns at once,
// before the messages are durable, but the whole batch costs one round trip
// to the node's loop where Append costs one per message. Either every
// payload is appended or, on error, none. The caller must not change the
// payloads afterwards.
func (n *Node) AppendBatch(ctx context.Context, stream string, payloads [][]byte) ([]Appended, error) {
	if len(payloads) == 0 {
		return nil, nil
	}
	if err := n.disk.admit(len(payloads)); err != nil {
		return nil, fmt.Errorf("stabilizer: append batch to %q: %w", stream, err)
	}
	out := make([]Appended, len(payloads))
	id := StreamID{Origin: n.cfg.Site, Name: stream}
	err := n.appendWait(ctx, func() error {
		for i, p := range payloads {
			// Only the first can fail: the stream name, joining, lost.
			seq, h, err := n.core.Append(stream, p)
			if err != nil {
				return err
			}
			out[i] = Appended{Stream: id, Seq: seq, HLC: h}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stabilizer: append batch to %q: %w", stream, err)
	}
	n.m.appends.Add(float64(len(out)))
	return out, nil
}

// Predicate checks a predicate given by name or as source and returns the
// name under which the core evaluates it ("=" + source for an inline one).
// It holds nothing: the calls that take a predicate (WaitFor, Frontier,
// StableTime) hold an inline one in the core while they run, scoped to
// the streams they need it on.
func (n *Node) Predicate(ctx context.Context, nameOrSource string) (string, error) {
	name, _, err := n.resolve(ctx, nameOrSource)
	return name, err
}

// PredicateSource returns the source of a named predicate, built-in or set
// at run time. Unlike Predicates it copies nothing: writes look their wait
// up with it every time.
func (n *Node) PredicateSource(name string) (string, bool) {
	if src := frontier.Builtins[name]; src != "" {
		return src, true
	}
	if isInline(name) {
		return "", false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.mu.defs {
		if d.Name == name {
			return d.Source, true
		}
	}
	// Before Start the core has not defined the configured ones yet.
	if src, ok := n.cfg.Predicates[name]; ok && !n.mu.started {
		return src, true
	}
	return "", false
}

// PredicateNames lists the named predicates, built-in first; inline ones
// are left out.
func (n *Node) PredicateNames(ctx context.Context) []string {
	var out []string
	for _, d := range n.Predicates(ctx) {
		out = append(out, d.Name)
	}
	return out
}

// Predicates lists the named predicates with their sources and versions,
// built-ins first. It reads the node's copy, kept current by Start and
// SetPredicate, so it costs no round trip through the loop (writes ask on
// every request).
func (n *Node) Predicates(context.Context) []PredicateDef {
	n.mu.Lock()
	defs := n.mu.defs
	n.mu.Unlock()
	out := make([]PredicateDef, 0, len(defs)+5)
	for _, name := range frontier.BuiltinNames() {
		out = append(out, PredicateDef{Name: name, Source: frontier.Builtins[name], Version: 1})
	}
	for _, d := range defs {
		if !isInline(d.Name) && frontier.Builtins[d.Name] == "" {
			out = append(out, d)
		}
	}
	return out
}

// SetPredicate defines or changes a named predicate while data flows and
// returns its new version. What earlier versions released stays released.
func (n *Node) SetPredicate(ctx context.Context, name, src string) (uint64, error) {
	if name == "" || isInline(name) {
		return 0, fmt.Errorf("stabilizer: set predicate: bad name %q", name)
	}
	var v uint64
	var err error
	if derr := n.do(ctx, func() {
		if v, err = n.core.SetPredicate(name, src); err == nil {
			n.setDefs(n.core.Predicates())
		}
	}); derr != nil {
		return 0, derr
	}
	return v, err
}

// setDefs keeps the copy of the core's run-time predicates Predicates reads.
func (n *Node) setDefs(defs []PredicateDef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.defs = defs
}

// Frontier returns the frontier of a predicate (name or source) on a
// stream, as last published. An inline predicate is evaluated on the
// streams of id's name from then on while the core holds it: the first
// read on a name waits for the Ready that carries that evaluation, so
// that it is not the zero of a predicate never evaluated there.
func (n *Node) Frontier(ctx context.Context, id StreamID, predicate string) (FrontierState, error) {
	name, sc, release, err := n.use(ctx, predicate, on{stream: id.Name})
	if err != nil {
		return FrontierState{}, err
	}
	defer release()
	if err := n.waitEvaluated(ctx, sc); err != nil {
		return FrontierState{}, err
	}
	f := n.pub.frontier(fkey{id, name})
	f.Predicate = predicate
	return f, nil
}

// StableTime returns the global stable time under a predicate: every
// message of every stream, from any origin, with an HLC at or below it is
// behind its stream's frontier. An inline predicate is evaluated on every
// stream from then on while the core holds it, whatever streams it was
// used on before: its stable time speaks of all of them, as a named
// one's does (so the KV's snapshot reads, which ask for an inline one,
// are bounded by every stream at the site, not by "kv" alone).
func (n *Node) StableTime(ctx context.Context, predicate string) (HLC, error) {
	name, sc, release, err := n.use(ctx, predicate, on{every: true})
	if err != nil {
		return HLC{}, err
	}
	defer release()
	if err := n.waitEvaluated(ctx, sc); err != nil {
		return HLC{}, err
	}
	return n.pub.stableTime(name), nil
}

// WaitError is returned by WaitFor when ctx ends first. It says what was
// awaited and how far it got.
type WaitError struct {
	Predicate string
	Stream    StreamID
	Seq       uint64
	Frontier  uint64
	Waited    time.Duration
	Acks      string // the levels the predicate reads, per site
	Err       error  // ctx.Err()
}

func (e *WaitError) Error() string {
	s := fmt.Sprintf("timeout after %s waiting for %q on %s seq %d: frontier %d",
		e.Waited.Round(time.Millisecond), e.Predicate, e.Stream, e.Seq, e.Frontier)
	if e.Acks != "" {
		s += " (" + e.Acks + ")"
	}
	return s
}

func (e *WaitError) Unwrap() error { return e.Err }

// WaitFor blocks until the frontier of predicate (a name or source) on the
// stream covers seq. An inline predicate is evaluated on the streams of
// id's name from then on while the core holds it.
func (n *Node) WaitFor(ctx context.Context, id StreamID, predicate string, seq uint64) error {
	start := time.Now()
	name, _, release, err := n.use(ctx, predicate, on{stream: id.Name})
	if err != nil {
		return err
	}
	defer release()
	k := fkey{id, name}
	ch, w := n.pub.wait(k, seq)
	if ch == nil {
		return nil
	}
	// The advance may be in a Ready the completer holds back because no
	// write waited for it when it was applied.
	select {
	case n.recheck <- struct{}{}:
	default:
	}
	select {
	case <-ch:
		n.m.waitSeconds.WithLabelValues(predicateLabel(predicate)).Observe(time.Since(start).Seconds())
		return nil
	case <-n.done:
		n.pub.cancel(k, w)
		return ErrStopped
	case <-ctx.Done():
		n.pub.cancel(k, w)
		return n.waitError(id, predicate, name, seq, time.Since(start), ctx.Err())
	}
}

func predicateLabel(p string) string {
	if frontier.Builtins[p] != "" || !strings.ContainsAny(p, "()") {
		return p
	}
	return "inline"
}

func (n *Node) waitError(id StreamID, predicate, name string, seq uint64, waited time.Duration, cause error) error {
	e := &WaitError{Predicate: predicate, Stream: id, Seq: seq, Waited: waited, Err: cause,
		Frontier: n.pub.frontier(fkey{id, name}).Seq}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	acks, err := n.AckTable(ctx, id)
	if err != nil {
		return e
	}
	var parts []string
	for _, l := range n.PredicateAcks(ctx, name, acks) {
		parts = append(parts, l.String())
	}
	e.Acks = strings.Join(parts, "; ")
	return e
}

// LevelAcks is one ack level a predicate reads, with every site's ack at
// it, in the schema's site order.
type LevelAcks struct {
	Level string
	Sites []string
	Seqs  []uint64
}

// String reads "persisted: us-east-1=812 eu-west-1=790".
func (l LevelAcks) String() string {
	row := make([]string, len(l.Sites))
	for i, s := range l.Sites {
		row[i] = fmt.Sprintf("%s=%d", s, l.Seqs[i])
	}
	return l.Level + ": " + strings.Join(row, " ")
}

// Below returns the sites whose ack at the level is below seq, as
// "site=ack": what a frontier stuck short of seq waits on.
func (l LevelAcks) Below(seq uint64) []string {
	var out []string
	for i, s := range l.Sites {
		if l.Seqs[i] < seq {
			out = append(out, fmt.Sprintf("%s=%d", s, l.Seqs[i]))
		}
	}
	return out
}

// PredicateAcks picks out of a stream's flat ack table (AckTable,
// StreamStatus.Acks) the levels a predicate (a name or a source) reads,
// each with every site's ack: how far what it waits on got, as WaitError
// prints it. Every level when the predicate is not known.
func (n *Node) PredicateAcks(ctx context.Context, predicate string, acks []uint64) []LevelAcks {
	p, err := frontier.Compile(strings.TrimPrefix(predicate, "="), n.cfg.Schema)
	if err != nil {
		for _, d := range n.Predicates(ctx) {
			if d.Name == predicate {
				p, _ = frontier.Compile(d.Source, n.cfg.Schema)
			}
		}
	}
	sites := n.cfg.Schema.Sites
	var out []LevelAcks
	for l, level := range n.cfg.Schema.LevelNames() {
		if (p != nil && !p.ReadsLevel(l)) || len(acks) < (l+1)*len(sites) {
			continue
		}
		out = append(out, LevelAcks{Level: level, Sites: sites, Seqs: slices.Clone(acks[l*len(sites) : (l+1)*len(sites)])})
	}
	return out
}

// AckTable returns a copy of a stream's ack table as this site knows it,
// flat as frontier.Predicate.Eval takes it.
func (n *Node) AckTable(ctx context.Context, id StreamID) ([]uint64, error) {
	var acks []uint64
	var err error
	if derr := n.do(ctx, func() { acks, err = n.core.Acks(id) }); derr != nil {
		return nil, derr
	}
	return acks, err
}

// StreamStatus describes one stream at this site.
type StreamStatus struct {
	Stream    StreamID
	Head      uint64 // appended (own) or received in order (remote)
	Persisted uint64
	// Truncated is the highest seq dropped from this site's log (0:
	// none): Truncated+1..Persisted can be read back.
	Truncated uint64
	// Behind is set when the origin dropped entries this site lacks: it
	// catches up from a snapshot (state transfer).
	Behind    bool
	Acks      []uint64 // flat, as AckTable
	Frontiers map[string]FrontierState
}

// Streams describes every stream this site knows, with its ack table and
// the frontiers of every named predicate.
func (n *Node) Streams(ctx context.Context) ([]StreamStatus, error) {
	var out []StreamStatus
	preds := n.PredicateNames(ctx)
	err := n.do(ctx, func() {
		behind := map[StreamID]bool{}
		for _, b := range n.core.Behind() {
			behind[b.Stream] = true
		}
		defer func() {
			for i := range out {
				out[i].Behind = behind[out[i].Stream]
			}
		}()
		for _, id := range n.core.Streams() {
			st := StreamStatus{Stream: id, Frontiers: map[string]FrontierState{}}
			st.Head, st.Persisted, _ = n.core.Head(id)
			st.Acks, _ = n.core.Acks(id)
			st.Truncated, _, _ = n.core.Floor(id)
			out = append(out, st)
		}
	})
	for i := range out {
		for _, p := range preds {
			out[i].Frontiers[p] = n.pub.frontier(fkey{out[i].Stream, p})
		}
	}
	return out, err
}

// WatchFrontiers returns a Watch of every frontier advance for which keep
// returns true (nil: all), buffered by buf.
func (n *Node) WatchFrontiers(buf int, keep func(FrontierAdvance) bool) *Watch {
	c := make(chan FrontierAdvance, max(buf, 1))
	w := &Watch{C: c, c: c, p: &n.pub, filter: keep}
	n.pub.mu.Lock()
	defer n.pub.mu.Unlock()
	if n.pub.closed {
		w.closeLocked()
		return w
	}
	n.pub.watchers[w] = struct{}{}
	return w
}

// Report acknowledges a custom level for a stream up to seq, as an
// application that verified, downloaded or otherwise handled its messages.
func (n *Node) Report(ctx context.Context, id StreamID, level string, seq uint64) error {
	var err error
	if derr := n.do(ctx, func() { err = n.core.Report(id, level, seq) }); derr != nil {
		return derr
	}
	return err
}

// Connected lists the peers all of whose connections are up.
func (n *Node) Connected() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]bool{}
	for _, s := range n.cfg.Schema.Sites {
		if s != n.cfg.Site {
			out[s] = n.mu.planes[s] == allPlanes
		}
	}
	return out
}

// ReadEntry returns one entry of a stream as this site persisted it, for
// an application that serves payloads from the log rather than copying
// them into its Namespace (file chunks). It fails wrapping ErrNotFound
// when the site does not hold the seq durably (yet).
func (n *Node) ReadEntry(ctx context.Context, id StreamID, seq uint64) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	if n.isBulk(id.Name) {
		ents, err := n.readBulk(id, seq, seq, 0)
		if err != nil {
			return Entry{}, fmt.Errorf("stabilizer: read %v seq %d: %w", id, seq, err)
		}
		if len(ents) == 0 {
			return Entry{}, fmt.Errorf("stabilizer: read %v seq %d: %w", id, seq, ErrNotFound)
		}
		return ents[0], nil
	}
	msgs, err := n.store.ReadRange(id.Origin, id.Name, seq, 1, 0)
	if err != nil {
		return Entry{}, fmt.Errorf("stabilizer: read %v seq %d: %w", id, seq, err)
	}
	if len(msgs) == 0 || msgs[0].Seq != seq {
		return Entry{}, fmt.Errorf("stabilizer: read %v seq %d: %w", id, seq, ErrNotFound)
	}
	return fromStored(id, &msgs[0])
}
