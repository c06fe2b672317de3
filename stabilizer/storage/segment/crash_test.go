package segment

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// crashMaxSize bounds the payloads of the power-loss workload: with
// crashSegment it makes segments of a few records, and some records larger
// than a segment.
const (
	crashMaxSize = 6000
	crashSegment = 8 << 10
)

// crashModel is what the power-loss workload was told before the crash.
type crashModel struct {
	durable map[string]uint64 // highest seq a Sync reported, per stream
	floor   map[string]uint64 // highest truncation point asked for
}

func (m crashModel) clone() crashModel {
	return crashModel{maps.Clone(m.durable), maps.Clone(m.floor)}
}

// TestPowerLoss simulates power loss at a random point of a workload of
// appends, syncs and truncations on two streams: the crash is taken just
// before a random write, sync, create or remove (the FS's n-th), keeping a
// given share of the unsynced blocks and directory entries. After it, Open
// must keep every record a Sync reported, return only intact records,
// report as durable only what survives another power loss, and continue
// the numbering after what survived.
func TestPowerLoss(t *testing.T) {
	for _, pct := range []int{0, 10, 50, 90, 100} {
		for seed := uint64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("unsynced=%d/seed=%d", pct, seed), func(t *testing.T) {
				powerLoss(t, pct, seed)
			})
		}
	}
}

func powerLoss(t *testing.T, pct int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(pct)))
	mem := vfs.NewCrashableMem()
	model := crashModel{durable: map[string]uint64{}, floor: map[string]uint64{}}
	var crashed *vfs.MemFS
	var atCrash crashModel
	var crashOp errorfs.Op
	ops, crashAt := 0, 1+rng.IntN(500)
	crash := func() {
		crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(seed, 7))})
		atCrash = model.clone()
	}
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if crashed == nil && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			if ops++; ops == crashAt {
				crashOp = op
				crash()
			}
		}
		return nil
	})
	s := openTest(t, errorfs.Wrap(mem, inj), segmentBytes(crashSegment))
	heads := map[string]uint64{}
	for step := 0; step < 400 && crashed == nil; step++ {
		stream := []string{"a", "b"}[rng.IntN(2)]
		switch x := rng.IntN(100); {
		case x < 60:
			n := uint64(1 + rng.IntN(4))
			mustAppend(t, s, "o", stream, recs(stream, heads[stream]+1, heads[stream]+n, crashMaxSize)...)
			heads[stream] += n
		case x < 85:
			for _, d := range mustSync(t, s) {
				model.durable[d.Stream] = d.Seq
			}
		case model.durable[stream] > model.floor[stream]:
			upto := model.floor[stream] + 1 + uint64(rng.IntN(int(model.durable[stream]-model.floor[stream])))
			// Recorded before the call: a crash inside it may have
			// deleted what lies below.
			model.floor[stream] = upto
			if err := s.Truncate("o", stream, upto); err != nil {
				t.Fatal(err)
			}
		}
	}
	if crashed == nil {
		crash()
	}
	t.Logf("crash before op %d (%v %s); durable %v, floor %v", crashAt, crashOp.Kind, crashOp.Path, atCrash.durable, atCrash.floor)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// What Open reports must survive a power loss right after it: Open
	// synced it, and finds nothing more to cut.
	s, err := Open(testConfig(t, crashed, segmentBytes(crashSegment)))
	if err != nil {
		t.Fatal(err)
	}
	reported := s.Streams()
	again := crashed.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, cuts := checkAfterCrash(t, again, atCrash, "a", "b"); !equalInfos(got, reported) || cuts != 0 {
		t.Fatalf("after a crash right after open: %+v and %v cuts; open reported %+v", got, cuts, reported)
	}
}

