package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// ErrHistoryPruned: a read asked for a time, or a stability, older than
// what the site kept of the key's versions (Retention.KeepVersions,
// KeepAge). The error names the key, the time and the horizon.
var ErrHistoryPruned = errors.New("kv: history pruned")

// Retention says what a Store keeps of its log and of each key's history;
// zero fields take the defaults. The state (the versions in the
// namespace) is what serves reads: the log is needed only by the sites
// that have not applied it yet, and a key's older versions only by reads
// of the past.
type Retention struct {
	// LogLag is how many entries of each origin's kv stream this site keeps
	// in its log behind what every site applied. Default 0.
	LogLag int
	// TruncateInterval is how often the log is truncated. Default 1s.
	TruncateInterval time.Duration
	// MaxLagTime is how long a peer may stay disconnected before the log is
	// truncated past what it applied, up to what the other sites applied:
	// the peer then catches up by state transfer. Default 1h; negative
	// (-1): never, the log grows while a peer is down.
	MaxLagTime time.Duration
	// KeepVersions is how many versions of each key are kept, counting
	// from the newest, besides the ones every read still needs (see
	// prune). Default 1.
	KeepVersions int
	// KeepAge keeps the versions younger than it too (by the wall time of
	// their HLC). Default 0.
	KeepAge time.Duration
	// PruneInterval is the time between two steps of the pruner, each of
	// which looks at the next pruneStepKeys versions. Default 1s.
	PruneInterval time.Duration
	// Now is the clock for KeepAge and MaxLagTime. Default time.Now.
	Now func() time.Time
}

// Defaults of zero Retention fields.
const (
	DefaultTruncateInterval = time.Second
	DefaultMaxLagTime       = time.Hour
	DefaultKeepVersions     = 1
	DefaultPruneInterval    = time.Second
)

// pruneStepKeys bounds a step of the pruner: it stops at the first key
// after this many versions, or before deleting this many of one key.
const pruneStepKeys = 2000

// settledPredicate holds for a version once every site applied every
// write up to its HLC, from every origin.
const settledPredicate = "min(applied(sites))"

func (r *Retention) validate(bad func(format string, args ...any)) {
	if r.LogLag < 0 {
		bad("LogLag: %d is negative", r.LogLag)
	}
	if r.TruncateInterval < 0 {
		bad("TruncateInterval: %v is negative", r.TruncateInterval)
	}
	if r.KeepVersions < 0 {
		bad("KeepVersions: %d is negative", r.KeepVersions)
	}
	if r.KeepAge < 0 {
		bad("KeepAge: %v is negative", r.KeepAge)
	}
	if r.PruneInterval < 0 {
		bad("PruneInterval: %v is negative", r.PruneInterval)
	}
}

func (r *Retention) setDefaults() {
	if r.TruncateInterval == 0 {
		r.TruncateInterval = DefaultTruncateInterval
	}
	if r.MaxLagTime == 0 {
		r.MaxLagTime = DefaultMaxLagTime
	}
	if r.KeepVersions == 0 {
		r.KeepVersions = DefaultKeepVersions
	}
	if r.PruneInterval == 0 {
		r.PruneInterval = DefaultPruneInterval
	}
	if r.Now == nil {
		r.Now = time.Now
	}
}

// retainer is the Store's background work: it truncates every origin's kv
// stream in this site's log and prunes the keys' older versions. Its two
// loops own their fields; a test runs their steps itself, on a store it
// did not Start.
type retainer struct {
	s   *Store
	cfg Retention
	log hclog.Logger
	m   retentionMetrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		started, closed bool
	}

	// The truncation loop's.
	downSince map[string]time.Time // peers seen disconnected, since when
	refused   map[stabilizer.StreamID]bool
	lastErr   string // of the last failed step, logged once

	// The pruner's.
	cursor    []byte         // where the next step starts; nil: a new pass
	passStart stabilizer.HLC // the settled time when the current pass began
	// checked: every settled version at or below it was looked at as a
	// possible lone tombstone in the last whole pass.
	checked  stabilizer.HLC
	pruneErr string
}

