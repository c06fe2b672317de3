package pubsub

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Message is what a publisher sends.
type Message struct {
	Topic   string
	Data    []byte
	Headers map[string]string
	// ID makes a retried publish idempotent (see Broker.Publish).
	ID string
}

// PubAck says where a message landed and how far its publish-ack
// predicate holds.
type PubAck struct {
	Origin   string
	Seq      uint64
	HLC      stabilizer.HLC
	Frontier stabilizer.FrontierState
	// Duplicate: the id was published before; Origin, Seq and HLC are
	// the original's.
	Duplicate bool
}

// Publish publishes m and returns once the topic's publish-ack predicate
// covers it, or when ctx ends (or timeout, if ctx has no deadline; 0: the
// default) with an error that says how far the acks got.
//
// With an ID, a retry is idempotent within the duplicate window
// (Config.DuplicateWindow, default 2 minutes): when the site the retry
// reaches has applied a message of the topic with that id (from any
// origin), or published one that it has not applied yet, it publishes
// nothing and returns the original. When the original has not reached that
// site yet (a failover before it was replicated there), the retry is
// published, and every site stores whichever of the two it applies first
// and drops the other, so that subscribers are delivered the message once.
func (b *Broker) Publish(ctx context.Context, m Message, timeout time.Duration) (PubAck, error) {
	res := b.PublishBatch(ctx, []Message{m}, timeout)
	return res[0].PubAck, res[0].Err
}

// PublishResult is what became of one message of a batch.
type PublishResult struct {
	PubAck
	Err error
}

// PublishBatch publishes messages appended together (one step of the
// node's loop) and waits once per predicate. An invalid message fails
// alone.
func (b *Broker) PublishBatch(ctx context.Context, ms []Message, timeout time.Duration) []PublishResult {
	ctx, cancel := b.withTimeout(ctx, timeout)
	defer cancel()
	out := b.appendBatch(ctx, ms)
	b.waitAll(ctx, ms, out)
	return out
}

// appendBatch checks and appends messages, in order, and returns where
// each went (or why it was refused) without waiting for any predicate:
// a caller that appends batches one after the other keeps its publishes
// in order, whatever order their waits end in.
func (b *Broker) appendBatch(ctx context.Context, ms []Message) []PublishResult {
	out := make([]PublishResult, len(ms))
	var payloads [][]byte
	var at []int
	for i, m := range ms {
		_, payload, dup, err := b.prepare(m)
		switch {
		case err != nil:
			out[i].Err = err
		case dup != nil:
			out[i].PubAck = PubAck{Origin: dup.stream.Origin, Seq: dup.seq, HLC: dup.hlc, Duplicate: true}
		default:
			payloads = append(payloads, payload)
			at = append(at, i)
		}
	}
	if len(payloads) == 0 {
		return out
	}
	as, err := b.node.AppendBatch(ctx, Stream, payloads)
	if err != nil {
		for _, i := range at {
			out[i].Err = fmt.Errorf("pubsub: publish to %q: %w", ms[i].Topic, err)
		}
		return out
	}
	b.mu.Lock()
	for j, i := range at {
		a := as[j]
		out[i].PubAck = PubAck{Origin: a.Stream.Origin, Seq: a.Seq, HLC: a.HLC}
		if ms[i].ID != "" {
			b.mu.pending[ms[i].Topic+"\x00"+ms[i].ID] = pendingID{stream: a.Stream, seq: a.Seq, hlc: a.HLC}
		}
	}
	b.mu.Unlock()
	for j, i := range at {
		b.metrics.published(ms[i].Topic, len(payloads[j]))
	}
	return out
}

// prepare checks m and encodes it, or finds the original of a retry.
func (b *Broker) prepare(m Message) (*topicState, []byte, *pendingID, error) {
	t, err := b.knownTopic(m.Topic)
	if err != nil {
		return nil, nil, nil, err
	}
	size := len(m.Data) + len(m.ID)
	for k, v := range m.Headers {
		size += len(k) + len(v)
	}
	if uint64(size) > t.def.MaxMessageBytes {
		return nil, nil, nil, fmt.Errorf("%w: %d bytes of data and headers for topic %q, whose limit is %d", ErrTooLarge, size, m.Topic, t.def.MaxMessageBytes)
	}
	if m.ID != "" {
		if p, ok := b.original(m.Topic, m.ID); ok {
			return t, nil, &p, nil
		}
	}
	payload, err := proto.Marshal(&pubsubpb.Message{Topic: m.Topic, MsgId: m.ID, Headers: m.Headers, Data: m.Data})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pubsub: publish to %q: %w", m.Topic, err)
	}
	return t, payload, nil, nil
}

