package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

// FuzzDecode feeds arbitrary bytes to the decoders and, as a segment file,
// to Open: nothing panics, and every record Read returns is one the bytes
// hold whole, checksum included. The file is tried as a stream's only
// segment (checked whole by Open) and as a sealed one before two others
// (checked by its headers, its payloads on Read).
func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _, _ = parseFileHeader(data)
		if len(data) >= recHeaderLen {
			_, _ = parseRecHeader(data)
			_, _, _ = decodeRecord(data, 1)
		}
		fuzzOpen(t, data, false)
		fuzzOpen(t, data, true)
	})
}

// fuzzOpen opens a store whose stream o/s has data as its segment 1 and
// checks what it reads.
func fuzzOpen(t *testing.T, data []byte, sealed bool) {
	fs := vfs.NewMem()
	dir := streamDir(fs, "o", "s")
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, fs.PathJoin(dir, segName(1)), data)
	if sealed {
		// Far-off seqs: Open deletes them as following a gap, after
		// walking data by its headers alone.
		for _, first := range []uint64{1 << 40, 1<<40 + 1} {
			seg := appendFileHeader(nil, "o", "s")
			var hdr [recHeaderLen]byte
			putRecHeader(hdr[:], first, 0, nil, []byte("x"))
			writeFile(t, fs, fs.PathJoin(dir, segName(first)), append(append(seg, hdr[:]...), 'x'))
		}
	}
	s, err := Open(Config{Dir: testDir, FS: fs, Logger: hclog.NewNullLogger()})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open: %v", err)
		}
		return
	}
	defer s.Close()
	si, ok := info(s, "o", "s")
	if !ok {
		return
	}
	got, err := s.Read("o", "s", si.First, 0, 0)
	if err != nil && (!sealed || !errors.Is(err, ErrCorrupt)) {
		t.Fatalf("read %d..%d: %v", si.First, si.Head, err)
	}
	for _, r := range got {
		enc := make([]byte, recHeaderLen, recHeaderLen+len(r.Payload))
		putRecHeader(enc, r.Seq, r.HLC, nil, r.Payload)
		if !bytes.Contains(data, append(enc, r.Payload...)) {
			t.Fatalf("read seq %d, a record the file does not hold", r.Seq)
		}
	}
	if err := s.Append("o", "s", []Record{{Seq: si.Head + 1, Payload: []byte("next")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read("o", "s", si.Head+1, 0, 0); err != nil || len(got) != 1 || string(got[0].Payload) != "next" {
		t.Fatalf("read the next record: %v, %v", got, err)
	}
}

// fuzzSeeds returns segment files a store wrote, and damaged copies.
func fuzzSeeds(t testing.TB) [][]byte {
	fs := vfs.NewMem()
	s := openTest(t, fs)
	mustAppend(t, s, "o", "s",
		Record{Seq: 1, HLC: 5, Payload: nil},
		Record{Seq: 2, HLC: 6, Head: []byte("h"), Payload: []byte("payload")},
		Record{Seq: 3, HLC: 7, Payload: bytes.Repeat([]byte{0xab}, 300)})
	mustSync(t, s)
	good := readFile(t, fs, fs.PathJoin(streamDir(fs, "o", "s"), segName(1)))
	seeds := [][]byte{good, nil, good[:fileHeaderLen("o", "s")], append(bytes.Clone(good), make([]byte, 40)...)}
	for _, n := range []int{10, 20, 60, len(good) - 5} {
		seeds = append(seeds, good[:n])
	}
	for _, i := range []int{3, 20, 40, len(good) - 1} {
		b := bytes.Clone(good)
		b[i] ^= 1
		seeds = append(seeds, b)
	}
	return seeds
}
