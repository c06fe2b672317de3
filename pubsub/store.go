package pubsub

import (
	"encoding/binary"
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
const (
	prefixMessage = 'm' // m topic 0 origin 0 seq → hlc(12) payload
	prefixID      = 'i' // i topic 0 msgid → origin 0 seq(8) hlc(12)
	prefixStats   = 's' // s topic 0 origin → messages(8) last seq(8) bytes(8)
)

// originStats counts what a site stores of one topic from one origin.
type originStats struct {
	Messages, LastSeq, Bytes uint64
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

// open loads the counts.
func (s *store) open() error {
	return s.ns.ScanPrefix([]byte{prefixStats}, func(k, v []byte) error {
		topic, origin, ok := split2(k[1:])
		if !ok || len(v) != 24 {
			return fmt.Errorf("pubsub: corrupt counts under %q", k)
		}
		st := originStats{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:])}
		s.setStatsLocked(topic, origin, st)
		return nil
	})
}

func (s *store) setStatsLocked(topic, origin string, st originStats) {
	m := s.mu.stats[topic]
	if m == nil {
		m = map[string]originStats{}
		s.mu.stats[topic] = m
	}
	m[origin] = st
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
	if upTo <= after {
		return nil
	}
	start := messageKey(topic, origin, after+1)
	end := messageKey(topic, origin, upTo)
	end = stabilizer.PrefixEnd(end)
	n := 0
	errStop := fmt.Errorf("stop")
	err := s.ns.Scan(start, end, func(k, v []byte) error {
		if len(v) < 12 || len(k) < 8 {
			return fmt.Errorf("pubsub: corrupt message under %q", k)
		}
		m := &pubsubpb.Message{}
		if err := proto.Unmarshal(v[12:], m); err != nil {
			return fmt.Errorf("pubsub: corrupt message under %q: %w", k, err)
		}
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		h := readHLC(v)
		m.Topic, m.Origin, m.Seq = topic, origin, seq
		m.Hlc = &pubsubpb.HLC{Wall: h.Wall, Logical: h.Logical}
		n++
		if !fn(stored{Origin: origin, Seq: seq, HLC: h, Msg: m, Size: len(v) - 12}) || (limit > 0 && n >= limit) {
			return errStop
		}
		return nil
	})
	if err == errStop {
		return nil
	}
	return err
}
