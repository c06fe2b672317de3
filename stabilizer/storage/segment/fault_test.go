package segment

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// faults is an errorfs injector whose rule a test sets and clears.
type faults struct {
	mu   sync.Mutex
	rule func(errorfs.Op) error
	hits int
}

func (f *faults) String() string { return "faults" }

func (f *faults) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rule == nil {
		return nil
	}
	err := f.rule(op)
	if err != nil {
		f.hits++
	}
	return err
}

func (f *faults) set(rule func(errorfs.Op) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule, f.hits = rule, 0
}

// injected returns how many errors the rule injected since it was set.
func (f *faults) injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// nth fails the n-th operation of kind on a path containing in, and, if
// sticky, every later one too.
func nth(kind errorfs.OpKind, in string, n int, sticky bool, err error) func(errorfs.Op) error {
	seen := 0
	return func(op errorfs.Op) error {
		if op.Kind != kind || !strings.Contains(op.Path, in) {
			return nil
		}
		seen++
		if seen == n || sticky && seen > n {
			return err
		}
		return nil
	}
}

// faultyStore opens a store on a crashable FS behind an injector, holding
// stream o/s with records 1..3 synced, payloads of 100 KiB (written by
// writes of their own).
func faultyStore(t *testing.T, segBytes int64) (*vfs.MemFS, *faults, *Store) {
	mem := vfs.NewCrashableMem()
	f := &faults{}
	s := openTest(t, errorfs.Wrap(mem, f), segmentBytes(segBytes))
	mustAppend(t, s, "o", "s", bigRecs(1, 3)...)
	mustSync(t, s)
	return mem, f, s
}

// bigRecs returns records from..to of 100 KiB, each with a one-byte Head;
// the first two bytes of what is read back are the seq.
func bigRecs(from, to uint64) []Record {
	var out []Record
	for seq := from; seq <= to; seq++ {
		p := make([]byte, 100<<10)
		p[0] = byte(seq)
		out = append(out, Record{Seq: seq, HLC: seq, Head: []byte{byte(seq)}, Payload: p})
	}
	return out
}

// TestFailedWriteLeavesStream: whichever write of an Append fails, the
// Append fails with that error, the store stays usable, and the stream is
// exactly as before, also on disk: after a crash, with or without the
// unsynced data, nothing of the failed Append is there and nothing needs
// cutting. The same Append then succeeds.
func TestFailedWriteLeavesStream(t *testing.T) {
	for _, c := range []struct {
		name     string
		segBytes int64
		recs     []Record
		rule     func(errorfs.Op) error
	}{
		{"first header", 1 << 20, bigRecs(4, 5), nth(errorfs.OpFileWriteAt, ".seg", 1, false, errorfs.ErrInjected)},
		{"large payload", 1 << 20, bigRecs(4, 5), nth(errorfs.OpFileWriteAt, ".seg", 2, false, errorfs.ErrInjected)},
		{"second record", 1 << 20, bigRecs(4, 5), nth(errorfs.OpFileWriteAt, ".seg", 4, false, errorfs.ErrInjected)},
		{"create a segment", 200 << 10, bigRecs(4, 5), nth(errorfs.OpCreate, ".seg", 1, false, errorfs.ErrInjected)},
		{"write a new segment", 200 << 10, bigRecs(4, 5), nth(errorfs.OpFileWriteAt, "0005.seg", 2, false, errorfs.ErrInjected)},
		{"new segment after old", 350 << 10, bigRecs(4, 6), nth(errorfs.OpFileWriteAt, "0005.seg", 1, false, errorfs.ErrInjected)},
		{"after syncing two segments back", 100 << 10, bigRecs(4, 6), nth(errorfs.OpCreate, ".seg", 3, false, errorfs.ErrInjected)},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem, f, s := faultyStore(t, c.segBytes)
			before, files := s.Streams(), segFiles(t, mem, "o", "s")
			f.set(c.rule)
			err := s.Append("o", "s", c.recs)
			if !errors.Is(err, errorfs.ErrInjected) || errors.Is(err, ErrFailed) || f.injected() != 1 {
				t.Fatalf("append: %v after %d faults; want the injected error, the store not failed", err, f.injected())
			}
			f.set(nil)
			if got := s.Streams(); !equalInfos(got, before) || !slices.Equal(segFiles(t, mem, "o", "s"), files) {
				t.Fatalf("after the failed append: %+v in %v; before %+v in %v", got, segFiles(t, mem, "o", "s"), before, files)
			}
			for _, pct := range []int{0, 100} {
				checkUnchanged(t, crashClone(mem, pct), before)
			}
			mustAppend(t, s, "o", "s", c.recs...)
			mustSync(t, s)
			last := c.recs[len(c.recs)-1].Seq
			got, err := s.Read("o", "s", 1, 0, 0)
			if err != nil || uint64(len(got)) != last || got[last-1].Payload[1] != byte(last) {
				t.Fatalf("read after retrying: %d records, %v", len(got), err)
			}
		})
	}
}

