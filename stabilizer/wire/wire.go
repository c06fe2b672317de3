package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// format is the first byte of every encoded message; a decoder refuses
// others, so the encoding can change behind a new format byte.
// Format 2 added the flags byte after Reason.
const format byte = 2

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("wire: malformed message")

// SizeHint returns an upper bound of the encoded size of m, to size the
// buffer given to Append so that large batches are copied once.
func SizeHint(m *core.Message) int {
	const v = binary.MaxVarintLen64
	n := 3 + 6*v + len(m.From) + len(m.To) + len(m.Reason) + 4*v
	for i := range m.Entries {
		e := &m.Entries[i]
		n += 6*v + len(e.Stream.Origin) + len(e.Stream.Name) + len(e.Payload)
	}
	for _, ps := range [][]core.Position{m.Positions, m.Heads} {
		for i := range ps {
			n += 5*v + len(ps[i].Stream.Origin) + len(ps[i].Stream.Name)
		}
	}
	for i := range m.Cells {
		c := &m.Cells[i]
		n += 8*v + len(c.Stream.Origin) + len(c.Stream.Name) + len(c.Site)
	}
	return n
}

// Append appends the encoding of m to dst.
func Append(dst []byte, m *core.Message) []byte {
	dst = append(dst, format, byte(m.Type))
	dst = appendString(dst, m.From)
	dst = appendString(dst, m.To)
	dst = binary.AppendUvarint(dst, m.Session)
	dst = binary.AppendUvarint(dst, uint64(m.Version))
	dst = binary.AppendUvarint(dst, m.Schema)
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for i := range m.Entries {
		e := &m.Entries[i]
		dst = appendStream(dst, e.Stream)
		dst = binary.AppendUvarint(dst, e.Seq)
		dst = appendHLC(dst, e.HLC)
		dst = appendBytes(dst, e.Payload)
	}
	dst = appendPositions(dst, m.Positions)
	dst = appendHLC(dst, m.Clock)
	dst = appendPositions(dst, m.Heads)
	dst = binary.AppendUvarint(dst, uint64(len(m.Cells)))
	for _, c := range m.Cells {
		dst = appendStream(dst, c.Stream)
		dst = appendString(dst, c.Site)
		dst = binary.AppendUvarint(dst, uint64(c.Level))
		dst = binary.AppendUvarint(dst, c.Seq)
		dst = appendHLC(dst, c.HLC)
	}
	dst = appendString(dst, m.Reason)
	var flags byte
	if m.Bulk {
		flags |= flagBulk
	}
	return append(dst, flags)
}

// flagBulk marks a Bulk message (informative: a receiver treats Data alike
// on every plane).
const flagBulk = 1

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStream(dst []byte, s core.StreamID) []byte {
	return appendString(appendString(dst, s.Origin), s.Name)
}

func appendHLC(dst []byte, h core.HLC) []byte {
	dst = binary.AppendVarint(dst, h.Wall)
	return binary.AppendUvarint(dst, uint64(h.Logical))
}

func appendPositions(dst []byte, ps []core.Position) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	for _, p := range ps {
		dst = appendStream(dst, p.Stream)
		dst = binary.AppendUvarint(dst, p.Seq)
		dst = appendHLC(dst, p.HLC)
	}
	return dst
}

// Decode decodes one message. Entry payloads alias b.
func Decode(b []byte) (core.Message, error) {
	d := decoder{b: b}
	var m core.Message
	if f := d.byte(); f != format && d.err == nil {
		return m, fmt.Errorf("%w: format %d, want %d (a peer running another version?)", ErrMalformed, f, format)
	}
	m.Type = core.MsgType(d.byte())
	m.From = d.string()
	m.To = d.string()
	m.Session = d.uvarint()
	m.Version = d.uint32()
	m.Schema = d.uvarint()
	if n := d.count(8); n > 0 {
		m.Entries = make([]core.Entry, n)
		for i := range m.Entries {
			e := &m.Entries[i]
			e.Stream = d.stream()
			e.Seq = d.uvarint()
			e.HLC = d.hlc()
			e.Payload = d.bytes()
		}
	}
	m.Positions = d.positions()
	m.Clock = d.hlc()
	m.Heads = d.positions()
	if n := d.count(8); n > 0 {
		m.Cells = make([]core.AckCell, n)
		for i := range m.Cells {
			c := &m.Cells[i]
			c.Stream = d.stream()
			c.Site = d.string()
			c.Level = int(d.uint32())
			c.Seq = d.uvarint()
			c.HLC = d.hlc()
		}
	}
	m.Reason = d.string()
	flags := d.byte()
	if flags&^flagBulk != 0 && d.err == nil {
		d.fail("unknown flags %#x", flags)
	}
	m.Bulk = flags&flagBulk != 0
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return core.Message{}, d.err
	}
	return m, nil
}

// decoder reads fields off b; after the first error every read returns a
// zero value, so Decode checks once at the end.
type decoder struct {
	b    []byte
	err  error
	last core.StreamID // the previous stream read; batches repeat it
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail("value %d out of range", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list length, refusing one that the remaining bytes cannot
// hold (each element takes at least min bytes), so a forged length cannot
// make Decode allocate more than the input justifies.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("list of %d elements in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length %d beyond the %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.bytes()) }

// stream reads a stream ID, reusing the previous one's strings when they
// repeat, which saves two allocations per entry of a batch.
func (d *decoder) stream() core.StreamID {
	origin, name := d.bytes(), d.bytes()
	if string(origin) != d.last.Origin || string(name) != d.last.Name {
		d.last = core.StreamID{Origin: string(origin), Name: string(name)}
	}
	return d.last
}

func (d *decoder) hlc() core.HLC {
	return core.HLC{Wall: d.varint(), Logical: d.uint32()}
}

func (d *decoder) positions() []core.Position {
	n := d.count(5)
	if n == 0 {
		return nil
	}
	ps := make([]core.Position, n)
	for i := range ps {
		ps[i] = core.Position{Stream: d.stream(), Seq: d.uvarint(), HLC: d.hlc()}
	}
	return ps
}
