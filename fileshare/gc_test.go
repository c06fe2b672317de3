package fileshare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// fakeClock is the services' clock in the collector's tests: a grace
// period passes when the test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newGCCluster starts sites whose services run on one fake clock and
// collect only when the test calls GC.
func newGCCluster(t *testing.T, sites ...string) (*cluster, *fakeClock) {
	clock := &fakeClock{t: time.Now()}
	c := newTunedCluster(t, func(cfg *Config) {
		cfg.Now, cfg.GCInterval, cfg.PruneInterval = clock.Now, time.Hour, time.Hour
	}, sites...)
	return c, clock
}

// gc runs a collection at each site, in order.
func (c *cluster) gc(t *testing.T) map[string]GCStats {
	t.Helper()
	out := map[string]GCStats{}
	for _, site := range c.Sites() {
		st, err := c.svc(site).GC(ctxT(t))
		if err != nil {
			t.Fatalf("collect at %s: %v", site, err)
		}
		out[site] = st
	}
	return out
}

// floors returns site's truncation point of each of origin's files
// streams, by name.
func (c *cluster) floors(t *testing.T, site, origin string) map[string]uint64 {
	t.Helper()
	sts, err := c.Node(site).Streams(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, st := range sts {
		if st.Stream.Origin == origin && isStripe(st.Stream.Name) {
			out[st.Stream.Name] = st.Truncated
		}
	}
	return out
}

// floorsBelow returns, per files stream, one less than the lowest seq
// the chunks of vs (but those in skip) are located at: how far a site
// truncates when those chunks are the only live ones of the stream.
func floorsBelow(vs []*filesharepb.Version, skip ...[]byte) map[string]uint64 {
	out := map[string]uint64{}
	for _, v := range vs {
		for _, ch := range v.Chunks {
			if slices.ContainsFunc(skip, func(b []byte) bool { return sha256.Sum256(b) == [32]byte(ch.Hash) }) {
				continue
			}
			r := refOf(ch)
			if f, ok := out[r.Stream]; !ok || r.Seq-1 < f {
				out[r.Stream] = r.Seq - 1
			}
		}
	}
	return out
}

// stripeOf is the files stream of the chunk of data in v.
func stripeOf(v *filesharepb.Version, data []byte) Ref {
	for _, ch := range v.Chunks {
		if [32]byte(ch.Hash) == sha256.Sum256(data) {
			return refOf(ch)
		}
	}
	return Ref{}
}

// download reads a version's content at a site and compares it with want.
func download(ctx context.Context, s *Service, v *filesharepb.Version, want []byte) error {
	var got []byte
	for i, ch := range v.Chunks {
		d, err := s.chunks.data(ctx, [32]byte(ch.Hash))
		if err != nil {
			return fmt.Errorf("%s: chunk %d of %s: %w", s.node.Site(), i, v.Path, err)
		}
		if d == nil {
			return fmt.Errorf("%s: chunk %d of %s not held", s.node.Site(), i, v.Path)
		}
		got = append(got, d...)
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		return fmt.Errorf("%s: %s holds %d other bytes than the %d committed", s.node.Site(), v.Path, len(got), len(want))
	}
	return nil
}

// chunkOf returns size bytes that are chunk i of version n, distinct from
// every other (n, i).
func chunkOf(n, i, size int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "v%02d-c%02d|", n, i), size/8)
}

// versionByID finds a version in a site's List, nil if not listed.
func versionByID(t *testing.T, s *Service, share, path, id string) *filesharepb.Version {
	t.Helper()
	vs, err := s.List(ctxT(t), share, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Id == id {
			return v
		}
	}
	return nil
}

