package segment

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The on-disk format; doc.go describes it in prose.

// castagnoli is the CRC-32C table; hash/crc32 uses the CPU's instruction
// for it. It is never written after initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	fileMagic     = "STBSEG"
	formatVersion = 1
	// fileHeaderFixed is the file header's size without the two names:
	// magic, version, two name lengths, CRC.
	fileHeaderFixed = len(fileMagic) + 1 + 2 + 4
	maxFileHeader   = fileHeaderFixed + 2*MaxNameLen

	recHeaderLen = 32
	// recMagic makes a zeroed or shifted header fail before its checksums
	// are even computed, and makes records easy to spot in a hex dump.
	recMagic = "srec"

	segSuffix = ".seg"
	// segNameLen is the length of a segment file's name: 20 digits, the
	// suffix.
	segNameLen = 20 + len(segSuffix)
	// maxDirName is the longest file name common filesystems take.
	maxDirName = 255
	// lockName is the lock file in Dir that keeps two stores off one
	// directory. Stream directories always contain '.' or start with '~'.
	lockName = "LOCK"
)

// errVersion reports a segment written by a newer format: Open refuses to
// touch it rather than cut it.
var errVersion = errors.New("unsupported format version")

// fileHeaderLen is the size of the file header of a segment of (origin,
// stream).
func fileHeaderLen(origin, stream string) int {
	return fileHeaderFixed + len(origin) + len(stream)
}

// appendFileHeader appends a segment file's header to b. Each segment names
// its stream, so a file says what it holds wherever it is found.
func appendFileHeader(b []byte, origin, stream string) []byte {
	start := len(b)
	b = append(b, fileMagic...)
	b = append(b, formatVersion, byte(len(origin)), byte(len(stream)))
	b = append(b, origin...)
	b = append(b, stream...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseFileHeader decodes the file header at the start of b, returning the
// names and the header's length. A short, zeroed or damaged header is an
// error; a header of an unknown version wraps errVersion.
func parseFileHeader(b []byte) (origin, stream string, n int, err error) {
	if len(b) < len(fileMagic)+3 {
		return "", "", 0, fmt.Errorf("file header: %d bytes, short", len(b))
	}
	if string(b[:len(fileMagic)]) != fileMagic {
		return "", "", 0, fmt.Errorf("file header: bad magic %q", b[:len(fileMagic)])
	}
	if v := b[len(fileMagic)]; v != formatVersion {
		return "", "", 0, fmt.Errorf("file header: %w %d", errVersion, v)
	}
	lo, ls := int(b[len(fileMagic)+1]), int(b[len(fileMagic)+2])
	n = fileHeaderFixed + lo + ls
	if lo == 0 || ls == 0 || len(b) < n {
		return "", "", 0, fmt.Errorf("file header: names of %d and %d bytes in %d bytes", lo, ls, len(b))
	}
	if crc32.Checksum(b[:n-4], castagnoli) != binary.LittleEndian.Uint32(b[n-4:]) {
		return "", "", 0, errors.New("file header: checksum mismatch")
	}
	names := b[len(fileMagic)+3 : n-4]
	return string(names[:lo]), string(names[lo:]), n, nil
}

// recHeader is a decoded record header.
//
//	0  4  CRC-32C of bytes 4..32 and the payload
//	4  4  CRC-32C of bytes 8..32 (the header alone)
//	8  4  payload length
//	12 4  "srec"
//	16 8  seq
//	24 8  HLC
//
// All integers are little-endian.
type recHeader struct {
	crc    uint32
	length uint32
	seq    uint64
	hlc    uint64
}

// putRecHeader encodes the header of a record whose payload is head then
// payload into b[:recHeaderLen].
func putRecHeader(b []byte, seq, hlc uint64, head, payload []byte) {
	binary.LittleEndian.PutUint32(b[8:], uint32(len(head)+len(payload)))
	copy(b[12:16], recMagic)
	binary.LittleEndian.PutUint64(b[16:], seq)
	binary.LittleEndian.PutUint64(b[24:], hlc)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:recHeaderLen], castagnoli))
	c := crc32.Update(0, castagnoli, b[4:recHeaderLen])
	c = crc32.Update(c, castagnoli, head)
	binary.LittleEndian.PutUint32(b[0:], crc32.Update(c, castagnoli, payload))
}

