package stabilizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Frame kinds.
const (
	frameRequest = 'Q' // receiver -> source: send stream from after, this much
	frameCredit  = 'C' // receiver -> source: this much more
	frameData    = 'D' // source -> receiver: keys, values; done at the end
	frameError   = 'E' // source -> receiver: cannot serve
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// xferFrame is every field any frame kind uses.
type xferFrame struct {
	kind     byte
	req      uint64
	stream   StreamID
	snapshot string
	after    []byte // request: resume after this key (nil: from the start)
	credit   uint64 // request, credit: bytes the source may send ahead

	// data
	pos        uint64 // the snapshot's position of the stream
	clock      HLC    // the source's clock when it took the snapshot
	totalKeys  uint64
	totalBytes uint64
	sum        []byte // SHA-256 of every key and value, in order
	pairs      [][2][]byte
	done       bool

	// error
	unknown bool // the snapshot is gone: start over
	msg     string
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func (f *xferFrame) encode() []byte {
	b := []byte{f.kind}
	b = binary.AppendUvarint(b, f.req)
	switch f.kind {
	case frameRequest:
		b = appendName(appendName(b, f.stream.Origin), f.stream.Name)
		b = appendName(b, f.snapshot)
		b = append(b, boolByte(f.after != nil))
		b = appendBytes(b, f.after)
		b = binary.AppendUvarint(b, f.credit)
	case frameCredit:
		b = binary.AppendUvarint(b, f.credit)
	case frameData:
		b = appendName(b, f.snapshot)
		b = binary.AppendUvarint(b, f.pos)
		b = appendHLC(b, f.clock)
		b = binary.AppendUvarint(b, f.totalKeys)
		b = binary.AppendUvarint(b, f.totalBytes)
		b = appendBytes(b, f.sum)
		b = binary.AppendUvarint(b, uint64(len(f.pairs)))
		for _, p := range f.pairs {
			b = appendBytes(appendBytes(b, p[0]), p[1])
		}
		b = append(b, boolByte(f.done))
	case frameError:
		b = append(b, boolByte(f.unknown))
		b = appendName(b, f.msg)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

var errBadFrame = errors.New("stabilizer: malformed state transfer frame")

// xferReader decodes; the first failure sticks.
type xferReader struct {
	b   []byte
	err error
}

func (r *xferReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadFrame
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *xferReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadFrame
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *xferReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errBadFrame
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *xferReader) hlc() HLC {
	if r.err != nil {
		return HLC{}
	}
	h, rest, err := readHLC(r.b)
	if err != nil {
		r.err = errBadFrame
	}
	r.b = rest
	return h
}

func decodeXfer(b []byte) (*xferFrame, error) {
	if len(b) < 5 {
		return nil, errBadFrame
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	r := &xferReader{b: body[1:]}
	f := &xferFrame{kind: body[0], req: r.uvarint()}
	switch f.kind {
	case frameRequest:
		f.stream = StreamID{Origin: string(r.bytes()), Name: string(r.bytes())}
		f.snapshot = string(r.bytes())
		resume := r.byte() == 1
		after := r.bytes()
		if resume {
			f.after = append([]byte{}, after...)
		}
		f.credit = r.uvarint()
	case frameCredit:
		f.credit = r.uvarint()
	case frameData:
		f.snapshot = string(r.bytes())
		f.pos = r.uvarint()
		f.clock = r.hlc()
		f.totalKeys = r.uvarint()
		f.totalBytes = r.uvarint()
		f.sum = r.bytes()
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			return nil, errBadFrame
		}
		f.pairs = make([][2][]byte, 0, n)
		for range n {
			f.pairs = append(f.pairs, [2][]byte{r.bytes(), r.bytes()})
		}
		f.done = r.byte() == 1
	case frameError:
		f.unknown = r.byte() == 1
		f.msg = string(r.bytes())
	default:
		return nil, fmt.Errorf("%w: kind %q", errBadFrame, f.kind)
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}