func held(t *testing.T, s *Service, data []byte) bool {
	t.Helper()
	_, ok, err := s.chunks.locate(sha256.Sum256(data))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestGCReclaimsPrunedHistory: four versions of a file, each sharing its
// first chunk with the others, with keep_versions 1. Once the three old ones
// are pruned and every site collected (twice: the grace period passes
// between), every site truncated the entries only those named from each of
// the origin's files streams (its chunks go out on both stripes), the
// shared chunk survives (moved out of the dropped prefix) and the latest
// version reads back whole everywhere.
func TestGCReclaimsPrunedHistory(t *testing.T) {
	c, clock := newGCCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt", KeepVersions: 1})
	s := c.svc(us)
	ctx := ctxT(t)
	const size = 4 << 10
	shared := chunkOf(0, 0, size)
	var parent string
	var last []byte
	var kept, oldest *filesharepb.Version
	for n := 1; n <= 4; n++ {
		data := bytes.Clone(shared)
		for i := 1; i <= 7; i++ {
			data = append(data, chunkOf(n, i, size)...)
		}
		f := upload(t, s, "model.bin", data, size)
		if parent != "" {
			f.Parents = []string{parent}
		}
		vs, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent, last, kept = vs[0].Id, data, vs[0]
		if oldest == nil {
			oldest = vs[0]
		}
	}
	// 29 entries over us's two stripes: the shared chunk, then 7 for each
	// version. Versions 1 to 3 hold 22 of them, every one before version
	// 4's in its stream.
	want := floorsBelow([]*filesharepb.Version{kept}, shared)
	if len(want) != 2 || want[Stream] == 0 || want[Stream+"/1"] == 0 {
		t.Fatalf("the kept version's chunks start at %v in us's files streams: want both stripes, past older entries", want)
	}
	if n, err := s.Prune(ctx, "ckpt"); err != nil || n != 3 {
		t.Fatalf("pruned %d versions (%v), want 3", n, err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			vs, err := c.svc(site).List(ctx, "ckpt", "model.bin")
			if err != nil {
				return err
			}
			pruned := 0
			for _, v := range vs {
				if v.Pruned {
					pruned++
				}
			}
			if pruned != 3 {
				return fmt.Errorf("%s: %d pruned", site, pruned)
			}
			return nil
		})
	}

	// The dead chunks wait out their grace period first; meanwhile nothing
	// moves (they could still be committed).
	first := c.gc(t)
	if st := first[us]; st.Dropped != 0 || st.Waiting != 21 || st.Relocated != 0 {
		t.Fatalf("first collection at us: %+v; want nothing dropped or moved, 21 chunks waiting", st)
	}
	reclaimed := map[string]int64{}
	for site, st := range first {
		reclaimed[site] += st.Reclaimed
	}
	relocated := int64(0)
	stabilizertest.Eventually(t, 0, func() error {
		clock.Add(DefaultGCGrace)
		for site, st := range c.gc(t) {
			reclaimed[site] += st.Reclaimed
			if site == us {
				relocated += st.Relocated
			}
		}
		for _, site := range sites3 {
			if f := c.floors(t, site, us); !maps.Equal(f, want) {
				return fmt.Errorf("%s truncated us's files streams to %v, want %v", site, f, want)
			}
		}
		return nil
	})
	if relocated != size {
		t.Errorf("us relocated %d bytes, want the shared chunk's %d", relocated, size)
	}
	for _, site := range sites3 {
		svc := c.svc(site)
		if reclaimed[site] != 22*size {
			t.Errorf("%s reclaimed %d bytes, want the %d of the 22 entries", site, reclaimed[site], 22*size)
		}
		if err := download(ctx, svc, kept, last); err != nil {
			t.Error(err)
		}
		was := stripeOf(oldest, shared)
		if r, ok, err := svc.chunks.locate(sha256.Sum256(shared)); err != nil || !ok || r.Origin != us || r == was || r.Seq <= want[r.Stream] {
			t.Errorf("%s: the shared chunk is at %+v (%v, %v), want moved from %+v past the kept version's entries", site, r, ok, err, was)
		}
		old := chunkOf(1, 3, size)
		if held(t, svc, old) {
			t.Errorf("%s still holds a chunk only pruned versions named", site)
		}
		if _, err := svc.chunks.data(ctx, sha256.Sum256(old)); !errors.Is(err, ErrChunkGone) {
			t.Errorf("%s: download of a collected chunk: %v, want ErrChunkGone", site, err)
		}
		if v := versionByID(t, svc, "ckpt", "model.bin", kept.Id); v == nil || !v.Stable {
			t.Errorf("%s: the kept version is %v, want stable", site, v)
		}
	}
	if st := c.svc(us).GCStatus(); st.Live != 8*size {
		t.Errorf("us counts %d live bytes, want the %d of the kept version", st.Live, 8*size)
	}
}

