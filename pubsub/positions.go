package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

// Durable positions live in the KV, one key per (topic, subscription,
// site): each site writes only its own key, so concurrent writers never
// overwrite each other, and a site that resumes the subscription merges
// every site's key (positions only grow: floors by max, acked seqs by
// union). A topic or subscription name holds no '|'.
const subsPrefix = "/pubsub/subs/"

func positionKey(topic, name, site string) string {
	return subsPrefix + topic + "|" + name + "|" + site
}

// positionRecord is a stored position, with the options it was made with
// (for listing) and when.
type positionRecord struct {
	Topic      string                        `json:"topic"`
	Name       string                        `json:"name"`
	Site       string                        `json:"site"`
	Updated    time.Time                     `json:"updated"`
	AckWait    time.Duration                 `json:"ack_wait"`
	MaxDeliver int                           `json:"max_deliver,omitempty"`
	DeadLetter string                        `json:"dead_letter,omitempty"`
	Position   map[string]consumer.OriginPos `json:"position"`
}

func (b *Broker) positionValue(key subKey, o SubOptions, pos consumer.Position) ([]byte, error) {
	rec := positionRecord{Topic: key.topic, Name: key.name, Site: b.node.Site(), Updated: b.cfg.Now().UTC(),
		AckWait: o.AckWait, MaxDeliver: o.MaxDeliver, DeadLetter: o.DeadLetter, Position: pos}
	return json.Marshal(rec)
}

func (b *Broker) storePosition(ctx context.Context, key subKey, o SubOptions, pos consumer.Position) error {
	val, err := b.positionValue(key, o, pos)
	if err != nil {
		return err
	}
	_, err = b.kv.Put(ctx, positionKey(key.topic, key.name, b.node.Site()), val, kv.WriteOptions{Wait: o.PositionPredicate})
	if err != nil {
		return fmt.Errorf("pubsub: store the position of %q on %q: %w", key.name, key.topic, err)
	}
	return nil
}

// loadPosition reads every site's stored position of a durable
// subscription with quorum reads under pred, so that it sees every store
// acknowledged under pred, and merges them.
func (b *Broker) loadPosition(ctx context.Context, key subKey, pred string) (consumer.Position, bool, error) {
	merged := consumer.Position{}
	found := false
	for _, site := range b.node.Schema().Sites {
		r, err := b.kv.Get(ctx, positionKey(key.topic, key.name, site), kv.ReadOptions{Quorum: pred})
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("pubsub: read the position of %q on %q stored by %s: %w", key.name, key.topic, site, err)
		}
		if !r.Found || r.Deleted {
			continue
		}
		var rec positionRecord
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			return nil, false, fmt.Errorf("pubsub: the position of %q on %q stored by %s: %w", key.name, key.topic, site, err)
		}
		found = true
		mergePosition(merged, rec.Position)
	}
	return merged, found, nil
}

// mergePosition joins p into into: floors by max, acked by union, without
// the seqs the floor covers.
func mergePosition(into, p consumer.Position) {
	for o, op := range p {
		cur := into[o]
		floor := max(cur.Floor, op.Floor)
		var acked []uint64
		for _, s := range slices.Concat(cur.Acked, op.Acked) {
			if s > floor {
				acked = append(acked, s)
			}
		}
		slices.Sort(acked)
		into[o] = consumer.OriginPos{Floor: floor, Acked: slices.Compact(acked)}
	}
}

// storedSubscriptions lists the durable subscriptions the KV knows, with
// the positions of every site merged.
func (b *Broker) storedSubscriptions(ctx context.Context, topic string) (map[subKey]positionRecord, error) {
	prefix := subsPrefix
	if topic != "" {
		prefix += topic + "|"
	}
	vs, err := b.kv.Scan(ctx, prefix, 0, kv.ReadOptions{})
	if err != nil {
		return nil, err
	}
	out := map[subKey]positionRecord{}
	for _, v := range vs {
		var rec positionRecord
		if err := json.Unmarshal(v.Value, &rec); err != nil {
			continue
		}
		k := subKey{rec.Topic, rec.Name}
		cur, ok := out[k]
		if !ok {
			cur = rec
			cur.Position = consumer.Position{}
		}
		mergePosition(cur.Position, rec.Position)
		if rec.Updated.After(cur.Updated) {
			cur.Updated, cur.Site = rec.Updated, rec.Site
		}
		out[k] = cur
	}
	return out, nil
}