// parseRecHeader decodes b[:recHeaderLen], checking the magic, the header's
// own checksum and the length bound. It does not check the payload.
func parseRecHeader(b []byte) (recHeader, error) {
	if string(b[12:16]) != recMagic {
		return recHeader{}, errors.New("bad record magic")
	}
	if crc32.Checksum(b[8:recHeaderLen], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return recHeader{}, errors.New("record header checksum mismatch")
	}
	h := recHeader{
		crc:    binary.LittleEndian.Uint32(b[0:]),
		length: binary.LittleEndian.Uint32(b[8:]),
		seq:    binary.LittleEndian.Uint64(b[16:]),
		hlc:    binary.LittleEndian.Uint64(b[24:]),
	}
	if h.length > MaxRecordBytes {
		return recHeader{}, fmt.Errorf("record length %d above %d", h.length, MaxRecordBytes)
	}
	return h, nil
}

// startCRC begins the record checksum from the header's encoded bytes.
func startCRC(hdr []byte) uint32 { return crc32.Update(0, castagnoli, hdr[4:recHeaderLen]) }

// decodeRecord checks a whole record (header and payload) in b and returns
// its header and payload. want is the seq the index expects there.
func decodeRecord(b []byte, want uint64) (recHeader, []byte, error) {
	if len(b) < recHeaderLen {
		return recHeader{}, nil, fmt.Errorf("record of %d bytes, short", len(b))
	}
	h, err := parseRecHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.seq != want {
		return h, nil, fmt.Errorf("record holds seq %d", h.seq)
	}
	if int(h.length) != len(b)-recHeaderLen {
		return h, nil, fmt.Errorf("record length %d, index says %d", h.length, len(b)-recHeaderLen)
	}
	p := b[recHeaderLen:]
	if crc32.Update(startCRC(b), castagnoli, p) != h.crc {
		return h, nil, errors.New("record checksum mismatch")
	}
	return h, p, nil
}

// encName escapes a name for a file name: lower-case letters, digits, '-'
// and '_' stay, every other byte becomes %XX. Upper case is escaped too, so
// that two names never share a directory on a case-insensitive filesystem,
// and '.' is, so that it can join two names.
func encName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// decName reverses encName; it accepts only encName's own output, so that
// one name has one directory.
func decName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	d := b.String()
	return d, d != "" && len(d) <= MaxNameLen && encName(d) == s
}

// streamDirName names the directory of (origin, stream): the two escaped
// names joined by '.', or, when that is longer than a file name may be, '~'
// and a hash of both (the names are then read from a segment's header).
func streamDirName(origin, stream string) string {
	if n := encName(origin) + "." + encName(stream); len(n) <= maxDirName {
		return n
	}
	return hashedDirName(origin, stream)
}

func hashedDirName(origin, stream string) string {
	h := sha256.New()
	h.Write([]byte{byte(len(origin))})
	h.Write([]byte(origin))
	h.Write([]byte{byte(len(stream))})
	h.Write([]byte(stream))
	return "~" + hex.EncodeToString(h.Sum(nil)[:20])
}

// parseStreamDirName recognises a stream directory's name. For a hashed
// name it returns hashed and no names.
func parseStreamDirName(name string) (origin, stream string, hashed, ok bool) {
	if rest, found := strings.CutPrefix(name, "~"); found {
		b, err := hex.DecodeString(rest)
		return "", "", true, err == nil && len(b) == 20 && hex.EncodeToString(b) == rest
	}
	o, s, found := strings.Cut(name, ".")
	if !found {
		return "", "", false, false
	}
	origin, ok1 := decName(o)
	stream, ok2 := decName(s)
	if !ok1 || !ok2 || streamDirName(origin, stream) != name {
		return "", "", false, false
	}
	return origin, stream, false, true
}

// segName names the segment file whose first record is first; zero-padded
// so that names sort as seqs do.
func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// parseSegName returns the first seq a segment file name stands for.
func parseSegName(name string) (uint64, bool) {
	if len(name) != segNameLen || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	v, err := strconv.ParseUint(name[:20], 10, 64)
	return v, err == nil && v > 0
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	const chunk = 64
	var zero [chunk]byte
	for len(b) >= chunk {
		if !bytes.Equal(b[:chunk], zero[:]) {
			return false
		}
		b = b[chunk:]
	}
	return bytes.Equal(b, zero[:len(b)])
}
