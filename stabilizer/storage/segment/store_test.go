package segment

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAppendSyncRead: appended records are invisible to Read until a Sync
// covers them, then read back byte for byte, Head folded into Payload.
func TestAppendSyncRead(t *testing.T) {
	s := openTest(t, vfs.NewMem())
	mustAppend(t, s, "o", "s", recs("s", 10, 14, 3000)...)
	if si, _ := info(s, "o", "s"); si != (StreamInfo{Origin: "o", Stream: "s", First: 10, Head: 14, Durable: 0, Bytes: si.Bytes}) || si.Bytes == 0 {
		t.Fatalf("before sync: %+v", si)
	}
	if got, err := s.Read("o", "s", 10, 0, 0); err != nil || got != nil {
		t.Fatalf("read before sync: %d records, %v; want nothing", len(got), err)
	}
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o", "s", 14}}) {
		t.Fatalf("sync: %v", d)
	}
	got, err := s.Read("o", "s", 10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "s", 10, 14, 3000)

	// Head is stored in front of Payload.
	mustAppend(t, s, "o", "s", Record{Seq: 15, HLC: 7, Head: []byte("he"), Payload: []byte("llo")})
	mustSync(t, s)
	got, err = s.Read("o", "s", 15, 0, 0)
	if err != nil || len(got) != 1 || string(got[0].Payload) != "hello" || got[0].Head != nil || got[0].HLC != 7 {
		t.Fatalf("read with head: %+v, %v", got, err)
	}
	// The payload is the caller's: writing to it changes nothing stored.
	got[0].Payload[0] = 'j'
	if again, _ := s.Read("o", "s", 15, 0, 0); string(again[0].Payload) != "hello" {
		t.Fatalf("payload aliases the store: %q", again[0].Payload)
	}
}

// TestReadLimits: count and byte limits, the floor, the durable head.
func TestReadLimits(t *testing.T) {
	s := openTest(t, vfs.NewMem(), segmentBytes(4096))
	var all []Record
	for seq := uint64(5); seq <= 24; seq++ {
		all = append(all, Record{Seq: seq, HLC: seq, Payload: bytes.Repeat([]byte{byte(seq)}, 1000)})
	}
	mustAppend(t, s, "o", "s", all[:15]...) // 5..19
	mustSync(t, s)
	mustAppend(t, s, "o", "s", all[15:]...) // 20..24, not synced
	for _, c := range []struct {
		name     string
		from     uint64
		count    int
		bytes    int64
		want     []uint64 // first and last seq read, nil for none
		wantErr  error
		comments string
	}{
		{name: "all durable", from: 5, want: []uint64{5, 19}},
		{name: "from the middle", from: 12, want: []uint64{12, 19}},
		{name: "count", from: 5, count: 3, want: []uint64{5, 7}},
		{name: "bytes", from: 5, bytes: 2500, want: []uint64{5, 6}},
		{name: "bytes exact", from: 5, bytes: 3000, want: []uint64{5, 7}},
		{name: "first past bytes", from: 5, bytes: 10, want: []uint64{5, 5}},
		{name: "count and bytes", from: 8, count: 2, bytes: 1 << 20, want: []uint64{8, 9}},
		{name: "last durable", from: 19, want: []uint64{19, 19}},
		{name: "above durable", from: 20},
		{name: "above head", from: 100},
		{name: "below first", from: 4, wantErr: ErrTruncated},
		{name: "seq 0", from: 0, wantErr: ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Read("o", "s", c.from, c.count, c.bytes)
			if !errors.Is(err, c.wantErr) || (err != nil) != (c.wantErr != nil) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if c.want == nil {
				if len(got) != 0 {
					t.Fatalf("read %d records, want none", len(got))
				}
				return
			}
			if len(got) == 0 || got[0].Seq != c.want[0] || got[len(got)-1].Seq != c.want[1] || uint64(len(got)) != c.want[1]-c.want[0]+1 {
				t.Fatalf("read %d records from %v, want %v", len(got), seqsOf(got), c.want)
			}
			for _, r := range got {
				if !bytes.Equal(r.Payload, all[r.Seq-5].Payload) {
					t.Fatalf("seq %d: wrong payload", r.Seq)
				}
			}
		})
	}
	if got, err := s.Read("o", "nothing", 1, 0, 0); got != nil || err != nil {
		t.Fatalf("unknown stream: %v, %v", got, err)
	}
}

func seqsOf(rs []Record) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

