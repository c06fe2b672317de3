package pubsub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// The broker's key space (its namespace): the messages of every topic by
// (topic, origin, seq), the message ids seen per topic, and per-topic,
// per-origin counts. A topic name holds no 0x00 (checkTopicName), nor does
// a site name, so 0x00 ends both.
//
// Seq 0 names no message: under it, before the origin's messages, is what
// retention dropped of them (floorRecord). Deletions and the record change
// in one batch, and a reader that starts at seq 0 reads the record and the
// messages from one snapshot, so it knows exactly whether the messages it
// wanted next were dropped (see store.read).
const (
	prefixMessage = 'm' // m topic 0 origin 0 seq → hlc(12) payload; seq 0 → floor record
	prefixID      = 'i' // i topic 0 msgid → origin 0 seq(8) hlc(12)
	prefixStats   = 's' // s topic 0 origin → messages(8) last seq(8) bytes(8), every message applied
)

// originStats counts what a site stored of one topic from one origin. The
// applier owns the totals (every message it stored, dropped since or not),
// retention owns Floor: each writes only its own key and its own fields, so
// neither has to wait for the other.
type originStats struct {
	Messages, LastSeq, Bytes uint64
	Floor                    floorRecord
}

// floorRecord is what retention dropped of one topic from one origin at
// this site: every message with a seq up to Seq, Messages of them, with
// Bytes of payload.
type floorRecord struct {
	Seq, Messages, Bytes uint64
}

func (f floorRecord) encode() []byte {
	v := binary.BigEndian.AppendUint64(nil, f.Seq)
	v = binary.BigEndian.AppendUint64(v, f.Messages)
	return binary.BigEndian.AppendUint64(v, f.Bytes)
}

func decodeFloor(v []byte) (floorRecord, bool) {
	if len(v) != 24 {
		return floorRecord{}, false
	}
	return floorRecord{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:])}, true
}

// stored is what the site holds now: the totals less what was dropped.
func (st originStats) stored() (messages, bytes uint64) {
	return st.Messages - min(st.Floor.Messages, st.Messages), st.Bytes - min(st.Floor.Bytes, st.Bytes)
}

// store is the broker's view of its namespace, with the counts in memory.
type store struct {
	ns *stabilizer.Namespace
	mu struct {
		sync.Mutex
		stats map[string]map[string]originStats // topic → origin → counts
	}
}

func newStore(ns *stabilizer.Namespace) *store {
	s := &store{ns: ns}
	s.mu.stats = map[string]map[string]originStats{}
	return s
}

// open loads the counts and the retention floors.
func (s *store) open() error {
	err := s.ns.ScanPrefix([]byte{prefixStats}, func(k, v []byte) error {
		topic, origin, ok := split2(k[1:])
		if !ok || len(v) != 24 {
			return fmt.Errorf("pubsub: corrupt counts under %q", k)
		}
		st := originStats{Messages: binary.BigEndian.Uint64(v), LastSeq: binary.BigEndian.Uint64(v[8:]), Bytes: binary.BigEndian.Uint64(v[16:])}
		s.setTotalsLocked(topic, origin, st)
		return nil
	})
	if err != nil {
		return err
	}
	for topic, origins := range s.mu.stats {
		for origin, st := range origins {
			k := messageKey(topic, origin, 0)
			v, err := s.ns.Get(k)
			if errors.Is(err, stabilizer.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("pubsub: read the retention floor of %q from %s: %w", topic, origin, err)
			}
			f, ok := decodeFloor(v)
			if !ok {
				return fmt.Errorf("pubsub: corrupt retention floor under %q", k)
			}
			st.Floor = f
			origins[origin] = st
		}
	}
	return nil
}

// setTotalsLocked sets the applier's counts of a topic from an origin,
// leaving retention's floor as it is.
func (s *store) setTotalsLocked(topic, origin string, st originStats) {
	m := s.mu.stats[topic]
	if m == nil {
		m = map[string]originStats{}
		s.mu.stats[topic] = m
	}
	cur := m[origin]
	cur.Messages, cur.LastSeq, cur.Bytes = st.Messages, st.LastSeq, st.Bytes
	m[origin] = cur
}

// setFloor records what retention dropped of a topic from an origin, once
// its batch committed.
func (s *store) setFloor(topic, origin string, f floorRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mu.stats[topic]; m != nil {
		st := m[origin]
		st.Floor = f
		m[origin] = st
	}
}

// stats returns a copy of a topic's counts per origin.
func (s *store) stats(topic string) map[string]originStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]originStats, len(s.mu.stats[topic]))
	for o, st := range s.mu.stats[topic] {
		out[o] = st
	}
	return out
}

func (s *store) statsOf(topic, origin string) originStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.stats[topic][origin]
}

func split2(b []byte) (string, string, bool) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), string(b[i+1:]), true
		}
	}
	return "", "", false
}

func topicOriginKey(p byte, topic, origin string) []byte {
	k := make([]byte, 0, 2+len(topic)+len(origin)+9)
	k = append(k, p)
	k = append(k, topic...)
	k = append(k, 0)
	k = append(k, origin...)
	return k
}

func messageKey(topic, origin string, seq uint64) []byte {
	k := topicOriginKey(prefixMessage, topic, origin)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func idKey(topic, id string) []byte {
	k := make([]byte, 0, 2+len(topic)+len(id))
	k = append(k, prefixID)
	k = append(k, topic...)
	k = append(k, 0)
	return append(k, id...)
}

func appendHLC(b []byte, h stabilizer.HLC) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(h.Wall))
	return binary.BigEndian.AppendUint32(b, h.Logical)
}

