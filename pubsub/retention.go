package pubsub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// Retention at a site: every RetentionEvery the loop goes over the topics
// the site knows and drops, per origin, a prefix of what it stores:
//
//  1. what the policy lets go: under interest, up to the lowest floor of
//     the topic's durable subscriptions (their replicated positions, every
//     site's merged) and of the subscriptions live here; under workqueue,
//     up to the floor of its durable subscription. Only a floor counts
//     (the contiguous acked prefix), not the seqs acked above it.
//  2. what is older than max_age (HLCs grow along an origin's stream, so
//     that is a prefix too);
//  3. then, while the topic is past max_messages or max_bytes, its oldest
//     message by (HLC, origin) across origins.
//
// Each origin's drop is one range deletion plus its floor record, all of
// a topic's origins in one batch: the floor under seq 0 is how readers
// tell that what they wanted next is gone (store.read). Only this loop
// deletes messages and only the applier adds them, above what it added
// before, so neither waits for the other.

// maxDropsPerPass bounds what one pass drops of a topic before it commits
// and goes on with the next pass: a pass after a long outage stays short.
const maxDropsPerPass = 1 << 16

// Retention reads an origin's messages minChunk at a time at first, twice
// as many each time up to maxChunk: a pass that finds nothing to drop
// reads few messages (their values come along, up to MaxMessageBytes
// each), one that drops many reads them in a few scans.
const (
	minChunk = 8
	maxChunk = 1024
)

// retainLoop applies retention every RetentionEvery, and when a test asks
// (retainNow).
func (b *Broker) retainLoop() {
	b.passes(b.cfg.RetentionEvery, b.retainReq, b.retain, "retention")
}

// retainNow runs a pass of retention and waits for it.
func (b *Broker) retainNow(ctx context.Context) error { return b.ask(ctx, b.retainReq) }