// checkUnchanged opens fs and checks it holds exactly the streams of before,
// with nothing cut.
func checkUnchanged(t *testing.T, fs vfs.FS, before []StreamInfo) {
	t.Helper()
	s := openTest(t, fs)
	if got := s.Streams(); !equalInfos(got, before) || counter(s.metrics.tornTails) != 0 {
		t.Fatalf("reopened: %+v with %v cuts; want %+v", got, counter(s.metrics.tornTails), before)
	}
	if _, err := s.Read("o", "s", 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedUndoFailsStore: when the bytes of a failed Append cannot be
// zeroed either, the store fails: writers get ErrFailed, readers still get
// what was durable, and reopening recovers.
func TestFailedUndoFailsStore(t *testing.T) {
	mem, f, s := faultyStore(t, 1<<20)
	f.set(nth(errorfs.OpFileWriteAt, ".seg", 2, true, errorfs.ErrInjected))
	if err := s.Append("o", "s", bigRecs(4, 4)); !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("append: %v; want ErrFailed", err)
	}
	f.set(nil)
	_, serr := s.Sync()
	for _, err := range []error{s.Append("o", "s", bigRecs(4, 4)), serr, s.Truncate("o", "s", 1), s.Reset("o", "s", 10)} {
		if !errors.Is(err, ErrFailed) {
			t.Errorf("after failing: %v, want ErrFailed", err)
		}
	}
	if got, err := s.Read("o", "s", 1, 0, 0); err != nil || len(got) != 3 {
		t.Fatalf("read after failing: %d records, %v", len(got), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, mem)
	if si, _ := info(s, "o", "s"); si.Head != 3 {
		t.Fatalf("reopened: %+v", si)
	}
	mustAppend(t, s, "o", "s", bigRecs(4, 4)...)
	mustSync(t, s)
}

// TestFailedWindowSyncFailsStore: an fdatasync that Append makes itself, to
// keep at most two segments unsynced, fails the store like one of Sync.
func TestFailedWindowSyncFailsStore(t *testing.T) {
	_, f, s := faultyStore(t, 100<<10) // one record per segment
	f.set(nth(errorfs.OpFileSyncData, "0004.seg", 1, false, errorfs.ErrInjected))
	if err := s.Append("o", "s", bigRecs(4, 6)); !errors.Is(err, ErrFailed) || f.injected() != 1 {
		t.Fatalf("append: %v after %d faults; want ErrFailed", err, f.injected())
	}
	if si, _ := info(s, "o", "s"); si.Head != 3 {
		t.Fatalf("head %d after a failed append", si.Head)
	}
}

// TestFailedSyncFailsStore: whichever fsync of a Sync fails, the Sync fails
// with ErrFailed, reports nothing durable, and the store refuses writers;
// what earlier Syncs reported survives a crash.
func TestFailedSyncFailsStore(t *testing.T) {
	for _, c := range []struct {
		name string
		rule func(errorfs.Op) error
	}{
		{"fdatasync of a segment", nth(errorfs.OpFileSyncData, ".seg", 1, false, errorfs.ErrInjected)},
		{"fsync of the stream directory", nth(errorfs.OpFileSync, "o.s", 1, false, errorfs.ErrInjected)},
		{"open of the stream directory", nth(errorfs.OpOpenDir, "o.s", 1, false, errorfs.ErrInjected)},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem, f, s := faultyStore(t, 200<<10) // 4 and 5 start new segments
			mustAppend(t, s, "o", "s", bigRecs(4, 6)...)
			f.set(c.rule)
			d, err := s.Sync()
			if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) || d != nil || f.injected() != 1 {
				t.Fatalf("sync: %v, %v after %d faults; want ErrFailed", d, err, f.injected())
			}
			f.set(nil)
			if si, _ := info(s, "o", "s"); si.Durable != 3 {
				t.Fatalf("durable %d after a failed sync", si.Durable)
			}
			if got, err := s.Read("o", "s", 4, 0, 0); got != nil || err != nil {
				t.Fatalf("read above the durable head: %d records, %v", len(got), err)
			}
			if _, err := s.Sync(); !errors.Is(err, ErrFailed) {
				t.Fatalf("sync after failing: %v", err)
			}
			if err := s.Append("o", "s", bigRecs(7, 7)); !errors.Is(err, ErrFailed) {
				t.Fatalf("append after failing: %v", err)
			}
			crashed := mem.CrashClone(vfs.CrashCloneCfg{})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, crashed)
			got, err := s.Read("o", "s", 1, 0, 0)
			if err != nil || len(got) < 3 {
				t.Fatalf("after a crash: %d records, %v", len(got), err)
			}
		})
	}
}

