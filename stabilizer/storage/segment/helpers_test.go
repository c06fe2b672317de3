package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testDir = "/db"

// openTest opens a store on fs in testDir; mods adjust the config.
func openTest(t testing.TB, fs vfs.FS, mods ...func(*Config)) *Store {
	t.Helper()
	s, err := Open(testConfig(t, fs, mods...))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		// A test that panicked (an invariant, in an invariants build) may
		// have left the mutex held: closing would hang instead of failing.
		if !s.mu.TryLock() {
			return
		}
		s.mu.Unlock()
		_ = s.Close()
	})
	return s
}

func testConfig(t testing.TB, fs vfs.FS, mods ...func(*Config)) Config {
	cfg := Config{Dir: testDir, FS: fs, Logger: testhelp.Logger(t, "segment")}
	for _, m := range mods {
		m(&cfg)
	}
	return cfg
}

func segmentBytes(n int64) func(*Config) { return func(c *Config) { c.SegmentBytes = n } }

// payload returns the deterministic payload of (stream, seq): its size and
// bytes follow from both, so a test can check any record it reads back.
func payload(stream string, seq uint64, maxSize int) []byte {
	h := fnv.New64a()
	h.Write([]byte(stream))
	_ = binary.Write(h, binary.LittleEndian, seq)
	rng := rand.New(rand.NewPCG(h.Sum64(), seq))
	b := make([]byte, rng.IntN(maxSize+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// rec is the deterministic record seq of stream, its HLC derived from seq.
func rec(stream string, seq uint64, maxSize int) Record {
	return Record{Seq: seq, HLC: seq * 10, Payload: payload(stream, seq, maxSize)}
}

// recs returns the deterministic records from..to of stream.
func recs(stream string, from, to uint64, maxSize int) []Record {
	var out []Record
	for seq := from; seq <= to; seq++ {
		out = append(out, rec(stream, seq, maxSize))
	}
	return out
}

func mustAppend(t testing.TB, s *Store, origin, stream string, rs ...Record) {
	t.Helper()
	if err := s.Append(origin, stream, rs); err != nil {
		t.Fatalf("append %s/%s: %v", origin, stream, err)
	}
}

func mustSync(t testing.TB, s *Store) []Durable {
	t.Helper()
	d, err := s.Sync()
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return d
}

// checkRead fails unless got are exactly the deterministic records
// from..to of stream.
func checkRead(t testing.TB, got []Record, stream string, from, to uint64, maxSize int) {
	t.Helper()
	if uint64(len(got)) != to-from+1 {
		t.Fatalf("%s: read %d records, want %d..%d", stream, len(got), from, to)
	}
	for i, r := range got {
		want := rec(stream, from+uint64(i), maxSize)
		if r.Seq != want.Seq || r.HLC != want.HLC || !bytes.Equal(r.Payload, want.Payload) || len(r.Head) != 0 {
			t.Fatalf("%s: record %d: seq %d hlc %d %d bytes, want seq %d hlc %d %d bytes",
				stream, i, r.Seq, r.HLC, len(r.Payload), want.Seq, want.HLC, len(want.Payload))
		}
	}
}

// info returns the StreamInfo of (origin, stream), ok false if absent.
func info(s *Store, origin, stream string) (StreamInfo, bool) {
	for _, si := range s.Streams() {
		if si.Origin == origin && si.Stream == stream {
			return si, true
		}
	}
	return StreamInfo{}, false
}

// streamDir is the directory of (origin, stream) under testDir.
func streamDir(fs vfs.FS, origin, stream string) string {
	return fs.PathJoin(testDir, streamDirName(origin, stream))
}

// segFiles lists the segment files of (origin, stream), sorted.
func segFiles(t testing.TB, fs vfs.FS, origin, stream string) []uint64 {
	t.Helper()
	s := &Store{fs: fs}
	s.log = testhelp.Logger(t, "list")
	firsts, err := s.listSegments(streamDir(fs, origin, stream))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	return firsts
}

// readFile returns the bytes of the file at path.
func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// where returns the segment file and offset of record seq of (origin,
// stream), from the store's index.
func where(t testing.TB, s *Store, origin, stream string, seq uint64) (string, int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.streams[streamID{origin, stream}]
	for _, g := range st.segs {
		if seq >= g.first && seq <= g.last() {
			return g.path, g.offs[seq-g.first]
		}
	}
	t.Fatalf("seq %d of %s/%s is in no segment", seq, origin, stream)
	return "", 0
}

// writeFile replaces the file at path with b, synced.
func writeFile(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts the byte at off of the file at path, in place, so that
// open handles see it.
func flipByte(t testing.TB, fs vfs.FS, path string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// crashClone returns what fs may hold after a power loss now, keeping pct
// percent of the unsynced blocks and directory entries.
func crashClone(fs *vfs.MemFS, pct int) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, uint64(pct)))})
}

// counter returns a metric's current value.
func counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
