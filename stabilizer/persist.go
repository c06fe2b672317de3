package stabilizer

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// The node's own state besides the log and acks lives in an application
// namespace of the store: run-time predicates, released frontiers, stable
// times and the clock, each needed to restart the core where it stopped.
const nodeNS = "stabilizer"

// Keys of the node's namespace. name(x) is x's length as a uvarint, then x,
// so that no name, whatever bytes it holds, can run into the next.
const (
	keyPredicate = 'p' // name -> version, source
	keyFrontier  = 'F' // name(origin) name(stream) name(predicate) -> seq, version, hlc
	keyStable    = 's' // predicate -> hlc
	keyClock     = 'c' // -> hlc
	keyApplied   = 'a' // name(origin) name(stream) -> seq (8 bytes): an application's position
	keyFloor     = 't' // name(origin) name(stream) -> seq, hlc: the time of a stream's truncation point
	// keyFrontierV1 is the frontier record of earlier releases, its parts
	// joined with NUL bytes, which stream names may hold. Start rewrites
	// such records under keyFrontier.
	keyFrontierV1 = 'f' // origin \0 stream \0 predicate -> as keyFrontier
)

// persist applies a Ready's writes to the store in one batch and returns
// the job that releases the Ready once they are durable. With rd.MustSync
// the batch goes through WriteAsync: synced at once when the Ready is
// urgent, otherwise left for a later fsync to cover. Without (frontiers and
// stable times under Config.Core.LazyFrontiers, or of inline predicates,
// which are not stored) it is written without an fsync of its own and
// released, in order, without waiting for one.
func (n *Node) persist(rd *core.Ready) (*job, error) {
	j, err := n.persistLog(rd)
	if err == nil && (len(rd.BulkEntries) > 0 || len(j.bulkTruncs) > 0) {
		n.bulk.queue(n.stop, bulkJob{entries: rd.BulkEntries, truncs: j.bulkTruncs, p: j.p})
	}
	return j, err
}

// persistLog applies the Ready's writes to pebble: everything but the bulk
// streams' entries and truncations.
func (n *Node) persistLog(rd *core.Ready) (*job, error) {
	j := &job{rd: rd}
	if !rd.MustSync && len(rd.Frontiers) == 0 && len(rd.StableTimes) == 0 {
		j.urgent = len(rd.Messages) > 0 || len(rd.Deliver) > 0 || len(rd.Scoped) > 0
		return j, nil
	}
	// Settled advances end their waits now; what is left to wait for
	// decides whether the Ready needs its fsync at once.
	n.pub.wake(rd.Frontiers)
	b := n.readyBatch(rd, j)
	if !rd.MustSync {
		// Frontiers without an fsync of their own: lazy ones, and those of
		// inline predicates, which are not stored.
		j.urgent = true
		if b.Empty() {
			return j, nil
		}
		return j, n.store.WriteNoSync(b)
	}
	j.urgent = n.urgent(rd)
	j.sync = j.urgent
	j.at = time.Now()
	var err error
	j.p, err = n.store.WriteAsync(b, j.sync)
	return j, err
}

// readyBatch encodes a Ready's writes. Truncations of bulk streams go to
// j.bulkTruncs for the bulk store; their floors are recorded here.
func (n *Node) readyBatch(rd *core.Ready, j *job) *storage.Batch {
	var b storage.Batch
	levels := n.cfg.Schema.LevelNames()
	// One array holds every stored head (the HLC's logical part) of the
	// Ready, instead of one allocation per entry; payloads are not copied
	// here: the batch copies them into blocks in Write, before Advance
	// lets the core drop them.
	heads := make([]byte, 0, binary.MaxVarintLen32*len(rd.Entries))
	for i := 0; i < len(rd.Entries); {
		j := i
		id := rd.Entries[i].Stream
		for j < len(rd.Entries) && rd.Entries[j].Stream == id {
			j++
		}
		msgs := make([]storage.Message, 0, j-i)
		for k := i; k < j; k++ {
			var m storage.Message
			heads, m = stored(heads, &rd.Entries[k])
			msgs = append(msgs, m)
		}
		b.Append(id.Origin, id.Name, msgs...)
		i = j
	}
	for _, a := range rd.Acks {
		b.SetAck(a.Stream.Origin, a.Stream.Name, levels[a.Level], a.Seq)
	}
	for _, p := range rd.Predicates {
		v := binary.AppendUvarint(nil, p.Version)
		b.AppSet(nodeNS, append([]byte{keyPredicate}, p.Name...), append(v, p.Source...))
	}
	for _, f := range rd.Frontiers {
		if isInline(f.Predicate) {
			continue // not persisted: see inline.go
		}
		v := binary.AppendUvarint(nil, f.To)
		v = binary.AppendUvarint(v, f.Version)
		b.AppSet(nodeNS, frontierKey(f.Stream, f.Predicate), appendHLC(v, f.HLC))
	}
	for _, s := range rd.StableTimes {
		if isInline(s.Predicate) {
			continue
		}
		b.AppSet(nodeNS, append([]byte{keyStable}, s.Predicate...), appendHLC(nil, s.Time))
	}
	if !rd.Clock.IsZero() {
		b.AppSet(nodeNS, []byte{keyClock}, appendHLC(nil, rd.Clock))
	}
	for _, t := range rd.Truncations {
		bulk := n.isBulk(t.Stream.Name)
		if bulk {
			j.bulkTruncs = append(j.bulkTruncs, t)
		}
		switch {
		case t.Skip:
			// The application's position moves with the head: what was
			// skipped is in its state (a snapshot) or names nothing.
			if !bulk {
				b.Skip(t.Stream.Origin, t.Stream.Name, t.Seq)
			}
			b.AppSet(nodeNS, appliedKey(t.Stream), appliedValue(t.Seq))
		case !bulk:
			b.Truncate(t.Stream.Origin, t.Stream.Name, t.Seq)
		}
		k := appendName(appendName([]byte{keyFloor}, t.Stream.Origin), t.Stream.Name)
		b.AppSet(nodeNS, k, appendHLC(binary.AppendUvarint(nil, t.Seq), t.HLC))
	}
	return &b
}