// TestDiskFull: an Append that finds the disk full fails with ENOSPC,
// takes back what it wrote and leaves the store usable: the next Append
// succeeds once there is space. Both with a write refused outright and
// with one that wrote part of its bytes.
func TestDiskFull(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		mem, f, s := faultyStore(t, 1<<20)
		before := s.Streams()
		f.set(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpFileWriteAt {
				return syscall.ENOSPC
			}
			return nil
		})
		if err := s.Append("o", "s", bigRecs(4, 5)); !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
			t.Fatalf("append on a full disk: %v", err)
		}
		f.set(nil)
		checkUnchanged(t, crashClone(mem, 100), before)
		mustAppend(t, s, "o", "s", bigRecs(4, 5)...)
		mustSync(t, s)
	})
	t.Run("partial", func(t *testing.T) {
		mem := vfs.NewMem()
		fs := &fullFS{FS: mem, budget: 1 << 30}
		s := openTest(t, fs)
		mustAppend(t, s, "o", "s", bigRecs(1, 3)...)
		mustSync(t, s)
		before := s.Streams()
		path, size := s.mu.streams[streamID{"o", "s"}].segs[0].path, before[0].Bytes
		fs.setBudget(150 << 10) // record 4 fits, 5 stops half-way
		if err := s.Append("o", "s", bigRecs(4, 5)); !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
			t.Fatalf("append on a full disk: %v", err)
		}
		b := readFile(t, mem, path)
		if len(b) <= int(size) || !allZero(b[size:]) {
			t.Fatalf("after the failed append the file has %d bytes, %d before; the rest must be zeros", len(b), size)
		}
		if got := s.Streams(); !equalInfos(got, before) {
			t.Fatalf("after the failed append: %+v", got)
		}
		fs.setBudget(1 << 30)
		mustAppend(t, s, "o", "s", bigRecs(4, 5)...)
		mustSync(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, mem)
		if got, err := s.Read("o", "s", 1, 0, 0); err != nil || len(got) != 5 || counter(s.metrics.tornTails) != 0 {
			t.Fatalf("reopened: %d records, %v, %v cuts", len(got), err, counter(s.metrics.tornTails))
		}
	})
}

// fullFS is a filesystem with budget bytes of space left: a write that
// would grow the files by more writes what fits and fails with ENOSPC, as
// a real one does. Overwriting allocated bytes needs no space.
type fullFS struct {
	vfs.FS
	mu     sync.Mutex
	budget int64
}

func (fs *fullFS) setBudget(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.budget = n
}

func (fs *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return &fullFile{File: f, fs: fs}, err
}

func (fs *fullFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return &fullFile{File: f, fs: fs}, err
}

type fullFile struct {
	vfs.File
	fs *fullFS
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	limit := st.Size() + f.fs.budget
	n := int(max(0, min(int64(len(p)), limit-off)))
	n, err = f.File.WriteAt(p[:n], off)
	f.fs.budget -= max(0, off+int64(n)-st.Size())
	if err == nil && n < len(p) {
		err = syscall.ENOSPC
	}
	return n, err
}
