package stabilizer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// bulkNode starts a single site whose stream "files" is a bulk stream and
// "kv" is not, on fs.
func bulkNode(t *testing.T, dir string, fs vfs.FS) (*stabilizer.Node, *recorder) {
	t.Helper()
	n, err := stabilizer.New(stabilizer.Config{Site: "a", Schema: &frontier.Schema{Sites: []string{"a"}}, Dir: dir, FS: fs,
		Logger: stabilizertest.Logger(t, "a"), MinFreeBytes: -1, JoinTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	if err := n.HandleBulk("files", r); err != nil {
		t.Fatal(err)
	}
	if err := n.Handle("kv", r); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return n, r
}

// chunk is the payload of bulk entry seq: large, and telling its seq.
func chunk(seq uint64, size int) []byte {
	b := bytes.Repeat([]byte{byte(seq)}, size)
	copy(b, fmt.Sprintf("chunk %d:", seq))
	return b
}

// TestKVFsyncNotQueuedBehindBulk shows the two fsync domains: with the bulk
// store's fsync held up (a slow disk under megabytes of chunks), a write to
// another stream is persisted and acknowledged under `local`, and the bulk
// entry is not: it is neither acked persisted nor delivered until its own
// fsync returns.
func TestKVFsyncNotQueuedBehindBulk(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int32
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) &&
			strings.Contains(op.Path, string(filepath.Separator)+"bulk"+string(filepath.Separator)) {
			held.Add(1)
			<-gate
		}
		return nil
	}))
	n, r := bulkNode(t, t.TempDir(), fs)
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	defer func() { release(); n.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	files, err := n.Append(ctx, "files", chunk(1, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 10*time.Second, func() error {
		if held.Load() == 0 {
			return errors.New("the bulk store has not begun its fsync")
		}
		return nil
	})
	kv, err := n.Append(ctx, "kv", []byte("job-7 running"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitFor(ctx, kv.Stream, "local", kv.Seq); err != nil {
		t.Fatalf("kv write behind a held bulk fsync: %v", err)
	}
	f, err := n.Frontier(ctx, files.Stream, "local")
	if err != nil {
		t.Fatal(err)
	}
	if f.Seq != 0 || r.count(files.Stream) != 0 {
		t.Fatalf("bulk entry counted persisted (frontier %d) or delivered (%d) before its fsync returned", f.Seq, r.count(files.Stream))
	}
	release()
	if err := n.WaitFor(ctx, files.Stream, "local", files.Seq); err != nil {
		t.Fatal(err)
	}
	e, err := n.ReadEntry(ctx, files.Stream, files.Seq)
	if err != nil || !bytes.Equal(e.Payload, chunk(1, 4<<20)) {
		t.Fatalf("read back the bulk entry: %v", err)
	}
}

// TestBulkSurvivesPowerCut cuts the power of a site while it writes bulk
// and other entries (vfs.MemFS's crash clone: what was not fsynced is
// lost, or kept in part, block by block), starts it again on what the disk
// kept, and checks that every entry acknowledged under `local` is there
// byte for byte, that nothing else is served, and that numbering goes on.
func TestBulkSurvivesPowerCut(t *testing.T) {
	lost := 0
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if powerCut(t, seed) {
				lost++
			}
		})
	}
	if lost == 0 {
		t.Error("no power cut took an unsynced entry: the test proved nothing")
	}
}