func frontierKey(id StreamID, pred string) []byte {
	k := appendName([]byte{keyFrontier}, id.Origin)
	k = appendName(k, id.Name)
	return appendName(k, pred)
}

func appliedKey(id StreamID) []byte {
	return appendName(appendName([]byte{keyApplied}, id.Origin), id.Name)
}

func appliedValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func appendName(b []byte, name string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(name))), name...)
}

// readNames splits b into exactly n names written by appendName.
func readNames(b []byte, n int) ([]string, bool) {
	out := make([]string, 0, n)
	for range n {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return nil, false
		}
		out = append(out, string(b[w:w+int(l)]))
		b = b[w+int(l):]
	}
	return out, len(b) == 0
}

func appendHLC(b []byte, h HLC) []byte {
	b = binary.AppendVarint(b, h.Wall)
	return binary.AppendUvarint(b, uint64(h.Logical))
}

func readHLC(b []byte) (HLC, []byte, error) {
	w, n := binary.Varint(b)
	if n <= 0 {
		return HLC{}, nil, errors.New("bad hlc")
	}
	l, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return HLC{}, nil, errors.New("bad hlc")
	}
	return HLC{Wall: w, Logical: uint32(l)}, b[n+m:], nil
}

// stored keeps the HLC's wall time in the stored message's HLC field and
// its logical part in front of the payload (the message's Head, appended
// to dst and capped, so later appends to dst never write into it), so the
// entry reads back whole. The payload itself is not copied.
func stored(dst []byte, e *Entry) ([]byte, storage.Message) {
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(e.HLC.Logical))
	return dst, storage.Message{Seq: e.Seq, HLC: uint64(e.HLC.Wall), Head: dst[start:len(dst):len(dst)], Payload: e.Payload}
}

func fromStored(id StreamID, m *storage.Message) (Entry, error) {
	l, w := binary.Uvarint(m.Payload)
	if w <= 0 {
		return Entry{}, fmt.Errorf("stabilizer: corrupt message %s seq %d", id, m.Seq)
	}
	return Entry{Stream: id, Seq: m.Seq, HLC: HLC{Wall: int64(m.HLC), Logical: uint32(l)}, Payload: m.Payload[w:]}, nil
}

// logReader lets the core read back persisted entries. It reads what is
// applied, durable or not: after Advance the core may read back entries of
// a Ready whose fsync is still running, and whatever it does with them is
// released only after that fsync. Bulk streams' entries it reads from the
// segment store, where the core reads only what BulkPersisted confirmed.
type logReader struct{ n *Node }