// TestSyncReportsAdvancedHeads: each Sync reports exactly the streams whose
// durable head moved, sorted.
func TestSyncReportsAdvancedHeads(t *testing.T) {
	s := openTest(t, vfs.NewMem())
	mustAppend(t, s, "o2", "b", recs("b", 1, 3, 100)...)
	mustAppend(t, s, "o1", "a", recs("a", 1, 2, 100)...)
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o1", "a", 2}, {"o2", "b", 3}}) {
		t.Fatalf("first sync: %v", d)
	}
	mustAppend(t, s, "o1", "a", recs("a", 3, 3, 100)...)
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o1", "a", 3}}) {
		t.Fatalf("second sync: %v", d)
	}
	if d := mustSync(t, s); d != nil {
		t.Fatalf("sync with nothing new: %v", d)
	}
}

// TestSeqGap: an Append that does not continue the head writes nothing.
func TestSeqGap(t *testing.T) {
	s := openTest(t, vfs.NewMem())
	mustAppend(t, s, "o", "s", recs("s", 7, 9, 100)...) // a new stream starts anywhere
	for _, c := range []struct {
		name string
		recs []Record
	}{
		{"gap", recs("s", 11, 11, 100)},
		{"duplicate", recs("s", 9, 10, 100)},
		{"behind", recs("s", 1, 1, 100)},
		{"gap inside", []Record{rec("s", 10, 100), rec("s", 12, 100)}},
		{"backwards inside", []Record{rec("s", 10, 100), rec("s", 9, 100)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := s.Append("o", "s", c.recs); !errors.Is(err, ErrSeqGap) {
				t.Fatalf("append: %v, want ErrSeqGap", err)
			}
			if si, _ := info(s, "o", "s"); si.Head != 9 {
				t.Fatalf("head %d after a refused append", si.Head)
			}
		})
	}
	mustAppend(t, s, "o", "s", recs("s", 10, 10, 100)...)
	mustSync(t, s)
	got, err := s.Read("o", "s", 7, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "s", 7, 10, 100)
}

// TestInvalidArguments: bad names, empty appends, seq 0 are ErrInvalid.
func TestInvalidArguments(t *testing.T) {
	s := openTest(t, vfs.NewMem())
	long := strings.Repeat("x", 256)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"empty origin", s.Append("", "s", recs("s", 1, 1, 1))},
		{"long stream", s.Append("o", long, recs("s", 1, 1, 1))},
		{"no records", s.Append("o", "s", nil)},
		{"seq 0", s.Append("o", "s", []Record{{Seq: 0}})},
		{"read empty name", func() error { _, err := s.Read("o", "", 1, 0, 0); return err }()},
		{"truncate long origin", s.Truncate(long, "s", 1)},
		{"reset empty stream", s.Reset("o", "", 1)},
	} {
		if !errors.Is(c.err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, c.err)
		}
	}
	if got := s.Streams(); len(got) != 0 {
		t.Fatalf("streams after refused calls: %+v", got)
	}
}

// TestSegmentRollover: a segment is sealed once it reaches SegmentBytes; a
// record larger than that goes alone in a segment.
func TestSegmentRollover(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, segmentBytes(4096))
	fixed := func(seq uint64, n int) Record {
		return Record{Seq: seq, HLC: seq, Payload: bytes.Repeat([]byte{byte(seq)}, n)}
	}
	// Four 1000-byte records fill a segment (1032 bytes each with header).
	var rs []Record
	for seq := uint64(1); seq <= 6; seq++ {
		rs = append(rs, fixed(seq, 1000))
	}
	mustAppend(t, s, "o", "s", rs...)
	mustAppend(t, s, "o", "s", fixed(7, 10000))                  // alone
	mustAppend(t, s, "o", "s", fixed(8, 10), fixed(9, 10))       // after a full one
	mustAppend(t, s, "o", "s", fixed(10, 10000), fixed(11, 100)) // alone again
	mustSync(t, s)
	if got, want := segFiles(t, fs, "o", "s"), []uint64{1, 5, 7, 8, 10, 11}; !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	got, err := s.Read("o", "s", 1, 0, 0)
	if err != nil || len(got) != 11 {
		t.Fatalf("read %d records, %v", len(got), err)
	}
	for _, r := range got {
		if len(r.Payload) == 0 || r.Payload[0] != byte(r.Seq) {
			t.Fatalf("seq %d: wrong payload", r.Seq)
		}
	}
}