// TestGCKeepsPendingVersion: a version committed while its site is cut off
// (so never stable) keeps its chunks through collections there, while the
// other sites, which cannot know it, collect a chunk it names by
// deduplication; once the link is back, those sites ask for the chunk, the
// origin sends it again, and the version becomes stable and reads back
// whole everywhere.
func TestGCKeepsPendingVersion(t *testing.T) {
	c, clock := newGCCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt", KeepVersions: 1})
	s := c.svc(us)
	ctx := ctxT(t)
	const size = 4 << 10
	a, b, cc, d := chunkOf(1, 1, size), chunkOf(1, 2, size), chunkOf(2, 1, size), chunkOf(3, 1, size)
	v1, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{upload(t, s, "w.bin", append(bytes.Clone(a), b...), size)}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f2 := upload(t, s, "w.bin", cc, size)
	f2.Parents = []string{v1[0].Id}
	v2, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{f2}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, "ckpt"); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want version 1", n, err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			vs, err := c.svc(site).List(ctx, "ckpt", "w.bin")
			if err != nil {
				return err
			}
			for _, v := range vs {
				if v.Id == v1[0].Id && v.Pruned && held(t, c.svc(site), cc) {
					return nil
				}
			}
			return fmt.Errorf("%s: version 1 not pruned yet", site)
		})
	}

	c.Isolate(us, true)
	content := append(bytes.Clone(a), d...)
	f3 := upload(t, s, "w.bin", content, size) // a is held: deduplicated
	f3.Parents = []string{v2[0].Id}
	v3, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{f3}, CommitOptions{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 0, func() error { return download(ctx, s, v3[0], content) })
	c.gc(t)
	clock.Add(DefaultGCGrace)
	stats := c.gc(t)
	if v := versionByID(t, s, "ckpt", "w.bin", v3[0].Id); v == nil || v.Stable {
		t.Fatalf("the version committed while cut off is %v at us, want listed and not stable", v)
	}
	if err := download(ctx, s, v3[0], content); err != nil {
		t.Fatalf("while cut off: %v", err)
	}
	if held(t, s, b) || stats[us].Dropped != 1 {
		t.Fatalf("us dropped %d chunks, holds b %v; want b (version 1 only) dropped", stats[us].Dropped, held(t, s, b))
	}
	for _, site := range []string{eu, ap} {
		// They know no retained version naming a: collected.
		if held(t, c.svc(site), a) || held(t, c.svc(site), b) || !held(t, c.svc(site), cc) {
			t.Fatalf("%s holds a %v, b %v, c %v; want only c, of version 2", site, held(t, c.svc(site), a),
				held(t, c.svc(site), b), held(t, c.svc(site), cc))
		}
		f := c.floors(t, site, us)
		ra, rb, rc := stripeOf(v1[0], a), stripeOf(v1[0], b), stripeOf(v2[0], cc)
		if f[ra.Stream] < ra.Seq || f[rb.Stream] < rb.Seq || f[rc.Stream] >= rc.Seq {
			t.Fatalf("%s truncated us's streams to %v, want past a (%+v) and b (%+v), not c (%+v)", site, f, ra, rb, rc)
		}
	}

	c.Isolate(us, false)
	stabilizertest.Eventually(t, 0, func() error {
		c.gc(t)
		for _, site := range sites3 {
			got := versionByID(t, c.svc(site), "ckpt", "w.bin", v3[0].Id)
			if got == nil || !got.Stable {
				return fmt.Errorf("%s: version 3 not stable yet", site)
			}
			if err := download(ctx, c.svc(site), got, content); err != nil {
				return err
			}
		}
		return nil
	})
	// Once held again, the requests are withdrawn.
	stabilizertest.Eventually(t, 0, func() error {
		c.gc(t)
		for _, site := range sites3 {
			wants, err := c.kvAt(site).Scan(ctx, wantsPrefix, 0, kv.ReadOptions{})
			if err != nil {
				return err
			}
			if len(wants) > 0 {
				return fmt.Errorf("%s still sees %d requests for chunks", site, len(wants))
			}
		}
		return nil
	})
}

// TestGCGracePeriod: chunks uploaded and not committed survive collections
// for the grace period, at every site, and a commit within it names them;
// the one never committed is dropped once the period is over, and an
// upload of its bytes stores them again.
func TestGCGracePeriod(t *testing.T) {
	c, clock := newGCCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	s := c.svc(us)
	ctx := ctxT(t)
	const size = 4 << 10
	x, y := chunkOf(1, 1, size), chunkOf(1, 2, size)
	fx := upload(t, s, "x.bin", x, size)
	upload(t, s, "y.bin", y, size)
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			if !held(t, c.svc(site), x) || !held(t, c.svc(site), y) {
				return fmt.Errorf("%s does not hold both chunks yet", site)
			}
			return nil
		})
	}
	for site, st := range c.gc(t) {
		if st.Dropped != 0 || st.Waiting != 2 {
			t.Fatalf("first collection at %s: %+v, want both chunks waiting", site, st)
		}
	}
	clock.Add(DefaultGCGrace - time.Second)
	for site, st := range c.gc(t) {
		if st.Dropped != 0 || !held(t, c.svc(site), x) || !held(t, c.svc(site), y) {
			t.Fatalf("within the grace period %s dropped %d chunks", site, st.Dropped)
		}
	}
	vs, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{fx}, CommitOptions{})
	if err != nil {
		t.Fatalf("a commit within the grace period: %v", err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			_, err := version(t, c.svc(site), "ckpt", "x.bin")
			return err
		})
	}
	clock.Add(2 * time.Second)
	for site, st := range c.gc(t) {
		svc := c.svc(site)
		if st.Dropped != 1 || held(t, svc, y) {
			t.Errorf("after the grace period %s dropped %d chunks, holds y %v; want y dropped", site, st.Dropped, held(t, svc, y))
		}
		if err := download(ctx, svc, vs[0], x); err != nil {
			t.Error(err)
		}
	}
	if _, dup, err := s.chunks.put(ctx, sha256.Sum256(y), y); err != nil || dup {
		t.Fatalf("upload of dropped bytes: duplicate %v, %v; want stored again", dup, err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			if !held(t, c.svc(site), y) {
				return fmt.Errorf("%s does not hold y again", site)
			}
			return nil
		})
	}
}