func (r logReader) Entries(id StreamID, lo, hi uint64, maxBytes int) ([]Entry, error) {
	if r.n.isBulk(id.Name) {
		return r.n.readBulk(id, lo, hi, maxBytes)
	}
	msgs, err := r.n.store.ReadApplied(id.Origin, id.Name, lo, int(hi-lo+1), maxBytes)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(msgs))
	for i := range msgs {
		e, err := fromStored(id, &msgs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// restoreState rebuilds what the core needs to resume from storage.
func (n *Node) restoreState() (core.State, error) {
	var st core.State
	for _, si := range n.store.Streams() {
		id := StreamID{Origin: si.Origin, Name: si.Stream}
		if si.Head > 0 && !n.isBulk(si.Stream) {
			p := Position{Stream: id, Seq: si.Head}
			if ents, err := (logReader{n}).Entries(id, si.Head, si.Head, 0); err == nil && len(ents) == 1 {
				p.HLC = ents[0].HLC
			}
			st.Heads = append(st.Heads, p)
		}
		for level, seq := range si.Acks {
			li, ok := n.cfg.Schema.LevelIndex(level)
			if !ok {
				n.log.Warn("ignoring ack of a level no longer configured", "stream", id, "level", level)
				continue
			}
			st.Acks = append(st.Acks, core.AckCell{Stream: id, Site: n.cfg.Site, Level: li, Seq: seq})
		}
	}
	err := n.store.AppScan(nodeNS, nil, nil, func(k, v []byte) error {
		return n.restoreKey(&st, k, v)
	})
	if err != nil {
		return st, fmt.Errorf("stabilizer: restore: %w", err)
	}
	bulkFloors := n.keepBulkFloors(&st)
	restoreFloors(&st, n.store.Streams())
	if err := n.restoreBulk(&st, bulkFloors); err != nil {
		return st, err
	}
	return st, n.migrate(&st)
}

// keepBulkFloors takes the bulk streams' truncation points out of st: the
// record beside the floor is their truth (pebble holds none of their
// entries), where restoreFloors takes pebble's log.
func (n *Node) keepBulkFloors(st *core.State) []Position {
	var bulk []Position
	st.Truncated = slices.DeleteFunc(st.Truncated, func(t Position) bool {
		if n.isBulk(t.Stream.Name) {
			bulk = append(bulk, t)
			return true
		}
		return false
	})
	return bulk
}

// restoreBulk adds the bulk streams' heads and floors: a head is what the
// segment store holds durably (it fsyncs what it kept when it opens), or
// the floor when a truncation took everything, and the segment store is
// brought to the floor (segments a crash kept after their floor was
// recorded are deleted, a head a skip moved is set).
func (n *Node) restoreBulk(st *core.State, floors []Position) error {
	heads := map[StreamID]Position{}
	for _, si := range n.bulk.seg.Streams() {
		id := StreamID{Origin: si.Origin, Name: si.Stream}
		if !n.isBulk(si.Stream) {
			n.log.Warn("the bulk store holds a stream that is no longer a bulk stream; it is ignored", "stream", id)
			continue
		}
		if si.Durable == 0 {
			continue
		}
		p := Position{Stream: id, Seq: si.Durable}
		if si.First == 0 || si.First > si.Durable {
			// Truncated up to its head: the floor's record has its time.
			heads[id] = p
			continue
		}
		ents, err := n.readBulk(id, si.Durable, si.Durable, 0)
		if err != nil || len(ents) != 1 {
			return fmt.Errorf("stabilizer: restore: read the head of bulk stream %s: %w", id, errors.Join(err, ErrNotFound))
		}
		p.HLC = ents[0].HLC
		heads[id] = p
	}
	for _, f := range floors {
		h, ok := heads[f.Stream]
		if !ok || h.Seq <= f.Seq {
			heads[f.Stream] = f
			if err := n.bulk.seg.Reset(f.Stream.Origin, f.Stream.Name, f.Seq); err != nil {
				return fmt.Errorf("stabilizer: restore: bulk stream %s: %w", f.Stream, err)
			}
		} else if err := n.bulk.seg.Truncate(f.Stream.Origin, f.Stream.Name, f.Seq); err != nil {
			return fmt.Errorf("stabilizer: restore: bulk stream %s: %w", f.Stream, err)
		}
		st.Truncated = append(st.Truncated, f)
	}
	for _, id := range slices.SortedFunc(maps.Keys(heads), cmpStreamID) {
		st.Heads = append(st.Heads, heads[id])
	}
	return nil
}

func cmpStreamID(a, b StreamID) int {
	return cmp.Or(strings.Compare(a.Origin, b.Origin), strings.Compare(a.Name, b.Name))
}

// restoreFloors sets each stream's truncation point from the log, which is
// the truth, with the time recorded beside it when the two agree (a crash
// may lose a record's fsync, never the log's); a stream truncated up to its
// head takes its head's time from there.
func restoreFloors(st *core.State, streams []storage.StreamInfo) {
	hlcs := make(map[Position]HLC, len(st.Truncated))
	for _, t := range st.Truncated {
		hlcs[Position{Stream: t.Stream, Seq: t.Seq}] = t.HLC
	}
	st.Truncated = st.Truncated[:0]
	heads := make(map[StreamID]int, len(st.Heads))
	for i, h := range st.Heads {
		heads[h.Stream] = i
	}
	for _, si := range streams {
		if si.Truncated == 0 {
			continue
		}
		id := StreamID{Origin: si.Origin, Name: si.Stream}
		h := hlcs[Position{Stream: id, Seq: si.Truncated}]
		st.Truncated = append(st.Truncated, Position{Stream: id, Seq: si.Truncated, HLC: h})
		if i, ok := heads[id]; ok && si.Head == si.Truncated {
			st.Heads[i].HLC = h
		}
	}
}

func (n *Node) restoreKey(st *core.State, k, v []byte) error {
	bad := fmt.Errorf("corrupt node state key %q", k)
	switch k[0] {
	case keyPredicate:
		ver, w := binary.Uvarint(v)
		if w <= 0 {
			return bad
		}
		if isInline(string(k[1:])) {
			n.legacy = append(n.legacy, bytes.Clone(k)) // earlier releases stored inline ones
			return nil
		}
		st.Predicates = append(st.Predicates, PredicateDef{Name: string(k[1:]), Version: ver, Source: string(v[w:])})
	case keyFrontier, keyFrontierV1:
		parts, ok := readNames(k[1:], 3)
		if k[0] == keyFrontierV1 {
			parts, ok = splitV1Frontier(k[1:])
			n.legacy = append(n.legacy, bytes.Clone(k))
		}
		if !ok {
			return bad
		}
		f, err := decodeFrontier(parts, v)
		if err != nil {
			return bad
		}
		if isInline(f.Predicate) {
			n.legacy = append(n.legacy, bytes.Clone(k))
			return nil
		}
		st.Frontiers = append(st.Frontiers, f)
	case keyApplied:
		parts, ok := readNames(k[1:], 2)
		if !ok || len(v) != 8 {
			return bad
		}
		st.Applied = append(st.Applied, Position{Stream: StreamID{Origin: parts[0], Name: parts[1]}, Seq: binary.BigEndian.Uint64(v)})
	case keyFloor:
		parts, ok := readNames(k[1:], 2)
		seq, m := binary.Uvarint(v)
		if !ok || m <= 0 {
			return bad
		}
		h, _, err := readHLC(v[m:])
		if err != nil {
			return bad
		}
		st.Truncated = append(st.Truncated, Position{Stream: StreamID{Origin: parts[0], Name: parts[1]}, Seq: seq, HLC: h})
	case keyStable:
		h, _, err := readHLC(v)
		if err != nil {
			return bad
		}
		if isInline(string(k[1:])) {
			n.legacy = append(n.legacy, bytes.Clone(k))
			return nil
		}
		st.StableTimes = append(st.StableTimes, StableTime{Predicate: string(k[1:]), Time: h})
	case keyClock:
		h, _, err := readHLC(v)
		if err != nil {
			return bad
		}
		st.Clock = h
	}
	return nil
}

func decodeFrontier(parts []string, v []byte) (FrontierState, error) {
	bad := errors.New("bad frontier record")
	seq, w1 := binary.Uvarint(v)
	if w1 <= 0 {
		return FrontierState{}, bad
	}
	ver, w2 := binary.Uvarint(v[w1:])
	if w2 <= 0 {
		return FrontierState{}, bad
	}
	h, _, err := readHLC(v[w1+w2:])
	if err != nil {
		return FrontierState{}, bad
	}
	return FrontierState{Stream: StreamID{Origin: parts[0], Name: parts[1]}, Predicate: parts[2], Seq: seq, Version: ver, HLC: h}, nil
}

// splitV1Frontier splits a keyFrontierV1 key. Site names and predicate
// names hold no NUL (the schema and the predicate language refuse it),
// stream names may: the stream is everything between the first NUL and
// the last.
func splitV1Frontier(b []byte) ([]string, bool) {
	i, j := bytes.IndexByte(b, 0), bytes.LastIndexByte(b, 0)
	if i < 0 || i == j {
		return nil, false
	}
	return []string{string(b[:i]), string(b[i+1 : j]), string(b[j+1:])}, true
}

// migrate deletes the records of earlier releases that restore found
// (inline predicates, frontiers keyed with NUL bytes) and writes every
// frontier record under today's keys.
func (n *Node) migrate(st *core.State) error {
	if len(n.legacy) == 0 {
		return nil
	}
	var b storage.Batch
	for _, k := range n.legacy {
		b.AppDelete(nodeNS, k)
	}
	for _, f := range st.Frontiers {
		v := binary.AppendUvarint(nil, f.Seq)
		v = binary.AppendUvarint(v, f.Version)
		b.AppSet(nodeNS, frontierKey(f.Stream, f.Predicate), appendHLC(v, f.HLC))
	}
	n.legacy = nil
	if err := n.store.Write(n.ctx, &b); err != nil {
		return fmt.Errorf("stabilizer: rewrite frontier records: %w", err)
	}
	return nil
}
