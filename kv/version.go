package kv

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// Op kinds in the payload of a kv stream message.
const (
	opPut    byte = 1
	opDelete byte = 2
)

// errBadOp is wrapped by errors decoding a stream message.
var errBadOp = errors.New("kv: malformed operation")

// encodeOp is the payload of a write: kind, key length, key, value.
func encodeOp(kind byte, key string, value []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen32+len(key)+len(value))
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// decodeOp splits a kv stream message. The key stays in p: the apply path
// needs a string of it only when it tells watchers.
func decodeOp(p []byte) (kind byte, key, value []byte, err error) {
	if len(p) < 2 || (p[0] != opPut && p[0] != opDelete) {
		return 0, nil, nil, fmt.Errorf("%w: %d bytes", errBadOp, len(p))
	}
	n, w := binary.Uvarint(p[1:])
	if w <= 0 || n > uint64(len(p)-1-w) {
		return 0, nil, nil, fmt.Errorf("%w: key length", errBadOp)
	}
	rest := p[1+w:]
	return p[0], rest[:n], rest[n:], nil
}

// Version is one write of a key: a value or a deletion, with where and when
// it was written.
type Version struct {
	Key     string
	Value   []byte
	Deleted bool
	Origin  string
	Seq     uint64
	HLC     stabilizer.HLC
}

// Newer reports whether v wins over o under last writer wins: the higher
// HLC, and between equal HLCs the greater origin name. Every site decides
// the same way, so all converge on one value per key.
func (v *Version) Newer(o *Version) bool {
	if v.HLC != o.HLC {
		return o.HLC.Less(v.HLC)
	}
	return v.Origin > o.Origin
}

// versionFromEntry decodes a kv stream message into the version it writes,
// all but its Key, and returns the key, which still points into the entry.
func versionFromEntry(e *stabilizer.Entry) (Version, []byte, error) {
	kind, key, value, err := decodeOp(e.Payload)
	if err != nil {
		return Version{}, nil, fmt.Errorf("%s seq %d: %w", e.Stream, e.Seq, err)
	}
	return Version{Value: value, Deleted: kind == opDelete, Origin: e.Stream.Origin, Seq: e.Seq, HLC: e.HLC}, key, nil
}

// versionOverhead bounds what appendVersion adds to the value and origin.
const versionOverhead = 1 + 4*binary.MaxVarintLen64

// appendVersion appends a version without its key (the key is in the
// storage key) to b: flags, origin, seq, wall, logical, value.
func appendVersion(b []byte, v *Version) []byte {
	var flags byte
	if v.Deleted {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(v.Origin)))
	b = append(b, v.Origin...)
	b = binary.AppendUvarint(b, v.Seq)
	b = binary.AppendVarint(b, v.HLC.Wall)
	b = binary.AppendUvarint(b, uint64(v.HLC.Logical))
	return append(b, v.Value...)
}

func decodeVersion(key string, b []byte) (Version, error) {
	bad := fmt.Errorf("kv: corrupt version of %q", key)
	if len(b) < 1 {
		return Version{}, bad
	}
	v := Version{Key: key, Deleted: b[0]&1 != 0}
	b = b[1:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return Version{}, bad
	}
	v.Origin = string(b[w : w+int(n)])
	b = b[w+int(n):]
	var ok bool
	if v.Seq, b, ok = uvarint(b); !ok {
		return Version{}, bad
	}
	wall, w2 := binary.Varint(b)
	if w2 <= 0 {
		return Version{}, bad
	}
	b = b[w2:]
	var logical uint64
	if logical, b, ok = uvarint(b); !ok {
		return Version{}, bad
	}
	v.HLC = stabilizer.HLC{Wall: wall, Logical: uint32(logical)}
	v.Value = append([]byte(nil), b...)
	return v, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, nil, false
	}
	return v, b[w:], true
}
