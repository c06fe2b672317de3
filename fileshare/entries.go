package fileshare

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// A files stream entry is one chunk, in one of two layouts:
//
//   - an upload: the chunk's bytes alone; its hash is computed from them.
//   - a relocation: relocMagic, the chunk's SHA-256, the chunk's bytes. The
//     collector writes one to move a live chunk out of a prefix of its
//     site's stream that it is about to drop, and a site asked for a chunk
//     it lacks answers with one (see gc.go). Every site records it as the
//     chunk's location even when it holds the chunk already, which is what
//     lets every site drop the old entry; an upload of bytes a site holds
//     already changes nothing there.
//
// An upload laid out like a relocation (the magic, then the hash of what
// follows) is refused (put): only deliberately made bytes look so.
var relocMagic = [8]byte{0, 's', 't', 'b', 'r', 'e', 'l', 1}

const relocHeader = len(relocMagic) + sha256.Size

// relocFrame returns the payload of a relocation entry of chunk h.
func relocFrame(h [32]byte, data []byte) []byte {
	b := make([]byte, 0, relocHeader+len(data))
	b = append(b, relocMagic[:]...)
	b = append(b, h[:]...)
	return append(b, data...)
}

// parseEntry reads a files stream entry's payload: the chunk's hash and
// bytes, and whether it is a relocation. ok is false for a payload that is
// no valid chunk (empty or too large). It hashes the payload once.
func parseEntry(p []byte) (h [32]byte, data []byte, reloc, ok bool) {
	if h, ok := relocated(p); ok {
		data = p[relocHeader:]
		return h, data, true, len(data) <= MaxChunkBytes
	}
	if len(p) == 0 || len(p) > MaxChunkBytes {
		return h, nil, false, false
	}
	return sha256.Sum256(p), p, false, true
}

// relocated says whether p is laid out as a relocation entry (the marker,
// then the hash of what follows), and the hash. It hashes only a payload
// that starts with the marker.
func relocated(p []byte) ([32]byte, bool) {
	if len(p) <= relocHeader || !bytes.Equal(p[:len(relocMagic)], relocMagic[:]) {
		return [32]byte{}, false
	}
	h := [32]byte(p[len(relocMagic):relocHeader])
	return h, sha256.Sum256(p[relocHeader:]) == h
}

// looksRelocated reports whether uploaded bytes would be read back as a
// relocation entry. Bytes that do not start with the marker (all but
// deliberately made ones) cost no hashing.
func looksRelocated(data []byte) bool {
	_, ok := relocated(data)
	return ok
}

// ownEntry is what the site knows of an entry it appended to one of its
// own files streams: the chunk it holds and whether it is a relocation,
// checked when it was appended, so that Apply need not hash it again.
type ownEntry struct {
	h     [32]byte
	reloc bool
}

// parseOwn is parseEntry for an entry the site appended itself, known k.
func parseOwn(p []byte, k ownEntry) (h [32]byte, data []byte, reloc, ok bool) {
	if k.reloc {
		return k.h, p[relocHeader:], true, true
	}
	return k.h, p, false, true
}

// prefixEntry + stream + seq keys what the site's copy of a files stream
// entry holds (entryMeta): the collector's index of the logs, so that it
// knows what each entry is and weighs without reading the log. Written by
// the applier with the entry's application, deleted once the entry is
// truncated. The stream is written as its origin (length first) for stream
// Stream, the format from before transfers were striped, so that the index
// a site wrote then stays valid, and as origin+"\x00"+name (length first)
// for the other stripes: no site's name holds a NUL byte (New refuses
// one), so neither is ever the other, and no stream's keys fall under
// another's prefix (entryPrefix).
const prefixEntry = 'e'

// entryMeta is what the index says of one files stream entry.
type entryMeta struct {
	Seq   uint64
	Hash  [32]byte // zero when Bad
	Size  uint32   // of the payload as stored, header included
	Reloc bool
	Bad   bool // no valid chunk: skipped by the applier
}

const (
	metaReloc = 1 << iota
	metaBad
)

// entryPrefix is the index prefix of one files stream.
func entryPrefix(id stabilizer.StreamID) []byte {
	n := len(id.Origin)
	if id.Name != Stream {
		n += 1 + len(id.Name)
	}
	b := binary.AppendUvarint([]byte{prefixEntry}, uint64(n))
	b = append(b, id.Origin...)
	if id.Name != Stream {
		b = append(append(b, 0), id.Name...)
	}
	return b
}

func entryKey(id stabilizer.StreamID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(entryPrefix(id), seq)
}

// decodeEntryKey splits an index key into stream and seq.
func decodeEntryKey(k []byte) (stabilizer.StreamID, uint64, bool) {
	if len(k) < 1 || k[0] != prefixEntry {
		return stabilizer.StreamID{}, 0, false
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)-1-w) != n+8 {
		return stabilizer.StreamID{}, 0, false
	}
	c := k[1+w : 1+w+int(n)]
	id := stabilizer.StreamID{Origin: string(c), Name: Stream}
	if i := bytes.IndexByte(c, 0); i >= 0 {
		id = stabilizer.StreamID{Origin: string(c[:i]), Name: string(c[i+1:])}
		if id.Name == Stream || !isStripe(id.Name) {
			return stabilizer.StreamID{}, 0, false
		}
	}
	return id, binary.BigEndian.Uint64(k[1+w+int(n):]), true
}

func encodeEntryMeta(m entryMeta) []byte {
	var flags byte
	if m.Reloc {
		flags |= metaReloc
	}
	if m.Bad {
		flags |= metaBad
	}
	b := []byte{flags}
	if !m.Bad {
		b = append(b, m.Hash[:]...)
	}
	return binary.AppendUvarint(b, uint64(m.Size))
}

var errCorruptEntryMeta = errors.New("fileshare: corrupt entry index record")

func decodeEntryMeta(seq uint64, b []byte) (entryMeta, error) {
	m := entryMeta{Seq: seq}
	if len(b) < 1 || b[0]&^(metaReloc|metaBad) != 0 {
		return m, errCorruptEntryMeta
	}
	m.Reloc, m.Bad = b[0]&metaReloc != 0, b[0]&metaBad != 0
	b = b[1:]
	if !m.Bad {
		if len(b) < 32 {
			return m, errCorruptEntryMeta
		}
		m.Hash, b = [32]byte(b[:32]), b[32:]
	}
	size, k := binary.Uvarint(b)
	if k <= 0 || k != len(b) || size > math.MaxUint32 {
		return m, errCorruptEntryMeta
	}
	m.Size = uint32(size)
	return m, nil
}