func readHLC(b []byte) stabilizer.HLC {
	return stabilizer.HLC{Wall: int64(binary.BigEndian.Uint64(b)), Logical: binary.BigEndian.Uint32(b[8:])}
}

// seenID is what the id index says of a message id.
type seenID struct {
	origin string
	seq    uint64
	hlc    stabilizer.HLC
}

func encodeSeen(origin string, seq uint64, h stabilizer.HLC) []byte {
	v := make([]byte, 0, len(origin)+21)
	v = append(v, origin...)
	v = append(v, 0)
	v = binary.BigEndian.AppendUint64(v, seq)
	return appendHLC(v, h)
}

func decodeSeen(v []byte) (seenID, bool) {
	for i, c := range v {
		if c == 0 {
			if len(v)-i-1 != 20 {
				return seenID{}, false
			}
			return seenID{origin: string(v[:i]), seq: binary.BigEndian.Uint64(v[i+1:]), hlc: readHLC(v[i+9:])}, true
		}
	}
	return seenID{}, false
}

// lookupID says whether a topic's message id was applied here.
func (s *store) lookupID(topic, id string) (seenID, bool) {
	v, err := s.ns.Get(idKey(topic, id))
	if err != nil {
		return seenID{}, false
	}
	return decodeSeen(v)
}

// stored is one message as the store returns it.
type stored struct {
	Origin string
	Seq    uint64
	HLC    stabilizer.HLC
	Msg    *pubsubpb.Message
	Size   int
}

// scan calls fn for the messages of topic from origin with after < seq <=
// upTo, in seq order, until fn returns false or limit were passed.
func (s *store) scan(topic, origin string, after, upTo uint64, limit int, fn func(stored) bool) error {
	_, err := s.read(topic, origin, after, upTo, limit, fn)
	return err
}

// read is scan that also returns the origin's retention floor, read from
// the same snapshot as the messages: when floor.Seq > after, messages the
// caller had not read were dropped, and every message fn got is above
// floor.Seq. With upTo <= after it reads nothing and returns a zero floor.
func (s *store) read(topic, origin string, after, upTo uint64, limit int, fn func(stored) bool) (floorRecord, error) {
	var floor floorRecord
	if upTo <= after {
		return floor, nil
	}
	from := messageKey(topic, origin, after+1)
	end := stabilizer.PrefixEnd(messageKey(topic, origin, upTo))
	n := 0
	errStop := errors.New("stop")
	err := s.ns.ScanSkip(messageKey(topic, origin, 0), end, func(k, v []byte) ([]byte, error) {
		if len(k) < 8 {
			return nil, fmt.Errorf("pubsub: corrupt message key %q", k)
		}
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		if seq == 0 {
			f, ok := decodeFloor(v)
			if !ok {
				return nil, fmt.Errorf("pubsub: corrupt retention floor under %q", k)
			}
			floor = f
			return from, nil
		}
		if seq <= after {
			return from, nil
		}
		m, err := decodeMessage(topic, origin, seq, k, v)
		if err != nil {
			return nil, err
		}
		n++
		if !fn(m) || (limit > 0 && n >= limit) {
			return nil, errStop
		}
		return nil, nil
	})
	if err == errStop {
		err = nil
	}
	return floor, err
}

func decodeMessage(topic, origin string, seq uint64, k, v []byte) (stored, error) {
	if len(v) < 12 {
		return stored{}, fmt.Errorf("pubsub: corrupt message under %q", k)
	}
	m := &pubsubpb.Message{}
	if err := proto.Unmarshal(v[12:], m); err != nil {
		return stored{}, fmt.Errorf("pubsub: corrupt message under %q: %w", k, err)
	}
	h := readHLC(v)
	m.Topic, m.Origin, m.Seq = topic, origin, seq
	m.Hlc = &pubsubpb.HLC{Wall: h.Wall, Logical: h.Logical}
	return stored{Origin: origin, Seq: seq, HLC: h, Msg: m, Size: len(v) - 12}, nil
}

// meta is what retention reads of a stored message: no body.
type meta struct {
	Seq  uint64
	HLC  stabilizer.HLC
	Size uint64 // of the payload, as the counts count it
}

// metas returns up to limit messages of topic from origin above after, in
// seq order, without decoding them.
func (s *store) metas(topic, origin string, after uint64, limit int) ([]meta, error) {
	var out []meta
	errStop := errors.New("stop")
	end := stabilizer.PrefixEnd(append(topicOriginKey(prefixMessage, topic, origin), 0))
	err := s.ns.Scan(messageKey(topic, origin, after+1), end, func(k, v []byte) error {
		if len(k) < 8 || len(v) < 12 {
			return fmt.Errorf("pubsub: corrupt message under %q", k)
		}
		out = append(out, meta{Seq: binary.BigEndian.Uint64(k[len(k)-8:]), HLC: readHLC(v), Size: uint64(len(v) - 12)})
		if len(out) >= limit {
			return errStop
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return out, err
}

// firstSeq returns the seq of the first message of topic from origin
// stored here, or false when none is.
func (s *store) firstSeq(topic, origin string) (uint64, bool) {
	ms, err := s.metas(topic, origin, 0, 1)
	if err != nil || len(ms) == 0 {
		return 0, false
	}
	return ms[0].Seq, true
}
