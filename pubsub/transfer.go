package pubsub

import (
	"bytes"
	"context"
	"encoding/binary"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// transferApp is the broker's side of state transfer: the state of one
// origin's pubsub stream is the messages it published (and what retention
// dropped of them), their counts, and the ids they carried, so that a site
// that lost its disk, or lacks what its peers truncated, copies them from
// a peer and keeps deduplicating retried publishes.
type transferApp struct{ b *Broker }

func (t transferApp) Owner(key, value []byte) (string, bool) {
	if len(key) == 0 {
		return "", false
	}
	switch key[0] {
	case prefixMessage:
		// m topic 0 origin 0 seq
		_, rest, ok := bytes.Cut(key[1:], []byte{0})
		if !ok {
			return "", false
		}
		origin, _, ok := bytes.Cut(rest, []byte{0})
		return string(origin), ok
	case prefixStats:
		_, origin, ok := split2(key[1:])
		return origin, ok
	case prefixID:
		seen, ok := decodeSeen(value)
		return seen.origin, ok
	}
	return "", false
}

func (t transferApp) Restoring(id stabilizer.StreamID) {
	t.b.log.Warn("copying an origin's messages from a peer: subscribers here may see them late", "origin", id.Origin)
}

// Restored reloads the origin's counts, which the broker keeps in memory;
// the applier writes none of the origin's while its deliveries are held.
func (t transferApp) Restored(_ context.Context, id stabilizer.StreamID) error {
	s := t.b.store
	fresh := map[string]originStats{}
	err := s.ns.ScanPrefix([]byte{prefixStats}, func(k, v []byte) error {
		topic, origin, ok := split2(k[1:])
		if !ok || origin != id.Origin || len(v) != 24 {
			return nil
		}
		st := originStats{Messages: binary.BigEndian.Uint64(v), LastSeq: binary.BigEndian.Uint64(v[8:]), Bytes: binary.BigEndian.Uint64(v[16:])}
		if fv, err := s.ns.Get(messageKey(topic, origin, 0)); err == nil {
			st.Floor, _ = decodeFloor(fv)
		}
		fresh[topic] = st
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, origins := range s.mu.stats {
		delete(origins, id.Origin)
	}
	for topic, st := range fresh {
		s.setTotalsLocked(topic, id.Origin, st)
		s.mu.stats[topic][id.Origin] = st
	}
	s.mu.Unlock()
	t.b.log.Info("an origin's messages copied from a peer", "origin", id.Origin, "topics", len(fresh))
	return nil
}