// TestTruncate: whole segments at or below the point are deleted, the one
// holding it stays with its lower records unreadable, and truncating
// everything still continues the numbering.
func TestTruncate(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, segmentBytes(4096))
	for seq := uint64(1); seq <= 12; seq++ { // 4 records per segment: 1, 5, 9
		mustAppend(t, s, "o", "s", Record{Seq: seq, Payload: make([]byte, 1000)})
	}
	mustSync(t, s)

	if err := s.Truncate("o", "s", 6); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, fs, "o", "s"); !slices.Equal(got, []uint64{5, 9}) {
		t.Fatalf("after truncate to 6: segments %v, want [5 9]", got)
	}
	if _, err := s.Read("o", "s", 6, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Fatalf("read at the floor: %v", err)
	}
	if got, err := s.Read("o", "s", 7, 0, 0); err != nil || len(got) != 6 {
		t.Fatalf("read above the floor: %d records, %v", len(got), err)
	}
	if si, _ := info(s, "o", "s"); si.First != 7 || si.Head != 12 {
		t.Fatalf("info %+v", si)
	}
	if err := s.Truncate("o", "s", 3); err != nil { // below the floor: nothing
		t.Fatal(err)
	}
	if err := s.Truncate("o", "s", 13); !errors.Is(err, ErrInvalid) {
		t.Fatalf("truncate above head: %v", err)
	}

	if err := s.Truncate("o", "s", 12); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, fs, "o", "s"); len(got) != 0 {
		t.Fatalf("after truncating everything: segments %v", got)
	}
	if si, _ := info(s, "o", "s"); si != (StreamInfo{Origin: "o", Stream: "s", Head: 12, Durable: 12}) {
		t.Fatalf("info after truncating everything: %+v", si)
	}
	if err := s.Append("o", "s", recs("s", 1, 1, 10)); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("append restarting the numbering: %v", err)
	}
	mustAppend(t, s, "o", "s", recs("s", 13, 14, 10)...)
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o", "s", 14}}) {
		t.Fatalf("sync: %v", d)
	}
	got, err := s.Read("o", "s", 13, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "s", 13, 14, 10)
	if err := s.Truncate("o", "unknown", 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("truncate an unknown stream: %v", err)
	}
}

// TestTruncateUnsynced: truncating records no Sync covered yet deletes
// their segment while a later Sync still works.
func TestTruncateUnsynced(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs, segmentBytes(4096))
	mustAppend(t, s, "o", "s", recs("s", 1, 3, 100)...)
	if err := s.Truncate("o", "s", 3); err != nil {
		t.Fatal(err)
	}
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o", "s", 3}}) {
		t.Fatalf("sync: %v", d)
	}
	mustAppend(t, s, "o", "s", recs("s", 4, 4, 100)...)
	mustSync(t, s)
	got, err := s.Read("o", "s", 4, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "s", 4, 4, 100)
}

// TestReset: Reset fixes a stream's numbering and deletes what it held.
func TestReset(t *testing.T) {
	fs := vfs.NewMem()
	s := openTest(t, fs)
	if err := s.Reset("o", "new", 100); err != nil {
		t.Fatal(err)
	}
	if si, _ := info(s, "o", "new"); si != (StreamInfo{Origin: "o", Stream: "new", Head: 100, Durable: 100}) {
		t.Fatalf("info after reset: %+v", si)
	}
	if err := s.Append("o", "new", recs("new", 1, 1, 10)); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("append below a reset head: %v", err)
	}
	mustAppend(t, s, "o", "new", recs("new", 101, 102, 10)...)
	if err := s.Reset("o", "new", 101); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reset below head: %v", err)
	}
	mustSync(t, s)
	if err := s.Reset("o", "new", 200); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, fs, "o", "new"); len(got) != 0 {
		t.Fatalf("segments after reset: %v", got)
	}
	if _, err := s.Read("o", "new", 101, 0, 0); !errors.Is(err, ErrTruncated) {
		t.Fatalf("read below a reset: %v", err)
	}
	mustAppend(t, s, "o", "new", recs("new", 201, 201, 10)...)
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o", "new", 201}}) {
		t.Fatalf("sync after reset: %v", d)
	}
}

// TestReopen: Close and Open keep every synced record, the numbering and
// the segment structure; appending continues.
func TestReopen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs, segmentBytes(8192))
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "o", "a", recs("a", 1, 40, 1000)...)
	mustAppend(t, s, "p", "b", recs("b", 50, 52, 1000)...)
	mustSync(t, s)
	if err := s.Truncate("o", "a", 20); err != nil {
		t.Fatal(err)
	}
	before := s.Streams()
	if err := errors.Join(s.Close(), s.Close()); err != nil {
		t.Fatal(err)
	}
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := s.Streams()
	// The floor is not stored: the stream starts at its first segment again.
	if len(after) != 2 || after[0].Head != 40 || after[0].Durable != 40 || after[0].First > 21 ||
		after[1] != before[1] || after[0].Bytes > before[0].Bytes+8192 {
		t.Fatalf("streams before %+v, after %+v", before, after)
	}
	got, err := s.Read("o", "a", after[0].First, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "a", after[0].First, 40, 1000)
	mustAppend(t, s, "o", "a", recs("a", 41, 45, 1000)...)
	mustSync(t, s)
	got, err = s.Read("o", "a", 41, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "a", 41, 45, 1000)
}