type retentionMetrics struct {
	truncated, retained *prometheus.GaugeVec
	pruned, passes      prometheus.Counter
}

func newRetainer(s *Store, cfg Retention, reg prometheus.Registerer) *retainer {
	r := &retainer{s: s, cfg: cfg, log: s.log, downSince: map[string]time.Time{}, refused: map[stabilizer.StreamID]bool{}}
	r.m = retentionMetrics{
		truncated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kv_log_truncated_seq",
			Help: "The highest seq of the origin's kv stream dropped from this site's log."}, []string{"origin"}),
		retained: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kv_log_retained_entries",
			Help: "Entries of the origin's kv stream this site's log holds: its head less its truncation point."}, []string{"origin"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "kv_versions_pruned_total",
			Help: "Older versions of keys, and settled deletions, removed from this site's state."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "kv_prune_passes_total",
			Help: "Whole passes of the pruner over this site's keys."}),
	}
	if reg != nil {
		reg.MustRegister(r.m.truncated, r.m.retained, r.m.pruned, r.m.passes)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Start begins the store's background work, truncating the log and
// pruning the keys' history: call it once the node runs.
func (s *Store) Start() error { return s.ret.start() }

// Close stops the store's background work and waits for it; call it
// before closing the node. It is idempotent.
func (s *Store) Close() error { return s.ret.close() }

func (r *retainer) start() error {
	r.mu.Lock()
	if r.mu.closed || r.mu.started {
		r.mu.Unlock()
		return errors.New("kv: start: already started or closed")
	}
	r.mu.started = true
	r.mu.Unlock()
	r.goBackground(r.truncateLoop)
	r.goBackground(r.pruneLoop)
	return nil
}

func (r *retainer) close() error {
	r.mu.Lock()
	r.mu.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// goBackground starts an owned goroutine; after close began it runs
// nothing.
func (r *retainer) goBackground(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}

func (r *retainer) truncateLoop() {
	t := time.NewTicker(r.cfg.TruncateInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.lastErr = r.logOnce(r.truncate(r.ctx), r.lastErr, "log truncation failed")
	}
}

func (r *retainer) pruneLoop() {
	// Held while the store runs, so that every step finds it evaluated.
	if release, err := r.s.node.Hold(r.ctx, settledPredicate); err == nil {
		defer release()
	} else if r.ctx.Err() == nil {
		r.log.Warn("cannot hold the predicate of settled versions; each prune step asks anew", "predicate", settledPredicate, "error", err)
	}
	t := time.NewTicker(r.cfg.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		_, err := r.pruneStep(r.ctx)
		r.pruneErr = r.logOnce(err, r.pruneErr, "pruning versions failed")
	}
}

// logOnce logs err unless it says what the last one did, and returns what
// to compare the next with. Errors once the store closes are not news.
func (r *retainer) logOnce(err error, last, msg string) string {
	if err == nil || r.ctx.Err() != nil {
		return ""
	}
	if err.Error() != last {
		r.log.Warn(msg+"; trying again", "error", err)
	}
	return err.Error()
}

// Log truncation.
//
// Every origin's kv stream is truncated at this site up to what every site
// applied, less LogLag: the state, not the log, serves reads, and a site
// needs the log only for what it has not applied. The node never truncates
// past what this site applied, nor past what a peer persisted. A peer
// disconnected for longer than MaxLagTime stops counting: the log is then
// truncated up to what the other sites applied, beyond that peer, which
// catches up by state transfer when it comes back (the node refuses this
// for a stream whose state cannot be transferred; the refusal is logged
// once and the log waits for the peer).

// truncate truncates every origin's kv stream once, and sets the metrics.
func (r *retainer) truncate(ctx context.Context) error {
	lagging := r.lagging(r.cfg.Now())
	streams, err := r.s.node.Streams(ctx)
	if err != nil {
		return fmt.Errorf("kv: truncate: %w", err)
	}
	var errs []error
	for _, st := range streams {
		if st.Stream.Name != Stream {
			continue
		}
		floor, err := r.truncateStream(ctx, &st, lagging)
		if err != nil {
			errs = append(errs, err)
		}
		r.m.truncated.WithLabelValues(st.Stream.Origin).Set(float64(floor))
		r.m.retained.WithLabelValues(st.Stream.Origin).Set(float64(st.Head - min(floor, st.Head)))
	}
	return errors.Join(errs...)
}

// truncateStream truncates one stream and returns its truncation point.
func (r *retainer) truncateStream(ctx context.Context, st *stabilizer.StreamStatus, lagging []bool) (uint64, error) {
	all, others := truncationPoints(st.Acks, len(lagging), uint64(r.cfg.LogLag), lagging)
	floor := st.Truncated
	if others > max(all, floor) {
		f, err := r.s.node.Truncate(ctx, st.Stream, others, stabilizer.TruncateOptions{BeyondPeers: true})
		switch {
		case err == nil:
			floor = f
			delete(r.refused, st.Stream)
		case ctx.Err() != nil:
			return floor, err
		case !r.refused[st.Stream]:
			r.refused[st.Stream] = true
			r.log.Warn("a peer is down for longer than max_lag_time, and the log cannot be truncated beyond it: it grows until the peer is back",
				"stream", st.Stream.String(), "upto", others, "error", err)
		}
	}
	if all > floor {
		f, err := r.s.node.Truncate(ctx, st.Stream, all, stabilizer.TruncateOptions{})
		if err != nil {
			return floor, fmt.Errorf("kv: truncate %s up to %d: %w", st.Stream, all, err)
		}
		floor = f
	}
	return floor, nil
}

// lagging says, by site index, which peers have been disconnected for
// longer than MaxLagTime, as far as the polls of Node.Connected saw.
func (r *retainer) lagging(now time.Time) []bool {
	sites := r.s.node.Schema().Sites
	out := make([]bool, len(sites))
	if r.cfg.MaxLagTime < 0 {
		return out
	}
	conn := r.s.node.Connected()
	for i, site := range sites {
		up, peer := conn[site]
		switch {
		case !peer:
		case up:
			delete(r.downSince, site)
		default:
			since, ok := r.downSince[site]
			if !ok {
				r.downSince[site] = now
				continue
			}
			out[i] = now.Sub(since) > r.cfg.MaxLagTime
		}
	}
	return out
}

// truncationPoints returns, from a stream's flat ack table over n sites,
// the least seq every site applied and the least the sites not lagging
// applied, each less lag.
func truncationPoints(acks []uint64, n int, lag uint64, lagging []bool) (all, others uint64) {
	lo := frontier.Applied * n
	if n == 0 || len(acks) < lo+n || len(lagging) < n {
		return 0, 0
	}
	all, others = math.MaxUint64, math.MaxUint64
	for i, a := range acks[lo : lo+n] {
		all = min(all, a)
		if !lagging[i] {
			others = min(others, a)
		}
	}
	sub := func(x uint64) uint64 {
		if x < lag {
			return 0
		}
		return x - lag
	}
	return sub(all), sub(others)
}

// Version pruning.
//
// A version is settled once its HLC is at or below the stable time of
// min(applied(sites)): every site applied every write up to that time, from
// every origin, so no version at or below it will ever arrive again at any
// site. For every key the pruner keeps every version newer than the key's
// newest settled version, that version itself (with the versions of equal
// HLC: last writer wins breaks such ties by origin, so they stay
// together), and older ones only while within KeepVersions of the newest
// or younger than KeepAge; never part of a set of equal HLCs.
//
// Why reads stay right:
//   - latest, quorum and Scan read each key's winner, which is never
//     pruned (a settled deletion is the one exception below, and it reads
//     as absence anyway).
//   - stable=P, for any P over received, persisted and applied: each of
//     those levels is at or above applied at every site, so P's frontier
//     covers the settled version, and the newest P-stable version is it or
//     a newer one, all kept. A read under a custom level may find no
//     stable version among the kept ones: it then fails with
//     ErrHistoryPruned rather than say "not found".
//   - snapshot=P reads at a time at or above the settled one for the same
//     reason; a read at T finds the right version whenever a kept version
//     is at or below T (every pruned one is older than every kept one).
//     When none is, and versions were pruned, the answer is gone: each
//     pruned key keeps a marker of its horizon, the time from which what
//     is kept answers every read, and a read below it fails with
//     ErrHistoryPruned naming the key, the time and the horizon.
//
// A settled deletion that would be the key's oldest kept version, alone at
// its HLC, goes too: nothing older is kept to be hidden, and no older
// version can arrive. The horizon is then the deletion's time (a read at
// or after it rightly finds nothing), and the marker also names the
// deletion, so that a stable read that finds nothing newer can tell
// whether the deletion itself was stable under its predicate. The marker
// outlives the key's versions: it is all that says that a read of the
// past cannot be answered. To spare reading a value per key, a deletion is
// looked for only where this visit pruned versions, or where the settled
// version is newer than what the last whole pass looked at.
//
// Pruning commits without an fsync (CommitNoSync), like apply: a pruned
// version is superseded by kept ones, so a crash that takes the batch back
// only brings back versions that the next pass prunes again, with their
// marker in the same batch, never a marker without its deletions (the
// site's log is one sequence).

// pruneStep prunes from the cursor on, up to pruneStepKeys versions, and
// reports whether it finished a pass over the namespace.
func (r *retainer) pruneStep(ctx context.Context) (passDone bool, err error) {
	settled, err := r.s.node.StableTime(ctx, settledPredicate)
	if err != nil {
		return false, fmt.Errorf("kv: prune: stable time of %s: %w", settledPredicate, err)
	}
	if settled.IsZero() {
		return false, nil // nothing is settled yet, so nothing can go
	}
	if r.cursor == nil {
		r.passStart = settled
	}
	now := r.cfg.Now()
	ns := r.s.state.ns
	b := ns.NewBatch()
	var (
		plan     keyPlan
		prefix   []byte // of the current key
		key      string
		cand     []byte // storage key of the settled version, while it may be a lone deletion
		visited  int
		deleted  int
		next     []byte // where the next step starts
		pruneErr error
	)
	// finish ends the visit of the current key: the lone deletion, if
	// the visit saw all of the key's versions (whole), then the marker.
	finish := func(whole bool) error {
		if prefix == nil {
			return nil
		}
		var tomb *Version
		if whole && plan.loneSettled() && cand != nil && (plan.dropped > 0 || r.checked.Less(plan.settledHLC)) {
			v, err := r.tombstone(key, cand)
			if err != nil {
				return err
			}
			if v != nil {
				b.Delete(cand)
				deleted++
				tomb = v
			}
		}
		if plan.dropped == 0 && tomb == nil {
			return nil
		}
		horizon := plan.lastKept
		if tomb != nil {
			horizon = tomb.HLC
		}
		// Its own value: the batch keeps it until it commits.
		b.Set(markerKey(prefix), appendMarker(nil, horizon, tomb))
		return nil
	}
	start := r.cursor
	if start == nil {
		start = []byte{prefixVersion}
	}
	err = ns.ScanKeys(start, []byte{prefixVersion + 1}, func(k []byte) ([]byte, error) {
		name, plen, ok := splitVersionKey(k)
		if !ok || len(k) < plen+hlcLen {
			return nil, fmt.Errorf("kv: prune: corrupt version key %q", k)
		}
		if prefix == nil || !bytes.Equal(k[:plen], prefix) {
			if pruneErr = finish(true); pruneErr != nil {
				return nil, errStop
			}
			if visited >= pruneStepKeys {
				next = bytes.Clone(k[:plen])
				return nil, errStop
			}
			prefix, key, cand = append(prefix[:0], k[:plen]...), name, nil
			plan = keyPlan{settled: settled, keepVersions: r.cfg.KeepVersions, keepAge: r.cfg.KeepAge, now: now}
		}
		visited++
		h := invertedHLC(k[plen:])
		drop := plan.next(h)
		if plan.settling() {
			cand = bytes.Clone(k)
		}
		if !drop {
			return nil, nil
		}
		if deleted >= pruneStepKeys {
			// Mid-key, before a version it would delete: the next step
			// visits the key again, from its newest version.
			plan.dropped--
			if pruneErr = finish(false); pruneErr != nil {
				return nil, errStop
			}
			next = bytes.Clone(prefix)
			prefix = nil
			return nil, errStop
		}
		b.Delete(k)
		deleted++
		return nil, nil
	})
	if err == nil {
		err = finish(true)
	} else if errors.Is(err, errStop) {
		err = pruneErr
	}
	if err != nil {
		return false, fmt.Errorf("kv: prune: %w", err)
	}
	if !b.Empty() {
		if err := b.CommitNoSync(); err != nil {
			return false, fmt.Errorf("kv: prune: %w", err)
		}
		r.m.pruned.Add(float64(deleted))
	}
	r.cursor = next
	if next == nil {
		r.checked = r.passStart
		r.m.passes.Inc()
		return true, nil
	}
	return false, nil
}

// tombstone returns the version stored under k if it is a deletion.
func (r *retainer) tombstone(key string, k []byte) (*Version, error) {
	val, err := r.s.state.ns.Get(k)
	if errors.Is(err, stabilizer.ErrNotFound) {
		return nil, nil // gone since the scan saw it
	}
	if err != nil {
		return nil, err
	}
	v, err := decodeVersion(key, val)
	if err != nil || !v.Deleted {
		return nil, err
	}
	return &v, nil
}

// keyPlan decides, for the versions of one key seen newest first, which the
// pruner deletes. It does no I/O.
type keyPlan struct {
	settled      stabilizer.HLC
	keepVersions int
	keepAge      time.Duration
	now          time.Time

	seen       int            // versions passed to next
	phase      planPhase      //
	settledHLC stabilizer.HLC // of the newest settled version
	settledN   int            // versions at settledHLC
	lastKept   stabilizer.HLC // the oldest kept so far
	dropped    int
}

type planPhase uint8

const (
	phaseNewer   planPhase = iota // newer than any settled version: kept
	phaseSettled                  // at the newest settled HLC: kept
	phaseOlder                    // older, kept by KeepVersions or KeepAge
	phaseDrop                     // older and not kept: this and every older one go
)

// next takes the key's next version (its HLC), newest first, and reports
// whether to delete it.
func (p *keyPlan) next(h stabilizer.HLC) bool {
	i := p.seen
	p.seen++
	switch {
	case p.phase == phaseDrop:
		p.dropped++
		return true
	case p.phase == phaseNewer && p.settled.Less(h):
		p.lastKept = h
		return false
	case p.phase == phaseNewer:
		p.phase, p.settledHLC, p.settledN, p.lastKept = phaseSettled, h, 1, h
		return false
	case h == p.lastKept: // never split equal HLCs
		if p.phase == phaseSettled {
			p.settledN++
		}
		return false
	case i < p.keepVersions || p.now.Sub(time.Unix(0, h.Wall)) < p.keepAge:
		p.phase, p.lastKept = phaseOlder, h
		return false
	default:
		p.phase = phaseDrop
		p.dropped++
		return true
	}
}

// settling reports whether the version just taken is the newest settled
// one, alone at its HLC so far.
func (p *keyPlan) settling() bool { return p.phase == phaseSettled && p.settledN == 1 }

// loneSettled reports whether the newest settled version is alone at its
// HLC and the oldest version kept: a deletion there may go too.
func (p *keyPlan) loneSettled() bool {
	return p.settledN == 1 && (p.phase == phaseSettled || p.phase == phaseDrop && p.lastKept == p.settledHLC)
}

// Markers of pruned keys.

// hlcLen is the length of an HLC in a key or a marker.
const hlcLen = 12

// markerKey is the key of the marker of the key whose versionPrefix is
// prefix: the same escaped key under prefixPruned.
func markerKey(prefix []byte) []byte {
	k := bytes.Clone(prefix)
	k[0] = prefixPruned
	return k
}

// appendMarker appends a marker: the horizon's HLC, and the seq and origin
// of the deletion dropped at the horizon, if one was.
func appendMarker(b []byte, horizon stabilizer.HLC, tomb *Version) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(horizon.Wall))
	b = binary.BigEndian.AppendUint32(b, horizon.Logical)
	if tomb != nil {
		b = binary.AppendUvarint(b, tomb.Seq)
		b = append(b, tomb.Origin...)
	}
	return b
}