// original finds a message published with id within the duplicate window:
// one of this site's own not applied yet, or one applied here from anywhere.
func (b *Broker) original(topic, id string) (pendingID, bool) {
	b.mu.Lock()
	p, ok := b.mu.pending[topic+"\x00"+id]
	b.mu.Unlock()
	if ok {
		return p, true
	}
	seen, ok := b.store.lookupID(topic, id)
	if !ok {
		return pendingID{}, false
	}
	if time.Duration(b.cfg.Now().UnixNano()-seen.hlc.Wall) > b.cfg.DuplicateWindow {
		return pendingID{}, false
	}
	return pendingID{stream: stabilizer.StreamID{Origin: seen.origin, Name: Stream}, seq: seen.seq, hlc: seen.hlc}, true
}

// waitAll waits for every published message's predicate: once per
// predicate and stream, for the highest seq, since frontiers cover
// prefixes. Topics whose publish-ack predicates are the same share the
// wait: an audience topic waits with the others whose audience is the same
// set of sites, and alone again if its audience changes meanwhile.
func (b *Broker) waitAll(ctx context.Context, ms []Message, out []PublishResult) {
	type group struct {
		topic  string
		stream stabilizer.StreamID
	}
	type waitKey struct {
		pred   string
		stream stabilizer.StreamID
	}
	last := map[group]uint64{}
	for i := range out {
		if out[i].Err == nil {
			g := group{ms[i].Topic, stabilizer.StreamID{Origin: out[i].Origin, Name: Stream}}
			last[g] = max(last[g], out[i].Seq)
		}
	}
	keyOf := map[group]waitKey{}
	version := map[group]*audTopic{} // audience topics: the version they wait under
	upTo := map[waitKey]uint64{}
	done := map[group]waitResult{}
	for g, seq := range last {
		pred, at, err := b.publishPredicate(g.topic, g.stream)
		if err != nil {
			done[g] = waitResult{err: err}
			continue
		}
		k := waitKey{pred, g.stream}
		keyOf[g], version[g] = k, at
		upTo[k] = max(upTo[k], seq)
	}
	waited := map[waitKey]waitResult{}
	for k, seq := range upTo {
		err := b.node.WaitFor(ctx, k.stream, k.pred, seq)
		f, ferr := b.node.Frontier(context.WithoutCancel(ctx), k.stream, k.pred)
		if err == nil && ferr != nil {
			f = stabilizer.FrontierState{Stream: k.stream, Predicate: k.pred, Seq: seq}
		}
		waited[k] = waitResult{f, err}
	}
	for g, seq := range last {
		k, ok := keyOf[g]
		if !ok {
			continue
		}
		r := waited[k]
		if at := version[g]; at != nil && (r.err != nil || b.aud.current(g.topic) != at) {
			// Its audience changed during the wait (or the wait failed):
			// wait as the versions say.
			r.f, r.err = b.aud.wait(ctx, g.topic, seq)
		} else if at != nil {
			r.f.Predicate, r.f.Version = pubsubpb.Audience, at.version
		}
		done[g] = r
	}
	for i := range out {
		if out[i].Err != nil {
			continue
		}
		r := done[group{ms[i].Topic, stabilizer.StreamID{Origin: out[i].Origin, Name: Stream}}]
		out[i].Frontier = r.f
		if r.err != nil && r.f.Seq < out[i].Seq {
			out[i].Err = fmt.Errorf("pubsub: publish to %q: seq %d: %w", ms[i].Topic, out[i].Seq, r.err)
		}
	}
}

// publishPredicate is what a publish to topic on stream waits for: the
// topic's predicate, or, for an audience topic of this site, its audience's
// current version (returned too).
func (b *Broker) publishPredicate(topic string, stream stabilizer.StreamID) (string, *audTopic, error) {
	t, ok := b.topic(topic)
	if !ok {
		return "", nil, fmt.Errorf("%w: %q was deleted", ErrUnknownTopic, topic)
	}
	if t.def.PublishAck != pubsubpb.Audience {
		return t.def.PublishAck, nil, nil
	}
	if stream.Origin != b.node.Site() {
		// The original of a retry was published elsewhere: its origin
		// knows its audience, this site does not; ask for its own copy.
		return "local", nil, nil
	}
	at := b.aud.current(topic)
	return at.pred, at, nil
}

type waitResult struct {
	f   stabilizer.FrontierState
	err error
}

func (b *Broker) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		if _, ok := ctx.Deadline(); ok {
			return context.WithCancel(ctx)
		}
		d = b.cfg.DefaultTimeout
	}
	// The earlier of d and the caller's deadline: a client gives its
	// gRPC call a grace beyond the request's timeout, so that the site's
	// answer (how far the acks got) arrives before the client gives up.
	return context.WithTimeout(ctx, d)
}