// checkAfterCrash opens the store on fs and checks it against what was
// reported before the crash: every durable record above the floor is
// there, every record it holds is intact, appends continue. It returns
// what Open reported and how many streams it cut.
func checkAfterCrash(t *testing.T, fs vfs.FS, m crashModel, streams ...string) ([]StreamInfo, float64) {
	t.Helper()
	s := openTest(t, fs, segmentBytes(crashSegment))
	infos, cuts := s.Streams(), counter(s.metrics.tornTails)
	for _, stream := range streams {
		si, ok := info(s, "o", stream)
		if need := m.durable[stream]; need > m.floor[stream] &&
			(!ok || si.Head < need || si.First == 0 || si.First > m.floor[stream]+1) {
			t.Fatalf("%s: %+v after the crash; durable %d above floor %d must be there", stream, si, need, m.floor[stream])
		}
		if !ok {
			continue
		}
		if si.Durable != si.Head {
			t.Fatalf("%s: %+v: open reported unsynced records", stream, si)
		}
		got, err := s.Read("o", stream, si.First, 0, 0)
		if err != nil {
			t.Fatalf("%s: read %d..%d: %v", stream, si.First, si.Head, err)
		}
		checkRead(t, got, stream, si.First, si.Head, crashMaxSize)
	}
	// Appending continues after what survived.
	for _, stream := range streams {
		si, _ := info(s, "o", stream)
		mustAppend(t, s, "o", stream, recs(stream, si.Head+1, si.Head+2, crashMaxSize)...)
	}
	mustSync(t, s)
	for _, stream := range streams {
		si, _ := info(s, "o", stream)
		got, err := s.Read("o", stream, si.Head-1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, got, stream, si.Head-1, si.Head, crashMaxSize)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return infos, cuts
}

func equalInfos(a, b []StreamInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestUnsyncedWindowIsTwoSegments: a writer that never syncs still leaves
// every segment but the last two durable (Append syncs the one two places
// back before creating a segment), which is what lets Open read only the
// last two whole. The directories are synced by hand, as a Sync of another
// stream would, so the files are found and their contents decide. Both
// with one record per Append and with Appends spanning many segments.
func TestUnsyncedWindowIsTwoSegments(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int
		group uint64
	}{
		{"small appends", 1000, 1},
		{"one large append", 5000, 36},
		{"groups across segments", 3000, 5},
	} {
		for _, pct := range []int{0, 50} {
			t.Run(fmt.Sprintf("%s/unsynced=%d", c.name, pct), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				s := openTest(t, mem, segmentBytes(4096))
				for seq := uint64(1); seq <= 36; seq += c.group {
					mustAppend(t, s, "o", "s", recs("s", seq, min(seq+c.group-1, 36), c.size)...)
				}
				s.mu.Lock()
				segs := s.mu.streams[streamID{"o", "s"}].segs
				mustSurvive := segs[len(segs)-3].last()
				s.mu.Unlock()
				if len(segs) < 5 {
					t.Fatalf("only %d segments", len(segs))
				}
				for _, d := range []string{streamDir(mem, "o", "s"), testDir, "/"} {
					if err := s.syncDir(d); err != nil {
						t.Fatal(err)
					}
				}
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(5, 6))})
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openTest(t, crashed, segmentBytes(4096))
				si, _ := info(s, "o", "s")
				if si.First != 1 || si.Head < mustSurvive {
					t.Fatalf("after the crash %+v; records up to %d were in segments before the last two", si, mustSurvive)
				}
				got, err := s.Read("o", "s", 1, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				checkRead(t, got, "s", 1, si.Head, c.size)
			})
		}
	}
}

// TestCrashDuringOpenCut: a crash while Open is cutting a torn tail leaves
// a state the next Open recovers from the same way.
func TestCrashDuringOpenCut(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openTest(t, mem, segmentBytes(4096))
	mustAppend(t, s, "o", "s", recs("s", 1, 10, crashMaxSize)...)
	mustSync(t, s)
	mustAppend(t, s, "o", "s", recs("s", 11, 14, crashMaxSize)...) // unsynced
	torn := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for n := 1; ; n++ {
		// Crash before the n-th write-kind operation of Open.
		base := torn.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(3, 4))})
		var mid *vfs.MemFS
		ops := 0
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && mid == nil {
				if ops++; ops == n {
					mid = base.CrashClone(vfs.CrashCloneCfg{})
				}
			}
			return nil
		})
		s, err := Open(testConfig(t, errorfs.Wrap(base, inj), segmentBytes(4096)))
		if err != nil {
			t.Fatal(err)
		}
		want := s.Streams()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if mid == nil {
			break // Open did fewer than n operations: all crash points done
		}
		got, _ := checkAfterCrash(t, mid, crashModel{durable: map[string]uint64{"s": 10}, floor: map[string]uint64{}}, "s")
		if len(got) != 1 || len(want) != 1 || got[0].Head < 10 {
			t.Fatalf("crash at op %d of open: %+v, uninterrupted open %+v", n, got, want)
		}
	}
}