// DeleteSubscription forgets a durable subscription at every site. It
// fails with ErrUnknownSubscription when no site stored it, and refuses
// while consumers are attached here.
func (b *Broker) DeleteSubscription(ctx context.Context, topic, name string) error {
	b.mu.Lock()
	_, active := b.mu.subs[subKey{topic, name}]
	b.mu.Unlock()
	if active {
		return fmt.Errorf("%w: %q on %q has consumers at %s; close them first", ErrBadSubscription, name, topic, b.node.Site())
	}
	stored, err := b.storedSubscriptions(ctx, topic)
	if err != nil {
		return err
	}
	if _, ok := stored[subKey{topic, name}]; !ok {
		return fmt.Errorf("%w: %q on topic %q", ErrUnknownSubscription, name, topic)
	}
	var errs []error
	for _, site := range b.node.Schema().Sites {
		if _, err := b.kv.Delete(ctx, positionKey(topic, name, site), kv.WriteOptions{Wait: b.cfg.DefinitionWait}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writePositions stores, every PositionInterval, the positions of the
// durable subscriptions whose acks changed them: all of them in one KV
// batch per position predicate (one append and one wait, whatever the
// number of subscriptions), while the pumps go on.
func (b *Broker) writePositions() {
	t := time.NewTicker(b.cfg.PositionInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.storeDirtyPositions()
	}
}

type dirtyPosition struct {
	s   *subscription
	val []byte
}

func (b *Broker) storeDirtyPositions() {
	b.mu.Lock()
	subs := make([]*subscription, 0, len(b.mu.subs))
	for _, s := range b.mu.subs {
		if s.durable {
			subs = append(subs, s)
		}
	}
	b.mu.Unlock()
	groups := map[string][]dirtyPosition{}
	for _, s := range subs {
		s.mu.Lock()
		if !s.mu.dirty || s.mu.storing || s.mu.st == nil {
			s.mu.Unlock()
			continue
		}
		pos := s.mu.st.Position()
		s.mu.dirty, s.mu.storing = false, true
		s.mu.Unlock()
		val, err := b.positionValue(s.key, s.opts, pos)
		if err != nil {
			b.log.Warn("encode position", "topic", s.key.topic, "subscription", s.key.name, "error", err)
			s.positionStored(false)
			continue
		}
		groups[s.opts.PositionPredicate] = append(groups[s.opts.PositionPredicate], dirtyPosition{s, val})
	}
	for pred, ds := range groups {
		ops := make([]kv.Op, len(ds))
		for i, d := range ds {
			ops[i] = kv.Op{Key: positionKey(d.s.key.topic, d.s.key.name, b.node.Site()), Value: d.val}
		}
		// The batch's wait runs beside the pumps; the next tick's batch
		// leaves out what this one still stores.
		b.goBackground(func() {
			ctx, cancel := context.WithTimeout(b.ctx, b.cfg.DefaultTimeout)
			defer cancel()
			res, err := b.kv.WriteBatch(ctx, ops, kv.WriteOptions{Wait: pred})
			if err != nil && ctx.Err() == nil {
				b.log.Warn("store positions", "subscriptions", len(ops), "error", err)
			}
			for i, d := range ds {
				d.s.positionStored(res[i].Err == nil)
			}
		})
	}
}

// positionStored ends a store of the position; a failed one is stored
// again at the next tick.
func (s *subscription) positionStored(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.storing = false
	if !ok {
		s.mu.dirty = true
	}
}