// powerCut runs one cut; it reports whether the cut took entries the site
// had appended.
func powerCut(t *testing.T, seed uint64) (lostSome bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewCrashableMem()
	const dir = "/site"
	n, _ := bulkNode(t, dir, fs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files := stabilizer.StreamID{Origin: "a", Name: "files"}
	kvs := stabilizer.StreamID{Origin: "a", Name: "kv"}
	acked := map[stabilizer.StreamID]uint64{}
	appended := map[stabilizer.StreamID]uint64{}
	for i := range 20 + rng.IntN(20) {
		stream, size := "files", 64<<10+rng.IntN(1<<20)
		if i%3 == 2 {
			stream, size = "kv", 100
		}
		a, err := n.Append(ctx, stream, chunk(uint64(i+1), size))
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) > 0 {
			if err := n.WaitFor(ctx, a.Stream, "local", a.Seq); err != nil {
				t.Fatal(err)
			}
			acked[a.Stream] = a.Seq
		}
		appended[a.Stream] = a.Seq
	}
	// A burst nobody waits for: the cut comes while it is written.
	for i := range rng.IntN(8) {
		a, err := n.Append(ctx, "files", chunk(uint64(100+i), 64<<10+rng.IntN(1<<20)))
		if err != nil {
			t.Fatal(err)
		}
		appended[a.Stream] = a.Seq
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, 8))})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2, _ := bulkNode(t, dir, crashed)
	defer n2.Close()
	held := map[stabilizer.StreamID]uint64{}
	sts, err := n2.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Head != st.Persisted {
			t.Errorf("%s: head %d, persisted %d right after a start", st.Stream, st.Head, st.Persisted)
		}
		held[st.Stream] = st.Persisted
	}
	for _, id := range []stabilizer.StreamID{files, kvs} {
		f := stabilizer.FrontierState{Seq: held[id]}
		if f.Seq < acked[id] {
			t.Errorf("%s: after the power cut the site holds up to %d, it acknowledged %d", id, f.Seq, acked[id])
		}
		t.Logf("%s: appended %d, acknowledged %d, held after the cut %d", id, appended[id], acked[id], f.Seq)
		lostSome = lostSome || f.Seq < appended[id]
		for seq := uint64(1); seq <= f.Seq; seq++ {
			e, err := n2.ReadEntry(ctx, id, seq)
			if err != nil {
				t.Fatalf("%s seq %d (held up to %d): %v", id, seq, f.Seq, err)
			}
			if !bytes.HasPrefix(e.Payload, []byte("chunk ")) || e.Payload[len(e.Payload)-1] != e.Payload[len(e.Payload)-2] {
				t.Fatalf("%s seq %d reads back as %q…", id, seq, e.Payload[:min(16, len(e.Payload))])
			}
		}
		if _, err := n2.ReadEntry(ctx, id, f.Seq+1); !errors.Is(err, stabilizer.ErrNotFound) {
			t.Errorf("%s seq %d beyond what is held: %v, want ErrNotFound", id, f.Seq+1, err)
		}
		a, err := n2.Append(ctx, id.Name, chunk(99, 1000))
		if err != nil {
			t.Fatal(err)
		}
		if a.Seq != f.Seq+1 {
			t.Errorf("%s: the next append took seq %d after %d", id, a.Seq, f.Seq)
		}
		if err := n2.WaitFor(ctx, id, "local", a.Seq); err != nil {
			t.Fatal(err)
		}
	}
	return lostSome
}

