package pubsub

import (
	"context"
	"encoding/binary"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// applier stores every origin's messages at this site: the node hands it
// each stream's entries in seq order, once (Batch.SetApplied).
type applier struct{ b *Broker }

func (a applier) Apply(ctx context.Context, entries []stabilizer.Entry) error {
	return a.b.apply(entries)
}

// apply stores a run of one stream's entries with the stream's position, in
// one batch: the counts, the id index and the messages. A message whose id
// this site applied within the duplicate window, from any origin, is a
// retried publish: it is not stored, so it is delivered once.
func (b *Broker) apply(entries []stabilizer.Entry) error {
	id := entries[0].Stream
	batch := b.store.ns.NewBatch()
	stats := map[[2]string]originStats{}
	fresh := map[[2]string]*handed{} // per topic (one origin): what was stored
	ids := map[string]bool{}         // topic 0 id, within this batch
	var dups, bad int
	for _, e := range entries {
		m := &pubsubpb.Message{}
		if err := proto.Unmarshal(e.Payload, m); err != nil || checkTopicName(m.Topic) != nil {
			bad++
			continue
		}
		if m.MsgId != "" {
			k := m.Topic + "\x00" + m.MsgId
			if ids[k] || b.isDuplicate(m.Topic, m.MsgId, e) {
				dups++
				continue
			}
			ids[k] = true
			batch.Set(idKey(m.Topic, m.MsgId), encodeSeen(id.Origin, e.Seq, e.HLC))
		}
		v := make([]byte, 0, 12+len(e.Payload))
		v = append(appendHLC(v, e.HLC), e.Payload...)
		batch.Set(messageKey(m.Topic, id.Origin, e.Seq), v)
		sk := [2]string{m.Topic, id.Origin}
		st, ok := stats[sk]
		if !ok {
			st = b.store.statsOf(m.Topic, id.Origin) // only apply changes them
			fresh[sk] = &handed{prev: st.LastSeq, live: b.hasSubscriptions(m.Topic)}
		}
		h := fresh[sk]
		h.n++
		if h.live {
			m.Origin, m.Seq = id.Origin, e.Seq
			m.Hlc = &pubsubpb.HLC{Wall: e.HLC.Wall, Logical: e.HLC.Logical}
			h.ms = append(h.ms, stored{Origin: id.Origin, Seq: e.Seq, HLC: e.HLC, Msg: m, Size: len(m.Data)})
		}
		st.Messages++
		st.LastSeq = e.Seq
		st.Bytes += uint64(len(e.Payload))
		stats[sk] = st
	}
	for sk, st := range stats {
		v := binary.BigEndian.AppendUint64(nil, st.Messages)
		v = binary.BigEndian.AppendUint64(v, st.LastSeq)
		batch.Set(topicOriginKey(prefixStats, sk[0], sk[1]), binary.BigEndian.AppendUint64(v, st.Bytes))
	}
	batch.SetApplied(id, entries[len(entries)-1].Seq)
	if err := batch.CommitNoSync(); err != nil {
		return err
	}
	b.store.mu.Lock()
	for sk, st := range stats {
		b.store.setTotalsLocked(sk[0], sk[1], st)
	}
	b.store.mu.Unlock()
	if id.Origin == b.node.Site() {
		b.forgetPending(entries[len(entries)-1].Seq)
	}
	if dups > 0 {
		b.metrics.duplicates.Add(float64(dups))
	}
	if bad > 0 {
		b.log.Warn("messages that are no pub/sub message were skipped", "stream", id, "count", bad)
	}
	for sk, h := range fresh {
		if h.live {
			b.handOver(sk[0], sk[1], h)
		}
		b.metrics.received(sk[0], sk[1], h.n)
		b.wakeTopic(sk[0])
	}
	return nil
}

// isDuplicate says whether the id index holds another message with this id
// applied within the duplicate window of e.
func (b *Broker) isDuplicate(topic, msgID string, e stabilizer.Entry) bool {
	seen, ok := b.store.lookupID(topic, msgID)
	if !ok || (seen.origin == e.Stream.Origin && seen.seq == e.Seq) {
		return false
	}
	return time.Duration(e.HLC.Wall-seen.hlc.Wall).Abs() <= b.cfg.DuplicateWindow
}

// forgetPending drops the own publishes' ids that the store now holds.
func (b *Broker) forgetPending(upTo uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.mu.pending {
		if p.seq <= upTo {
			delete(b.mu.pending, k)
		}
	}
}

// handed is a run of one topic's messages from one origin that apply
// stored: how many, the topic's last seq from that origin before them, and,
// when the topic had subscriptions here as the run began, the messages, to
// hand over (a subscription that starts later reads them from storage).
type handed struct {
	prev uint64
	n    int
	live bool
	ms   []stored
}

// hasSubscriptions says whether a topic has subscriptions at this site.
func (b *Broker) hasSubscriptions(topic string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.byTopic[topic]) > 0
}

// handOver gives the topic's live subscriptions what apply just stored.
func (b *Broker) handOver(topic, origin string, h *handed) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.mu.byTopic[topic] {
		s.handOver(origin, h.prev, h.ms)
	}
}
