package storage

import (
	"fmt"
)

// Message is one stream message as stored: its seq, its HLC timestamp and
// the payload bytes, which ReadRange returns byte for byte as appended.
type Message struct {
	Seq uint64
	HLC uint64
	// Head, when set, is stored in front of Payload as one payload: a
	// writer's prefix, so that it need not copy a large payload to prepend
	// a few bytes. What is read back has it in Payload, Head empty.
	Head    []byte
	Payload []byte
}

// size is the length of the stored payload, Head included.
func (m *Message) size() int { return len(m.Head) + len(m.Payload) }

// Batch collects changes that Write makes durable together, atomically:
// either all of them survive a crash or none does. The zero Batch is empty
// and ready to use.
//
// A Batch copies application keys at once, so a caller may build each key in
// one reused buffer; it keeps references to payloads and values and copies
// them only in Write: do not modify those before Write returns. A Batch may
// be reused after Reset. It is not safe for concurrent use.
type Batch struct {
	appends []streamAppend
	acks    []ackUpdate
	truncs  []truncation
	ops     []rawOp
	keys    []byte // backing store of the ops' keys: one allocation for many
	size    int    // approximate encoded size, for group limits
	err     error  // first invalid argument, reported by Write
}

type streamAppend struct {
	origin, stream string
	msgs           []Message
}

type ackUpdate struct {
	origin, stream, level string
	seq                   uint64
}

type truncation struct {
	origin, stream string
	upto           uint64
	skip           bool // Skip: move the head up to upto
}

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeleteRange
)

type rawOp struct {
	kind       opKind
	key, value []byte // value is the range end for opDeleteRange
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Append adds messages to the end of stream (origin, stream). Their seqs
// must be consecutive and the first must be the stream's head + 1 at the
// time the batch is committed (counting earlier Appends in the same batch);
// otherwise Write fails with ErrSeqGap and writes nothing of the batch.
func (b *Batch) Append(origin, stream string, msgs ...Message) {
	if err := checkName("origin", origin); err != nil {
		b.fail(err)
		return
	}
	if err := checkName("stream", stream); err != nil {
		b.fail(err)
		return
	}
	if len(msgs) == 0 {
		return
	}
	for i, m := range msgs {
		if m.Seq == 0 || m.Seq == ^uint64(0) {
			b.fail(fmt.Errorf("storage: append %s/%s: seq %d out of range: %w", origin, stream, m.Seq, ErrInvalid))
			return
		}
		if i > 0 && m.Seq != msgs[i-1].Seq+1 {
			b.fail(fmt.Errorf("storage: append %s/%s: seq %d follows %d: %w", origin, stream, m.Seq, msgs[i-1].Seq, ErrSeqGap))
			return
		}
		b.size += m.size() + len(origin) + len(stream) + 32
	}
	b.appends = append(b.appends, streamAppend{origin: origin, stream: stream, msgs: msgs})
}

// SetAck records that the local site acknowledged stream (origin, stream)
// up to seq at level (for example "applied"). Acks only grow: a seq at or
// below the stored one is ignored, so a restarted site never reports less
// than it did before.
func (b *Batch) SetAck(origin, stream, level string, seq uint64) {
	for _, c := range [...]struct{ what, name string }{{"origin", origin}, {"stream", stream}, {"level", level}} {
		if err := checkName(c.what, c.name); err != nil {
			b.fail(err)
			return
		}
	}
	b.acks = append(b.acks, ackUpdate{origin: origin, stream: stream, level: level, seq: seq})
	b.size += len(origin) + len(stream) + len(level) + 16
}

// Truncate deletes the messages of stream (origin, stream) with seq <= upto
// (one range deletion). upto must not exceed the stream's head when the
// batch commits; truncating to a point already truncated is a no-op. The
// head is kept, so numbering continues after a full truncation.
func (b *Batch) Truncate(origin, stream string, upto uint64) {
	if err := checkName("origin", origin); err != nil {
		b.fail(err)
		return
	}
	if err := checkName("stream", stream); err != nil {
		b.fail(err)
		return
	}
	b.truncs = append(b.truncs, truncation{origin: origin, stream: stream, upto: upto})
	b.size += 2*len(origin) + 2*len(stream) + 32
}

// Skip is Truncate for a stream that continues past its head: when upto is
// beyond the head, the head moves to upto, as if messages up to it had been
// appended and truncated. A site that installed a snapshot of the
// application's state holding their effects skips what it never received.
func (b *Batch) Skip(origin, stream string, upto uint64) {
	b.Truncate(origin, stream, upto)
	if n := len(b.truncs); n > 0 && b.truncs[n-1].origin == origin && b.truncs[n-1].stream == stream {
		b.truncs[n-1].skip = true
	}
}

// AppSet sets key to value in application namespace ns. Applications own
// their namespaces' keys; the store only prefixes them.
func (b *Batch) AppSet(ns string, key, value []byte) {
	if err := checkName("namespace", ns); err != nil {
		b.fail(err)
		return
	}
	b.raw(rawOp{kind: opSet, key: b.appKey(ns, key), value: value})
}

// appKey copies ns's key into b.keys. A key handed out is capped, so later
// appends never write into it; when b.keys grows, earlier keys keep the old
// array.
func (b *Batch) appKey(ns string, key []byte) []byte {
	start := len(b.keys)
	b.keys = appendAppKey(b.keys, ns, key)
	return b.keys[start:len(b.keys):len(b.keys)]
}

// AppDelete deletes key from application namespace ns.
func (b *Batch) AppDelete(ns string, key []byte) {
	if err := checkName("namespace", ns); err != nil {
		b.fail(err)
		return
	}
	b.raw(rawOp{kind: opDelete, key: b.appKey(ns, key)})
}

// AppDeleteRange deletes the keys k of namespace ns with start <= k < end;
// a nil end means to the end of the namespace.
func (b *Batch) AppDeleteRange(ns string, start, end []byte) {
	if err := checkName("namespace", ns); err != nil {
		b.fail(err)
		return
	}
	e := PrefixEnd(appPrefix(ns))
	if end != nil {
		e = b.appKey(ns, end)
	}
	b.raw(rawOp{kind: opDeleteRange, key: b.appKey(ns, start), value: e})
}

// SetMeta sets a small metadata value (site identity, format version, …).
func (b *Batch) SetMeta(key string, value []byte) {
	if key == "" {
		b.fail(fmt.Errorf("storage: meta key is empty: %w", ErrInvalid))
		return
	}
	b.raw(rawOp{kind: opSet, key: metaKey(key), value: value})
}

// DeleteMeta deletes a metadata key.
func (b *Batch) DeleteMeta(key string) {
	if key == "" {
		b.fail(fmt.Errorf("storage: meta key is empty: %w", ErrInvalid))
		return
	}
	b.raw(rawOp{kind: opDelete, key: metaKey(key)})
}

func (b *Batch) raw(op rawOp) {
	b.ops = append(b.ops, op)
	b.size += len(op.key) + len(op.value) + 8
}

// Empty reports whether the batch holds no changes.
func (b *Batch) Empty() bool {
	return len(b.appends) == 0 && len(b.acks) == 0 && len(b.truncs) == 0 && len(b.ops) == 0
}

// Size returns the approximate encoded size of the batch in bytes.
func (b *Batch) Size() int { return b.size }

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	clear(b.appends)
	clear(b.ops)
	*b = Batch{appends: b.appends[:0], acks: b.acks[:0], truncs: b.truncs[:0], ops: b.ops[:0], keys: b.keys[:0]}
}
