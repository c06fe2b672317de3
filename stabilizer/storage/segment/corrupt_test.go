package segment

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCorruptRecordRead: a synced record whose bytes change on disk is
// ErrCorrupt on Read, naming it, and its bytes are never returned; the
// records around it still read.
func TestCorruptRecordRead(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int64 // offset in the record
	}{
		{"payload", recHeaderLen + 10},
		{"last payload byte", recHeaderLen + 999},
		{"seq", 16},
		{"length", 8},
		{"hlc", 30},
		{"checksum", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := openTest(t, fs, segmentBytes(4096))
			mustAppend(t, s, "o", "s", fixedRecs(1, 10, 1000)...)
			mustSync(t, s)
			path, off := where(t, s, "o", "s", 6)
			flipByte(t, fs, path, off+c.at)
			got, err := s.Read("o", "s", 1, 0, 0)
			if !errors.Is(err, ErrCorrupt) || got != nil {
				t.Fatalf("read: %d records, %v; want ErrCorrupt", len(got), err)
			}
			for _, want := range []string{"seq 6", path, fmt.Sprintf("offset %d", off)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if counter(s.metrics.corruptRecords) != 1 {
				t.Errorf("corrupt records counted: %v", counter(s.metrics.corruptRecords))
			}
			if got, err := s.Read("o", "s", 1, 5, 0); err != nil || len(got) != 5 {
				t.Fatalf("read before it: %d, %v", len(got), err)
			}
			if got, err := s.Read("o", "s", 7, 0, 0); err != nil || len(got) != 4 {
				t.Fatalf("read after it: %d, %v", len(got), err)
			}
		})
	}
}

// fixedRecs returns records from..to whose payloads are n bytes of the seq.
func fixedRecs(from, to uint64, n int) []Record {
	var out []Record
	for seq := from; seq <= to; seq++ {
		out = append(out, Record{Seq: seq, HLC: seq, Payload: bytes.Repeat([]byte{byte(seq)}, n)})
	}
	return out
}

// TestOpenChecksSealedSegmentsLazily: Open reads only the headers of the
// segments before the last two, so a payload corrupted there is found by
// Read, not cut by Open.
func TestOpenChecksSealedSegmentsLazily(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs, segmentBytes(4096))
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "o", "s", fixedRecs(1, 20, 1000)...) // 5 segments
	mustSync(t, s)
	path, off := where(t, s, "o", "s", 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, fs, path, off+recHeaderLen+5)
	s = openTest(t, fs, segmentBytes(4096))
	if si, _ := info(s, "o", "s"); si.Head != 20 || counter(s.metrics.tornTails) != 0 {
		t.Fatalf("after open: %+v, %v cuts", si, counter(s.metrics.tornTails))
	}
	if _, err := s.Read("o", "s", 1, 0, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read: %v; want ErrCorrupt", err)
	}
	if got, err := s.Read("o", "s", 3, 0, 0); err != nil || len(got) != 18 {
		t.Fatalf("read after it: %d, %v", len(got), err)
	}
}

