package storage

import (
	"encoding/binary"
	"fmt"
)

// Key spaces. Every key starts with one of these bytes so that the spaces
// never interleave and each can be scanned or range-deleted on its own.
const (
	prefixMeta   byte = 0x01 // metadata: prefixMeta | key
	prefixMsg    byte = 0x02 // messages: prefixMsg | name(origin) | name(stream) | seq(8, big-endian)
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
	msgFormatV1    byte = 1
	streamFormatV1 byte = 1
)

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
	return append(appPrefix(ns), key...)
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
	v := make([]byte, 9+len(m.Payload))
	v[0] = msgFormatV1
	binary.BigEndian.PutUint64(v[1:9], m.HLC)
	copy(v[9:], m.Payload)
	return v
}

func decodeMsgValue(seq uint64, v []byte) (Message, error) {
	if len(v) < 9 || v[0] != msgFormatV1 {
		return Message{}, fmt.Errorf("storage: message %d: bad value encoding (%d bytes): %w", seq, len(v), ErrCorrupt)
	}
	return Message{
		Seq:     seq,
		HLC:     binary.BigEndian.Uint64(v[1:9]),
		Payload: append([]byte(nil), v[9:]...),
	}, nil
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