// TestNames: any byte string of 1..255 bytes names a stream; names that
// escape to more than a file name takes get a hashed directory and are read
// back from the segment headers.
func TestNames(t *testing.T) {
	for _, c := range []struct{ origin, stream, dir string }{
		{"us-east-1", "chunks", "us-east-1.chunks"},
		{"EU", "a.b/c", "%45%55.a%2Eb%2Fc"},
		{"%", "..", "%25.%2E%2E"},
		{"\x00\xff", "_", "%00%FF._"},
	} {
		if got := streamDirName(c.origin, c.stream); got != c.dir {
			t.Errorf("dir of %q/%q: %q, want %q", c.origin, c.stream, got, c.dir)
		}
		if o, st, hashed, ok := parseStreamDirName(c.dir); !ok || hashed || o != c.origin || st != c.stream {
			t.Errorf("parse %q: %q %q %v %v", c.dir, o, st, hashed, ok)
		}
	}
	for _, bad := range []string{"nodot", "a.b.c", "%61.b", "%4.b", "A.b", ".b", "a.", "~abc", "%zz.b"} {
		if _, _, _, ok := parseStreamDirName(bad); ok {
			t.Errorf("parse %q: accepted", bad)
		}
	}

	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	long1, long2 := strings.Repeat("\x01", 255), strings.Repeat("Z", 255)
	names := [][2]string{{long1, long2}, {long2, long1}, {"o", long2}, {"EU", "a.b/c"}}
	for _, n := range names {
		mustAppend(t, s, n[0], n[1], rec(n[1], 1, 10))
	}
	mustSync(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, fs)
	got := s.Streams()
	if len(got) != len(names) {
		t.Fatalf("streams after reopen: %+v", got)
	}
	for _, n := range names {
		if len(streamDirName(n[0], n[1])) > maxDirName {
			t.Fatalf("directory name of %d bytes", len(streamDirName(n[0], n[1])))
		}
		rs, err := s.Read(n[0], n[1], 1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, rs, n[1], 1, 1, 10)
	}
}

// TestHashedDirectoryOfAnotherStream: a hashed directory whose segments
// name a stream that does not hash to it is left alone, not loaded.
func TestHashedDirectoryOfAnotherStream(t *testing.T) {
	fs := vfs.NewMem()
	long := strings.Repeat("\x01", 255)
	s := openTest(t, fs)
	mustAppend(t, s, "o", long, rec(long, 1, 10))
	mustSync(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	from, to := streamDir(fs, "o", long), fs.PathJoin(testDir, hashedDirName("p", long))
	if err := fs.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, fs)
	if got := s.Streams(); len(got) != 0 {
		t.Fatalf("streams: %+v", got)
	}
	if _, err := fs.Stat(fs.PathJoin(to, segName(1))); err != nil {
		t.Fatalf("the directory was not left alone: %v", err)
	}
}

// TestConfigValidate: every bad field is reported, with its value.
func TestConfigValidate(t *testing.T) {
	err := Config{SegmentBytes: 100, MaxOpenFiles: -1}.Validate()
	for _, want := range []string{"Dir: missing", "SegmentBytes: 100", "MaxOpenFiles: -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v; want it to mention %q", err, want)
		}
	}
	if err := (Config{Dir: "d", SegmentBytes: MaxSegmentBytes + 1}).Validate(); err == nil {
		t.Error("SegmentBytes above the maximum accepted")
	}
	if err := (Config{Dir: "d"}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := Open(Config{}); err == nil {
		t.Error("Open accepted an empty config")
	}
}

// TestClose: Close is idempotent, and every call after it is ErrClosed.
func TestClose(t *testing.T) {
	s := openTest(t, vfs.NewMem())
	mustAppend(t, s, "o", "s", recs("s", 1, 1, 10)...)
	if err := errors.Join(s.Close(), s.Close()); err != nil {
		t.Fatal(err)
	}
	_, rerr := s.Read("o", "s", 1, 0, 0)
	_, serr := s.Sync()
	for _, err := range []error{s.Append("o", "s", recs("s", 2, 2, 1)), rerr, serr, s.Truncate("o", "s", 1), s.Reset("o", "s", 5)} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("after close: %v, want ErrClosed", err)
		}
	}
	if s.Streams() != nil {
		t.Error("streams after close")
	}
}

