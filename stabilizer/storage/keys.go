package storage

import (
	"encoding/binary"
	"fmt"
)

// Key spaces. Every key starts with one of these bytes so that the spaces
// never interleave and each can be scanned or range-deleted on its own.
const (
	prefixMeta   byte = 0x01 // metadata: prefixMeta | key
	prefixMsg    byte = 0x02 // messages: prefixMsg | name(origin) | name(stream) | seq(8, big-endian) of the value's last message
	prefixStream byte = 0x03 // stream state: prefixStream | name(origin) | name(stream)
	prefixAck    byte = 0x04 // local acks: prefixAck | name(origin) | name(stream) | level
	prefixApp    byte = 0x05 // application state: prefixApp | name(namespace) | key
)

// MaxNameLen is the longest origin, stream, level or namespace name, in bytes.
// Names are length-prefixed in keys with one byte, which keeps keys short and
// makes a stream's key prefix never a prefix of another stream's.
const MaxNameLen = 255

// Value format versions, the first byte of every value this package encodes,
// so that a later release can change the layout and still read old data.
const (
	msgFormatV1    byte = 1 // one message: format, HLC(8), payload
	msgFormatBlock byte = 2 // consecutive messages: format, count, then per message HLC(8), len, payload
	streamFormatV1 byte = 1
)

// blockBytes is the payload a block of messages gathers before the next
// message starts a new block. One key per block instead of per message
// spares pebble a memtable insert, and the flush and compaction work, per
// message; blocks stay small enough that reading one message back decodes
// little.
const blockBytes = 32 << 10

func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("storage: %s name is empty: %w", what, ErrInvalid)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("storage: %s name %.20q… is %d bytes, longer than %d: %w",
			what, name, len(name), MaxNameLen, ErrInvalid)
	}
	return nil
}

func appendName(dst []byte, name string) []byte {
	dst = append(dst, byte(len(name)))
	return append(dst, name...)
}

// streamPrefix returns p | name(origin) | name(stream).
func streamPrefix(p byte, origin, stream string) []byte {
	k := make([]byte, 0, 3+len(origin)+len(stream)+9)
	k = append(k, p)
	k = appendName(k, origin)
	return appendName(k, stream)
}

func msgKey(origin, stream string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(streamPrefix(prefixMsg, origin, stream), seq)
}

func streamStateKey(origin, stream string) []byte {
	return streamPrefix(prefixStream, origin, stream)
}

func ackKey(origin, stream, level string) []byte {
	return append(streamPrefix(prefixAck, origin, stream), level...)
}

func metaKey(key string) []byte {
	return append([]byte{prefixMeta}, key...)
}

func appPrefix(ns string) []byte {
	k := make([]byte, 0, 2+len(ns))
	k = append(k, prefixApp)
	return appendName(k, ns)
}

func appKey(ns string, key []byte) []byte {
	return appendAppKey(make([]byte, 0, 2+len(ns)+len(key)), ns, key)
}

// appendAppKey appends prefixApp | name(ns) | key to dst.
func appendAppKey(dst []byte, ns string, key []byte) []byte {
	dst = append(dst, prefixApp)
	dst = appendName(dst, ns)
	return append(dst, key...)
}

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff).
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// readName decodes a length-prefixed name at the front of b.
func readName(b []byte) (name string, rest []byte, ok bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

// decodeStreamKey splits p | name(origin) | name(stream) | rest.
func decodeStreamKey(k []byte) (origin, stream string, rest []byte, ok bool) {
	if len(k) < 1 {
		return "", "", nil, false
	}
	origin, rest, ok = readName(k[1:])
	if !ok {
		return "", "", nil, false
	}
	stream, rest, ok = readName(rest)
	return origin, stream, rest, ok
}

func encodeMsgValue(m Message) []byte {
	v := make([]byte, 9+m.size())
	v[0] = msgFormatV1
	binary.BigEndian.PutUint64(v[1:9], m.HLC)
	copy(v[9+copy(v[9:], m.Head):], m.Payload)
	return v
}

// nextBlock returns how many of msgs go into the next block: at least one,
// and more while the block's payload stays under blockBytes.
func nextBlock(msgs []Message) int {
	n, size := 1, msgs[0].size()
	for n < len(msgs) && size+msgs[n].size() <= blockBytes {
		size += msgs[n].size()
		n++
	}
	return n
}

// blockLen is the encoded size of a block of msgs.
func blockLen(msgs []Message) int {
	n := 1 + uvarintLen(uint64(len(msgs)))
	for _, m := range msgs {
		n += 8 + uvarintLen(uint64(m.size())) + m.size()
	}
	return n
}

// putBlock encodes msgs as a block into v, which has blockLen(msgs) bytes.
func putBlock(v []byte, msgs []Message) {
	v[0] = msgFormatBlock
	i := 1 + binary.PutUvarint(v[1:], uint64(len(msgs)))
	for _, m := range msgs {
		binary.BigEndian.PutUint64(v[i:], m.HLC)
		i += 8
		i += binary.PutUvarint(v[i:], uint64(m.size()))
		i += copy(v[i:], m.Head)
		i += copy(v[i:], m.Payload)
	}
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// decodeMsgs calls fn with each message of a value stored under the seq of
// its last message, in order, until fn returns false. The payloads alias
// v. Both formats are read: a store written before blocks holds one message
// per value.
func decodeMsgs(last uint64, v []byte, fn func(m Message) bool) error {
	bad := func() error {
		return fmt.Errorf("storage: messages up to %d: bad value encoding (%d bytes): %w", last, len(v), ErrCorrupt)
	}
	if len(v) == 0 {
		return bad()
	}
	switch v[0] {
	case msgFormatV1:
		if len(v) < 9 {
			return bad()
		}
		fn(Message{Seq: last, HLC: binary.BigEndian.Uint64(v[1:9]), Payload: v[9:]})
		return nil
	case msgFormatBlock:
	default:
		return bad()
	}
	count, w := binary.Uvarint(v[1:])
	if w <= 0 || count == 0 || count > last || count > uint64(len(v)) {
		return bad()
	}
	rest := v[1+w:]
	for seq := last - count + 1; seq <= last; seq++ {
		if len(rest) < 8 {
			return bad()
		}
		hlc := binary.BigEndian.Uint64(rest)
		n, w := binary.Uvarint(rest[8:])
		if w <= 0 || n > uint64(len(rest)-8-w) {
			return bad()
		}
		rest = rest[8+w:]
		if !fn(Message{Seq: seq, HLC: hlc, Payload: rest[:n:n]}) {
			return nil
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return bad()
	}
	return nil
}

// streamState is what the store keeps per stream besides its messages.
type streamState struct {
	head      uint64 // highest seq persisted; every seq in (truncated, head] is present
	truncated uint64 // every seq <= truncated has been deleted
}

func encodeStreamState(st streamState) []byte {
	v := make([]byte, 17)
	v[0] = streamFormatV1
	binary.BigEndian.PutUint64(v[1:9], st.head)
	binary.BigEndian.PutUint64(v[9:17], st.truncated)
	return v
}

func decodeStreamState(v []byte) (streamState, bool) {
	if len(v) != 17 || v[0] != streamFormatV1 {
		return streamState{}, false
	}
	return streamState{
		head:      binary.BigEndian.Uint64(v[1:9]),
		truncated: binary.BigEndian.Uint64(v[9:17]),
	}, true
}