// marker is what a key's marker says.
type marker struct {
	horizon stabilizer.HLC
	tomb    bool // a deletion at the horizon was dropped:
	origin  string
	seq     uint64
}

func decodeMarker(key string, b []byte) (marker, error) {
	if len(b) < hlcLen {
		return marker{}, fmt.Errorf("kv: corrupt pruning marker of %q", key)
	}
	m := marker{horizon: stabilizer.HLC{Wall: int64(binary.BigEndian.Uint64(b)), Logical: binary.BigEndian.Uint32(b[8:])}}
	if b = b[hlcLen:]; len(b) > 0 {
		seq, rest, ok := uvarint(b)
		if !ok {
			return marker{}, fmt.Errorf("kv: corrupt pruning marker of %q", key)
		}
		m.tomb, m.seq, m.origin = true, seq, string(rest)
	}
	return m, nil
}

// marker returns key's marker, if versions of it were pruned.
func (s *state) marker(key string) (marker, bool, error) {
	b, err := s.ns.Get(markerKey(versionPrefix(key)))
	if errors.Is(err, stabilizer.ErrNotFound) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, fmt.Errorf("kv: read the pruning marker of %q: %w", key, err)
	}
	m, err := decodeMarker(key, b)
	return m, err == nil, err
}

// prunedAt is called when a read at t found no version of key at or below
// t: it fails if versions of key older than its horizon were pruned and t
// is below it, since the answer was one of them.
func (s *state) prunedAt(key string, t stabilizer.HLC) error {
	m, ok, err := s.marker(key)
	if err != nil || !ok || !t.Less(m.horizon) {
		return err
	}
	return fmt.Errorf("%w: %q at %v: the versions before %v are pruned at this site", ErrHistoryPruned, key, t, m.horizon)
}

// stablePruned is called when a stable read under p found no stable
// version of key: unless nothing was pruned, or the deletion dropped at
// the horizon is itself stable under p (then "not found" is the answer),
// the answer is among the pruned versions.
func (s *Store) stablePruned(ctx context.Context, key, p string) error {
	m, ok, err := s.state.marker(key)
	if err != nil || !ok {
		return err
	}
	if m.tomb {
		f, err := s.node.Frontier(ctx, stabilizer.StreamID{Origin: m.origin, Name: Stream}, p)
		if err != nil {
			return err
		}
		if f.Seq >= m.seq {
			return nil
		}
	}
	return fmt.Errorf("%w: %q under %q: no version kept at this site is stable yet, and the versions before %v are pruned",
		ErrHistoryPruned, key, p, m.horizon)
}

// invertedHLC decodes an HLC as appendInvertedHLC stored it.
func invertedHLC(b []byte) stabilizer.HLC {
	return stabilizer.HLC{Wall: int64(^binary.BigEndian.Uint64(b) ^ 1<<63), Logical: ^binary.BigEndian.Uint32(b[8:])}
}