// TestOpenCuts damages a stream's files in one way each and checks where
// Open cuts it: at the first record that does not check, deleting every
// later segment, counting and logging the cut; that appending continues
// after the cut; and that a second Open finds nothing left to cut.
func TestOpenCuts(t *testing.T) {
	type files struct {
		t     *testing.T
		fs    vfs.FS
		dir   string
		segs  []uint64 // first seqs: 1, 5, 9, 13, 17 (4 records of 1000 bytes each)
		where func(seq uint64) (string, int64)
	}
	path := func(f files, first uint64) string { return f.fs.PathJoin(f.dir, segName(first)) }
	rewrite := func(f files, first uint64, edit func([]byte) []byte) {
		p := path(f, first)
		writeFile(f.t, f.fs, p, edit(readFile(f.t, f.fs, p)))
	}
	for _, c := range []struct {
		name   string
		damage func(files)
		head   uint64 // after the cut
		cut    bool   // counted as a cut
		segs   []uint64
	}{
		{"garbage tail", func(f files) {
			rewrite(f, 17, func(b []byte) []byte { return append(b, "garbage"...) })
		}, 20, true, []uint64{1, 5, 9, 13, 17}},
		{"zero tail", func(f files) {
			rewrite(f, 17, func(b []byte) []byte { return append(b, make([]byte, 5000)...) })
		}, 20, false, []uint64{1, 5, 9, 13, 17}},
		{"short header", func(f files) {
			_, off := f.where(20)
			rewrite(f, 17, func(b []byte) []byte { return b[:off+10] })
		}, 19, true, []uint64{1, 5, 9, 13, 17}},
		{"short payload", func(f files) {
			_, off := f.where(20)
			rewrite(f, 17, func(b []byte) []byte { return b[:off+recHeaderLen+500] })
		}, 19, true, []uint64{1, 5, 9, 13, 17}},
		{"zeroed payload", func(f files) {
			_, off := f.where(19)
			rewrite(f, 17, func(b []byte) []byte { clear(b[off+recHeaderLen:]); return b })
		}, 18, true, []uint64{1, 5, 9, 13, 17}},
		{"flipped payload before the last segment", func(f files) {
			p, off := f.where(14)
			flipByte(f.t, f.fs, p, off+recHeaderLen+1)
		}, 13, true, []uint64{1, 5, 9, 13}},
		{"flipped header in a sealed segment", func(f files) {
			p, off := f.where(6)
			flipByte(f.t, f.fs, p, off+20)
		}, 5, true, []uint64{1, 5}},
		{"missing segment", func(f files) {
			if err := f.fs.Remove(path(f, 9)); err != nil {
				f.t.Fatal(err)
			}
		}, 8, true, []uint64{1, 5}},
		{"first segment missing", func(f files) {
			if err := f.fs.Remove(path(f, 1)); err != nil {
				f.t.Fatal(err)
			}
		}, 20, false, []uint64{5, 9, 13, 17}},
		{"bad file header in the last segment", func(f files) {
			flipByte(f.t, f.fs, path(f, 17), 0)
		}, 16, true, []uint64{1, 5, 9, 13}},
		{"bad file header in a sealed segment", func(f files) {
			flipByte(f.t, f.fs, path(f, 5), 8)
		}, 4, true, []uint64{1}},
		{"empty last segment", func(f files) {
			rewrite(f, 17, func(b []byte) []byte { return b[:fileHeaderLen("o", "s")] })
		}, 16, false, []uint64{1, 5, 9, 13}},
		{"segment of another stream", func(f files) {
			rewrite(f, 9, func([]byte) []byte { return appendFileHeader(nil, "o", "t") })
		}, 8, true, []uint64{1, 5}},
		{"misnamed segment", func(f files) {
			if err := f.fs.Rename(path(f, 17), path(f, 18)); err != nil {
				f.t.Fatal(err)
			}
		}, 16, true, []uint64{1, 5, 9, 13}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := openTest(t, fs, segmentBytes(4096))
			mustAppend(t, s, "o", "s", fixedRecs(1, 20, 1000)...)
			mustSync(t, s)
			f := files{t: t, fs: fs, dir: streamDir(fs, "o", "s"), segs: segFiles(t, fs, "o", "s"),
				where: func(seq uint64) (string, int64) { return where(t, s, "o", "s", seq) }}
			if !slices.Equal(f.segs, []uint64{1, 5, 9, 13, 17}) {
				t.Fatalf("segments %v", f.segs)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			c.damage(f)

			s = openTest(t, fs, segmentBytes(4096))
			si, _ := info(s, "o", "s")
			if si.Head != c.head || si.Durable != c.head || (counter(s.metrics.tornTails) == 1) != c.cut {
				t.Fatalf("after open: %+v, %v cuts; want head %d, cut %v", si, counter(s.metrics.tornTails), c.head, c.cut)
			}
			if got := segFiles(t, fs, "o", "s"); !slices.Equal(got, c.segs) {
				t.Fatalf("segments after open: %v, want %v", got, c.segs)
			}
			got, err := s.Read("o", "s", si.First, 0, 0)
			if err != nil || uint64(len(got)) != si.Head-si.First+1 {
				t.Fatalf("read %d..%d: %d records, %v", si.First, si.Head, len(got), err)
			}
			for _, r := range got {
				if !bytes.Equal(r.Payload, fixedRecs(r.Seq, r.Seq, 1000)[0].Payload) {
					t.Fatalf("seq %d: wrong payload", r.Seq)
				}
			}
			mustAppend(t, s, "o", "s", fixedRecs(c.head+1, c.head+6, 1000)...)
			mustSync(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, fs, segmentBytes(4096))
			if si, _ := info(s, "o", "s"); si.Head != c.head+6 || counter(s.metrics.tornTails) != 0 {
				t.Fatalf("second open: %+v, %v cuts", si, counter(s.metrics.tornTails))
			}
			if _, err := s.Read("o", "s", si.First, 0, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenRefusesNewerFormat: a segment of an unknown format version makes
// Open fail and leaves the file alone.
func TestOpenRefusesNewerFormat(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs)
	mustAppend(t, s, "o", "s", fixedRecs(1, 3, 10)...)
	mustSync(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	p := fs.PathJoin(streamDir(fs, "o", "s"), segName(1))
	b := readFile(t, fs, p)
	b[len(fileMagic)] = formatVersion + 1
	writeFile(t, fs, p, b)
	if s, err := Open(testConfig(t, fs)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "unsupported format version 2") {
		if err == nil {
			s.Close()
		}
		t.Fatalf("open: %v", err)
	}
	if !bytes.Equal(readFile(t, fs, p), b) {
		t.Fatal("open changed a segment it cannot read")
	}
}

// TestOpenIgnoresStrangers: files that are neither stream directories nor
// segments are left alone; an empty stream directory is removed.
func TestOpenIgnoresStrangers(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs)
	mustAppend(t, s, "o", "s", fixedRecs(1, 3, 10)...)
	mustSync(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, fs.PathJoin(testDir, "README"), []byte("hi"))
	writeFile(t, fs, fs.PathJoin(testDir, "notes.txt"), []byte("a stream's name, but a file"))
	writeFile(t, fs, fs.PathJoin(streamDir(fs, "o", "s"), "notes.txt"), []byte("hi"))
	if err := fs.MkdirAll(streamDir(fs, "o", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, fs)
	if got := s.Streams(); len(got) != 1 || got[0].Head != 3 {
		t.Fatalf("streams: %+v", got)
	}
	if _, err := fs.Stat(streamDir(fs, "o", "empty")); err == nil {
		t.Error("empty stream directory kept")
	}
	for _, p := range []string{fs.PathJoin(testDir, "README"), fs.PathJoin(testDir, "notes.txt"), fs.PathJoin(streamDir(fs, "o", "s"), "notes.txt")} {
		if _, err := fs.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