// retain applies every known topic's retention to what this site stores.
func (b *Broker) retain(ctx context.Context) error {
	b.mu.Lock()
	defs := make([]topicRecord, 0, len(b.mu.topics))
	for _, t := range b.mu.topics {
		defs = append(defs, t.def)
	}
	b.mu.Unlock()
	var errs []error
	for _, def := range defs {
		for ctx.Err() == nil {
			more, err := b.retainTopic(ctx, def.Topic)
			if err != nil {
				errs = append(errs, fmt.Errorf("pubsub: retention of %q: %w", def.Name, err))
			}
			if err != nil || !more {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// originReader reads one origin's stored messages of a topic in order, a
// chunk at a time, and collects what retention drops of them.
type originReader struct {
	s      *store
	topic  string
	origin string
	floor  floorRecord // as stored before this pass
	after  uint64      // the last seq read
	buf    []meta      // read, not yet decided
	eof    bool        // nothing more stored beyond buf
	chunk  int         // how many the last read asked for
	drop   floorRecord // the floor with this pass's drops
	err    error
}

// peek returns the first undecided message, reading more when needed.
func (r *originReader) peek() (meta, bool) {
	if len(r.buf) == 0 && !r.eof && r.err == nil {
		r.chunk = min(max(2*r.chunk, minChunk), maxChunk)
		r.buf, r.err = r.s.metas(r.topic, r.origin, r.after, r.chunk)
		if len(r.buf) < r.chunk {
			r.eof = true
		}
		if len(r.buf) > 0 {
			r.after = r.buf[len(r.buf)-1].Seq
		}
	}
	if len(r.buf) == 0 {
		return meta{}, false
	}
	return r.buf[0], true
}

// take drops the message peek returned.
func (r *originReader) take() meta {
	m := r.buf[0]
	r.buf = r.buf[1:]
	r.drop.Seq = m.Seq
	r.drop.Messages++
	r.drop.Bytes += m.Size
	return m
}

// retainTopic drops what the topic's retention lets go at this site, up to
// maxDropsPerPass messages; more says it stopped there.
func (b *Broker) retainTopic(ctx context.Context, t Topic) (more bool, err error) {
	stats := b.store.stats(t.Name)
	if len(stats) == 0 {
		return false, nil
	}
	r := t.Retention
	policy := canonicalPolicy(r.Policy)
	var upTo map[string]uint64 // what the policy lets go, per origin
	if policy == pubsubpb.RetentionInterest || policy == pubsubpb.RetentionWorkQueue {
		if upTo, err = b.policyFloors(ctx, t.Name, policy, stats); err != nil {
			return false, err
		}
	}
	var cutoff int64 // messages with an older wall time go
	if r.MaxAge > 0 {
		cutoff = b.cfg.Now().Add(-r.MaxAge).UnixNano()
	}
	readers := make([]*originReader, 0, len(stats))
	var count, bytes uint64 // what stays, as counted now
	need := cutoff != 0
	for _, o := range slices.Sorted(maps.Keys(stats)) {
		st := stats[o]
		n, by := st.stored()
		count, bytes = count+n, bytes+by
		need = need || upTo[o] > st.Floor.Seq && n > 0
		readers = append(readers, &originReader{s: b.store, topic: t.Name, origin: o, floor: st.Floor, after: st.Floor.Seq, drop: st.Floor})
	}
	over := func() bool {
		return r.MaxMessages > 0 && count > r.MaxMessages || r.MaxBytes > 0 && bytes > r.MaxBytes
	}
	if !need && !over() {
		return false, nil
	}
	reasons := map[string]uint64{}
	dropped := uint64(0)
	drop := func(rd *originReader, reason string) {
		m := rd.take()
		count, bytes = count-min(count, 1), bytes-min(bytes, m.Size)
		reasons[reason]++
		dropped++
	}
	// 1 and 2: per origin, the prefix the policy and max_age let go.
	for _, rd := range readers {
		for dropped < maxDropsPerPass {
			m, ok := rd.peek()
			if !ok {
				break
			}
			reason := ""
			switch {
			case m.Seq <= upTo[rd.origin]:
				reason = policyReason(policy)
			case cutoff != 0 && m.HLC.Wall < cutoff:
				reason = reasonMaxAge
			}
			if reason == "" {
				break
			}
			drop(rd, reason)
		}
	}
	// 3: the oldest across origins while past a limit.
	for dropped < maxDropsPerPass && over() {
		var oldest *originReader
		var om meta
		for _, rd := range readers {
			if m, ok := rd.peek(); ok && (oldest == nil || m.HLC.Less(om.HLC)) {
				oldest, om = rd, m // readers are sorted by origin: ties go to the lower one
			}
		}
		if oldest == nil {
			break
		}
		reason := reasonLimitsBytes
		if r.MaxMessages > 0 && count > r.MaxMessages {
			reason = reasonLimitsMessages
		}
		drop(oldest, reason)
	}
	for _, rd := range readers {
		if rd.err != nil {
			return false, fmt.Errorf("read %s's messages: %w", rd.origin, rd.err)
		}
	}
	if dropped == 0 {
		return false, nil
	}
	if err := b.commitDrops(t.Name, readers); err != nil {
		return false, err
	}
	var droppedBytes uint64
	for _, rd := range readers {
		droppedBytes += rd.drop.Bytes - rd.floor.Bytes
	}
	for reason, n := range reasons {
		b.metrics.droppedMsgs.WithLabelValues(t.Name, reason).Add(float64(n))
	}
	b.metrics.droppedBytes.WithLabelValues(t.Name).Add(float64(droppedBytes))
	b.log.Debug("retention dropped messages", "topic", t.Name, "messages", dropped, "bytes", droppedBytes, "reasons", fmt.Sprint(reasons))
	b.wakeTopic(t.Name) // a subscription waiting on what went learns it
	return dropped >= maxDropsPerPass, nil
}

// commitDrops deletes what the readers took, one range per origin, with
// the origins' new floors, in one batch. It need not be synced: a crash
// that takes it back brings the messages back, and the next pass drops
// them again.
func (b *Broker) commitDrops(topic string, readers []*originReader) error {
	batch := b.store.ns.NewBatch()
	for _, rd := range readers {
		if rd.drop.Seq <= rd.floor.Seq {
			continue
		}
		batch.DeleteRange(messageKey(topic, rd.origin, rd.floor.Seq+1), messageKey(topic, rd.origin, rd.drop.Seq+1))
		batch.Set(messageKey(topic, rd.origin, 0), rd.drop.encode())
	}
	if err := batch.CommitNoSync(); err != nil {
		return err
	}
	for _, rd := range readers {
		if rd.drop.Seq > rd.floor.Seq {
			b.store.setFloor(topic, rd.origin, rd.drop)
		}
	}
	return nil
}

func policyReason(policy string) string {
	if policy == pubsubpb.RetentionWorkQueue {
		return reasonWorkQueue
	}
	return reasonInterest
}

// policyFloors returns, per origin, the seq up to which an interest or
// work-queue topic's subscriptions have resolved every message: the lowest
// floor of the subscriptions that hold messages. Under interest those are
// the durable subscriptions (as every site stored their positions, merged)
// and the subscriptions live here; with none, everything may go. Under
// workqueue it is the durable subscription (normally one); with none,
// nothing goes. A subscription live here whose position is not set yet
// holds everything.
//
// A stored position counts as soon as this site sees it: its writer had
// written it durably before sending it, and positions only grow, so a
// consumer that resumes anywhere resumes at it or beyond, unless the
// position predicate's quorum read misses both the writer and this site.
func (b *Broker) policyFloors(ctx context.Context, topic, policy string, stats map[string]originStats) (map[string]uint64, error) {
	stored, err := b.storedSubscriptions(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("read the subscriptions' positions: %w", err)
	}
	holders := make([]consumer.Position, 0, len(stored))
	for _, rec := range stored {
		holders = append(holders, rec.Position)
	}
	b.mu.Lock()
	live := make([]*subscription, 0, len(b.mu.byTopic[topic]))
	for s := range b.mu.byTopic[topic] {
		live = append(live, s)
	}
	b.mu.Unlock()
	for _, s := range live {
		if policy == pubsubpb.RetentionWorkQueue && !s.durable {
			continue
		}
		s.mu.Lock()
		var pos consumer.Position
		if s.mu.st != nil {
			pos = s.mu.st.Position()
		}
		s.mu.Unlock()
		if pos == nil {
			pos = consumer.Position{} // not started yet: holds everything
		}
		holders = append(holders, pos)
	}
	floors := make(map[string]uint64, len(stats))
	for o, st := range stats {
		switch {
		case len(holders) > 0:
			low := holders[0][o].Floor
			for _, h := range holders[1:] {
				low = min(low, h[o].Floor)
			}
			floors[o] = low
		case policy == pubsubpb.RetentionInterest:
			floors[o] = st.LastSeq
		}
	}
	return floors, nil
}

// TruncatedError says that the messages a subscription was to read next
// were dropped by retention at the site. It wraps ErrTruncated.
type TruncatedError struct {
	Topic, Origin string
	// Asked is the seq the subscription wanted next from Origin: every
	// message from it up to Truncated is gone.
	Asked     uint64
	Truncated uint64
	// FirstRetained is the first seq of Origin still stored; 0 when none
	// is (the next one published comes first).
	FirstRetained uint64
}

func (e *TruncatedError) Error() string {
	first := "none is retained"
	if e.FirstRetained != 0 {
		first = fmt.Sprintf("the first retained is %d", e.FirstRetained)
	}
	return fmt.Sprintf("%v: topic %q, origin %s: messages from seq %d were dropped up to %d; %s "+
		"(subscribe with on_truncated first to start there)", ErrTruncated, e.Topic, e.Origin, e.Asked, e.Truncated, first)
}

func (e *TruncatedError) Unwrap() error { return ErrTruncated }