// TestSecondOpenLocked: two stores cannot share a directory.
func TestSecondOpenLocked(t *testing.T) {
	fs := vfs.NewMem()
	openTest(t, fs)
	if s, err := Open(testConfig(t, fs)); err == nil {
		s.Close()
		t.Fatal("second open of one directory succeeded")
	}
}

// TestMetrics: the counters move, and a store opened again registers anew.
func TestMetrics(t *testing.T) {
	fs := vfs.NewMem()
	reg := prometheus.NewRegistry()
	withReg := func(c *Config) { c.Registerer = reg; c.SegmentBytes = 2048 }
	s := openTest(t, fs, withReg)
	mustAppend(t, s, "o", "s", recs("s", 1, 6, 900)...)
	mustSync(t, s)
	if err := s.Truncate("o", "s", 6); err != nil {
		t.Fatal(err)
	}
	if counter(s.metrics.appendedRecords) != 6 || counter(s.metrics.syncs) != 1 || counter(s.metrics.deletedSegments) == 0 ||
		counter(s.metrics.appendedBytes) < 6*recHeaderLen {
		t.Fatalf("metrics: %v records, %v syncs, %v deleted, %v bytes", counter(s.metrics.appendedRecords),
			counter(s.metrics.syncs), counter(s.metrics.deletedSegments), counter(s.metrics.appendedBytes))
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 7 {
		t.Fatalf("gathered %d families, %v", len(mfs), err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "stabilizer_segment_") {
			t.Errorf("metric %s", mf.GetName())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openTest(t, fs, withReg)
}

// TestConcurrentAppendSyncRead runs a writer, a syncer and readers at once
// (meant for -race): readers never see a record above the durable head,
// what they see is intact, and each Sync reports a higher head.
func TestConcurrentAppendSyncRead(t *testing.T) {
	s := openTest(t, vfs.NewMem(), segmentBytes(16<<10))
	const n = 600
	var mu sync.Mutex
	var durable uint64 // highest seq a Sync reported
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		defer close(done)
		for seq := uint64(1); seq <= n; seq += 3 {
			if err := s.Append("o", "s", recs("s", seq, seq+2, 4000)); err != nil {
				t.Error(err)
				return
			}
			if seq%30 == 1 {
				if err := s.Truncate("o", "s", seq/2); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	wg.Add(1)
	go func() { // syncer
		defer wg.Done()
		for stop := false; !stop; {
			select {
			case <-done:
				stop = true // one more Sync covers the last appends
			default:
			}
			d, err := s.Sync()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, x := range d {
				if x.Seq <= durable {
					t.Errorf("sync reported %d after %d", x.Seq, durable)
				}
				durable = x.Seq
			}
			mu.Unlock()
		}
	}()
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() { // reader
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				si, _ := info(s, "o", "s")
				if si.First == 0 {
					continue
				}
				got, err := s.Read("o", "s", si.First, 50, 0)
				if errors.Is(err, ErrTruncated) {
					continue // a Truncate ran between info and Read
				}
				if err != nil {
					t.Error(err)
					return
				}
				// Durable only grows: what Read returned is at or below it now.
				if after, _ := info(s, "o", "s"); len(got) > 0 && got[len(got)-1].Seq > after.Durable {
					t.Errorf("read seq %d above durable %d", got[len(got)-1].Seq, after.Durable)
					return
				}
				if len(got) > 0 {
					checkRead(t, got, "s", got[0].Seq, got[len(got)-1].Seq, 4000)
				}
			}
		}()
	}
	wg.Wait()
	if si, _ := info(s, "o", "s"); si.Durable != n || durable != n {
		t.Fatalf("final %+v, reported %d", si, durable)
	}
}

func ExampleStore() {
	s, err := Open(Config{Dir: "/segments", FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	// The writer appends a group, then syncs it while it builds the next.
	_ = s.Append("eu-west-1", "chunks", []Record{
		{Seq: 1, HLC: 1000, Head: []byte("hdr:"), Payload: []byte("chunk one")},
		{Seq: 2, HLC: 1001, Payload: []byte("chunk two")},
	})
	durable, _ := s.Sync()
	fmt.Println(durable)
	rs, _ := s.Read("eu-west-1", "chunks", 1, 0, 1<<20)
	for _, r := range rs {
		fmt.Printf("%d %s\n", r.Seq, r.Payload)
	}
	// Output:
	// [{eu-west-1 chunks 2}]
	// 1 hdr:chunk one
	// 2 chunk two
}