func TestGCStatsString(t *testing.T) {
	for _, tc := range []struct {
		st   GCStats
		want string
	}{
		{GCStats{}, "no collection yet"},
		{GCStats{At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Held: 3 << 20, Live: 1 << 20, Reclaimed: 1536, Dropped: 2, Waiting: 1, Wanted: 1},
			"3.0 MiB held, 1.0 MiB live, 2.0 MiB reclaimable; the last collection (2025-01-02T03:04:05Z) reclaimed 1.5 KiB, relocated 0 B, " +
				"dropped 2 chunks, keeps 1 in their grace period, asks other sites for 1"},
	} {
		if got := tc.st.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestStripedGCCompactsEveryStripe: the collector compacts and truncates
// each of a site's files streams, not only "files". Two chunks shared by
// every version of a file start each stripe (the transfer spreads uploads by
// bytes: the first goes to "files", the second to "files/1"); once the old
// versions are pruned, the site moves both out of the dead prefixes of their
// stripes, and every site truncates both stripes below the kept version's
// entries.
func TestStripedGCCompactsEveryStripe(t *testing.T) {
	c, clock := newGCCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt", KeepVersions: 1})
	s := c.svc(us)
	ctx := ctxT(t)
	const size = 4 << 10
	a, b := chunkOf(0, 1, size), chunkOf(0, 2, size)
	var parent string
	var last []byte
	var kept, oldest *filesharepb.Version
	for n := 1; n <= 3; n++ {
		data := append(bytes.Clone(a), b...)
		for i := 1; i <= 6; i++ {
			data = append(data, chunkOf(n, i, size)...)
		}
		f := upload(t, s, "model.bin", data, size)
		if parent != "" {
			f.Parents = []string{parent}
		}
		vs, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent, last, kept = vs[0].Id, data, vs[0]
		if oldest == nil {
			oldest = vs[0]
		}
	}
	wasA, wasB := stripeOf(oldest, a), stripeOf(oldest, b)
	if wasA.Stream != Stream || wasA.Seq != 1 || wasB.Stream != Stream+"/1" || wasB.Seq != 1 {
		t.Fatalf("the shared chunks went to %+v and %+v: want the first entry of each stripe", wasA, wasB)
	}
	want := floorsBelow([]*filesharepb.Version{kept}, a, b)
	if want[Stream] == 0 || want[Stream+"/1"] == 0 {
		t.Fatalf("the kept version's chunks start at %v: want past older entries on both stripes", want)
	}
	if n, err := s.Prune(ctx, "ckpt"); err != nil || n != 2 {
		t.Fatalf("pruned %d versions (%v), want 2", n, err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			if v := versionByID(t, c.svc(site), "ckpt", "model.bin", oldest.Id); v == nil || !v.Pruned {
				return fmt.Errorf("%s: version 1 not pruned yet", site)
			}
			return nil
		})
	}
	c.gc(t)
	var relocated int64
	stabilizertest.Eventually(t, 0, func() error {
		clock.Add(DefaultGCGrace)
		relocated += c.gc(t)[us].Relocated
		for _, site := range sites3 {
			if f := c.floors(t, site, us); !maps.Equal(f, want) {
				return fmt.Errorf("%s truncated us's files streams to %v, want %v", site, f, want)
			}
		}
		return nil
	})
	if relocated != 2*size {
		t.Errorf("us relocated %d bytes, want the shared chunks' %d", relocated, 2*size)
	}
	for _, site := range sites3 {
		svc := c.svc(site)
		for name, was := range map[string]Ref{"a": wasA, "b": wasB} {
			data := a
			if name == "b" {
				data = b
			}
			r, ok, err := svc.chunks.locate(sha256.Sum256(data))
			if err != nil || !ok || r.Origin != us || r.Seq <= want[r.Stream] {
				t.Errorf("%s: shared chunk %s is at %+v (%v, %v), want moved from %+v past the kept version's entries", site, name, r, ok, err, was)
			}
		}
		if err := download(ctx, svc, kept, last); err != nil {
			t.Error(err)
		}
		// The index of both stripes is swept below their floors.
		for stream, f := range want {
			es, err := svc.chunks.entries(stabilizer.StreamID{Origin: us, Name: stream}, 0, f)
			if err != nil || len(es) != 0 {
				t.Errorf("%s: %d index records of us's %s below its floor %d (%v)", site, len(es), stream, f, err)
			}
		}
	}
}