// TestBulkMovedOutOfPebble starts a site whose "files" stream is not a
// bulk stream, as in an earlier release, writes to it, and starts it again
// with "files" a bulk stream: the entries move to the segment store, read
// back the same, and numbering goes on.
func TestBulkMovedOutOfPebble(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := stabilizer.New(stabilizer.Config{Site: "a", Schema: &frontier.Schema{Sites: []string{"a"}}, Dir: dir,
		Logger: stabilizertest.Logger(t, "a"), MinFreeBytes: -1, JoinTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Handle("files", newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	var a stabilizer.Appended
	for i := range 10 {
		if a, err = n.Append(ctx, "files", chunk(uint64(i+1), 100<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.WaitFor(ctx, a.Stream, "local", a.Seq); err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 10*time.Second, func() error {
		// Truncation stops at what the application applied.
		if floor, err := n.Truncate(ctx, a.Stream, 3, stabilizer.TruncateOptions{}); err != nil || floor < 3 {
			return fmt.Errorf("truncated to %d (%v)", floor, err)
		}
		if _, err := n.ReadEntry(ctx, a.Stream, 3); err == nil {
			return errors.New("seq 3 still readable")
		}
		return nil
	})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2, _ := bulkNode(t, dir, nil)
	defer n2.Close()
	for seq := uint64(4); seq <= 10; seq++ {
		e, err := n2.ReadEntry(ctx, a.Stream, seq)
		if err != nil || !bytes.Equal(e.Payload, chunk(seq, 100<<10)) {
			t.Fatalf("seq %d after the move: %v", seq, err)
		}
	}
	if _, err := n2.ReadEntry(ctx, a.Stream, 3); !errors.Is(err, storage.ErrTruncated) {
		t.Errorf("seq 3, truncated before the move: %v, want ErrTruncated", err)
	}
	b, err := n2.Append(ctx, "files", chunk(11, 1000))
	if err != nil || b.Seq != 11 {
		t.Fatalf("append after the move: seq %d, %v", b.Seq, err)
	}
	if err := n2.WaitFor(ctx, b.Stream, "local", b.Seq); err != nil {
		t.Fatal(err)
	}
}

// TestAppendStriped spreads appends over a striped transfer's stripes, one
// per peer, by bytes given, and every site receives every stripe.
func TestAppendStriped(t *testing.T) {
	apps := map[string]*recorder{}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a", "b", "c"},
		Setup: func(site string, n *stabilizer.Node) error {
			apps[site] = newRecorder()
			names, err := n.HandleStriped("files", apps[site])
			if err == nil && (len(names) != 2 || names[0] != "files" || names[1] != "files/1") {
				err = fmt.Errorf("stripes %v, want [files files/1]", names)
			}
			return err
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := c.Node("a")
	var payloads [][]byte
	for i := range 10 {
		payloads = append(payloads, chunk(uint64(i), 1000+i%2*9000)) // 1,000 and 10,000 bytes
	}
	got, err := a.AppendStriped(ctx, "files", payloads)
	if err != nil {
		t.Fatal(err)
	}
	bytes := map[string]int{}
	for i, g := range got {
		bytes[g.Stream.Name] += len(payloads[i])
	}
	if d := bytes["files"] - bytes["files/1"]; d > 10000 || d < -10000 {
		t.Errorf("stripes given %v bytes: more apart than one payload", bytes)
	}
	if _, err := a.AppendStriped(ctx, "nope", payloads); !errors.Is(err, stabilizer.ErrUnknownStream) {
		t.Errorf("append to a transfer that is not striped: %v", err)
	}
	last := map[string]uint64{}
	for _, g := range got {
		last[g.Stream.Name] = g.Seq
	}
	for name, seq := range last {
		id := stabilizer.StreamID{Origin: "a", Name: name}
		if err := a.WaitFor(ctx, id, "all", seq); err != nil {
			t.Fatal(err)
		}
		for _, site := range []string{"b", "c"} {
			stabilizertest.Eventually(t, 10*time.Second, func() error {
				if n := apps[site].count(id); n != int(seq) {
					return fmt.Errorf("%s applied %d of %s, want %d", site, n, id, seq)
				}
				return nil
			})
		}
	}
}

// heldBulk is a transport whose bulk plane takes no frame until released:
// the bulk lane's queue is full, as behind a slow link.
type heldBulk struct {
	stabilizer.Transport
	gate <-chan struct{}
	held *atomic.Int32
}

func (h heldBulk) Send(peer string, plane stabilizer.Plane, frame []byte) error {
	if plane == stabilizer.PlaneBulk {
		h.held.Add(1)
		<-h.gate
	}
	return h.Transport.Send(peer, plane, frame)
}

// TestKVNotHeldBehindBulkSend: while a site's bulk lane takes nothing (its
// sends block), a write to another stream still reaches its peer and is
// acknowledged under `all`; the bulk entry follows once the lane moves.
func TestKVNotHeldBehindBulkSend(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int32
	network := stabilizertest.NewNetwork()
	defer network.Close()
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a", "b"},
		Transport: func(site string) stabilizer.Transport {
			return heldBulk{network.Transport(site), gate, &held}
		},
		Setup: func(site string, n *stabilizer.Node) error {
			r := newRecorder()
			if err := n.HandleBulk("files", r); err != nil {
				return err
			}
			return n.Handle("kv", r)
		}})
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := c.Node("a")
	files, err := a.Append(ctx, "files", chunk(1, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 10*time.Second, func() error {
		if held.Load() == 0 {
			return errors.New("the bulk entry has not been sent yet")
		}
		return nil
	})
	kv, err := a.Append(ctx, "kv", []byte("job-7 running"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WaitFor(ctx, kv.Stream, "all", kv.Seq); err != nil {
		t.Fatalf("kv write behind a bulk send that waits for room: %v", err)
	}
	release()
	if err := a.WaitFor(ctx, files.Stream, "all", files.Seq); err != nil {
		t.Fatal(err)
	}
}
