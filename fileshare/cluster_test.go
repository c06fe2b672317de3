package fileshare

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	us = "us-east-1"
	eu = "eu-west-1"
	ap = "ap-northeast-1"
)

var sites3 = []string{us, eu, ap}

// cluster runs the service (and its kv store) on every site of a test
// cluster.
type cluster struct {
	*stabilizertest.Cluster
	t    testing.TB
	tune func(*Config) // adjusts every site's service configuration
	mu   sync.Mutex
	svcs map[string]*Service
	kvs  map[string]*kv.Store
	// legacy, when set, sets a site up in place of the service (its kv
	// store made already): what a site of an earlier release registered.
	legacy func(site string, n *stabilizer.Node, s *kv.Store) error
}

func newCluster(t testing.TB, sites ...string) *cluster { return newTunedCluster(t, nil, sites...) }

func newTunedCluster(t testing.TB, tune func(*Config), sites ...string) *cluster {
	return startCluster(t, &cluster{tune: tune}, sites...)
}

// startCluster starts the sites of c, set up as c says.
func startCluster(t testing.TB, c *cluster, sites ...string) *cluster {
	c.t, c.svcs, c.kvs = t, map[string]*Service{}, map[string]*kv.Store{}
	c.Cluster = stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites, Setup: c.setup,
		Started: func(site string, _ *stabilizer.Node) error {
			if s := c.svc(site); s != nil {
				return s.Start()
			}
			return nil
		},
		Stopping: func(site string, _ *stabilizer.Node) {
			c.mu.Lock()
			s := c.svcs[site]
			delete(c.svcs, site)
			c.mu.Unlock()
			if s != nil {
				_ = s.Close()
			}
		}})
	return c
}

func (c *cluster) setup(site string, n *stabilizer.Node) error {
	s, err := kv.New(kv.Config{Node: n, DefaultTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	c.mu.Lock()
	legacy := c.legacy
	c.mu.Unlock()
	if legacy != nil {
		c.mu.Lock()
		c.kvs[site] = s
		c.mu.Unlock()
		return legacy(site, n, s)
	}
	cfg := Config{Node: n, KV: s, Logger: stabilizertest.Logger(c.t, site+"/fileshare"), DefaultTimeout: 20 * time.Second}
	if c.tune != nil {
		c.tune(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.svcs[site], c.kvs[site] = svc, s
	c.mu.Unlock()
	return nil
}

func (c *cluster) svc(site string) *Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.svcs[site]
}

func ctxT(t testing.TB) context.Context { return stabilizertest.Context(t, 60*time.Second) }

// upload stores data as chunks of size at a site and returns the file
// version naming them.
func upload(t *testing.T, s *Service, path string, data []byte, size int) *filesharepb.FileVersion {
	t.Helper()
	f := &filesharepb.FileVersion{Path: path, Size: int64(len(data)), Mode: 0o644, Mtime: 1}
	for off := 0; off < len(data); off += size {
		piece := data[off:min(off+size, len(data))]
		h := sha256.Sum256(piece)
		if _, _, err := s.chunks.put(ctxT(t), h, piece); err != nil {
			t.Fatalf("put chunk of %s: %v", path, err)
		}
		f.Chunks = append(f.Chunks, &filesharepb.ChunkRef{Hash: h[:], Size: uint32(len(piece))})
	}
	return f
}

func (c *cluster) share(t *testing.T, at string, sh *filesharepb.Share) {
	t.Helper()
	if _, err := c.svc(at).CreateShare(ctxT(t), sh); err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range c.Sites() {
			if svc := c.svc(s); svc != nil {
				if _, err := svc.Share(ctxT(t), sh.Name); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// version finds one version of a path in a site's List.
func version(t *testing.T, s *Service, share, path string) (*filesharepb.Version, error) {
	vs, err := s.List(ctxT(t), share, path)
	if err != nil {
		return nil, err
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("%d versions of %q at %s", len(vs), path, s.node.Site())
	}
	return vs[0], nil
}

func TestCommitBecomesStableEverywhere(t *testing.T) {
	c := newCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := upload(t, c.svc(us), "job-7/step-100/shard-0", data, 64<<10)
	vs, err := c.svc(us).Commit(ctxT(t), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || !vs[0].Stable || vs[0].Size != int64(len(data)) || len(vs[0].Chunks) != 5 {
		t.Fatalf("commit returned %v", vs)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			v, err := version(t, c.svc(site), "ckpt", f.Path)
			if err != nil {
				return err
			}
			if !v.Stable || len(v.PersistedAt) < 2 {
				return fmt.Errorf("%s: stable %v, persisted at %v", site, v.Stable, v.PersistedAt)
			}
			for _, ch := range v.Chunks {
				if d, err := c.svc(site).chunks.data(ctxT(t), [32]byte(ch.Hash)); err != nil || d == nil {
					return fmt.Errorf("%s does not hold chunk %x yet", site, ch.Hash[:4])
				}
			}
			return nil
		})
	}
	// The same bytes uploaded elsewhere are not stored or sent again.
	h := sha256.Sum256(data[:64<<10])
	if _, dup, err := c.svc(eu).chunks.put(ctxT(t), h, data[:64<<10]); err != nil || !dup {
		t.Fatalf("re-upload at eu: duplicate %v, %v", dup, err)
	}
}

// TestNotStableWhileCut: with the origin cut off, its version is recorded
// but never stable, anywhere; once the links are restored it is.
func TestNotStableWhileCut(t *testing.T) {
	c := newCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	c.Isolate(us, true)
	f := upload(t, c.svc(us), "a.bin", []byte("weights"), 4)
	vs, err := c.svc(us).Commit(ctxT(t), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Stable {
		t.Fatal("a no-wait commit reported stable")
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	_, err = c.svc(us).Commit(ctx, "ckpt", []*filesharepb.FileVersion{upload(t, c.svc(us), "b.bin", []byte("more"), 4)}, CommitOptions{})
	cancel()
	var we *stabilizer.WaitError
	if !errors.As(err, &we) {
		t.Fatalf("commit while cut off: %v, want a WaitError", err)
	}
	if v, err := version(t, c.svc(us), "ckpt", "a.bin"); err != nil || v.Stable {
		t.Fatalf("at us while cut off: %v, %v", v, err)
	}
	c.Isolate(us, false)
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			v, err := version(t, c.svc(site), "ckpt", "a.bin")
			if err != nil {
				return err
			}
			if !v.Stable {
				return fmt.Errorf("%s: not stable yet", site)
			}
			return nil
		})
	}
}

func TestBadInput(t *testing.T) {
	c := newCluster(t, us, eu)
	c.share(t, us, &filesharepb.Share{Name: "cfg"})
	s := c.svc(us)
	ctx := ctxT(t)
	good := upload(t, s, "ok.txt", []byte("fine"), 4)
	h := sha256.Sum256([]byte("never uploaded"))
	for _, tc := range []struct {
		name string
		want error
		err  error
	}{
		{"bad share name", ErrBadShare, func() error {
			_, err := s.CreateShare(ctx, &filesharepb.Share{Name: "../x"})
			return err
		}()},
		{"bad visibility", ErrBadShare, func() error {
			_, err := s.CreateShare(ctx, &filesharepb.Share{Name: "v", Visibility: "persisted(nowhere)"})
			return err
		}()},
		{"bad commit dirs", ErrBadShare, func() error {
			_, err := s.CreateShare(ctx, &filesharepb.Share{Name: "d", CommitMarker: ".metadata", CommitDirs: "[x"})
			return err
		}()},
		{"share redefined", ErrShareExists, func() error {
			_, err := s.CreateShare(ctx, &filesharepb.Share{Name: "cfg", Visibility: "all"})
			return err
		}()},
		{"unknown share", ErrUnknownShare, func() error {
			_, err := s.Commit(ctx, "nope", []*filesharepb.FileVersion{good}, CommitOptions{})
			return err
		}()},
		{"chunk not uploaded", ErrMissingChunk, func() error {
			_, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{{Path: "x", Chunks: []*filesharepb.ChunkRef{{Hash: h[:]}}}}, CommitOptions{})
			return err
		}()},
		{"path escapes", ErrBadVersion, func() error {
			bad := proto.CloneOf(good)
			bad.Path = "../../etc/passwd"
			_, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{bad}, CommitOptions{})
			return err
		}()},
		{"wrong hash", ErrBadChunk, func() error {
			_, _, err := s.chunks.put(ctx, h, []byte("other bytes"))
			return err
		}()},
		{"size mismatch", ErrBadVersion, func() error {
			bad := proto.CloneOf(good)
			bad.Size = 99
			_, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{bad}, CommitOptions{})
			return err
		}()},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// Nothing refused was recorded; what was accepted before still is.
	if _, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{good}, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	vs, err := s.List(ctx, "cfg", "")
	if err != nil || len(vs) != 1 || vs[0].Path != "ok.txt" {
		t.Fatalf("list after bad input: %v, %v", vs, err)
	}
}

// TestBadManifestFromTheNetworkIsSkipped: a version record that another
// site (or anyone with KV access) wrote with a path escaping the folder is
// never listed.
func TestBadManifestFromTheNetworkIsSkipped(t *testing.T) {
	c := newCluster(t, us, eu)
	c.share(t, us, &filesharepb.Share{Name: "cfg"})
	raw := []byte{0x12, 0x0e, '.', '.', '/', '.', '.', '/', 'e', 't', 'c', '/', 'x', 'x', 'x', 'x'}
	if _, err := c.kvAt(eu).Put(ctxT(t), versionKey("cfg", "../../etc/xxxx", "id"), raw, kv.WriteOptions{Wait: "all"}); err != nil {
		t.Fatal(err)
	}
	vs, err := c.svc(us).List(ctxT(t), "cfg", "")
	if err != nil || len(vs) != 0 {
		t.Fatalf("list: %v, %v; want nothing", vs, err)
	}
}

func (c *cluster) kvAt(site string) *kv.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kvs[site]
}

// TestHistoryRetention: with keep_versions 1, the versions superseded by a
// stable newer one lose their content once the site prunes, keep their
// ancestry, and the current one is untouched; a version kept as a conflict
// copy is never pruned.
func TestHistoryRetention(t *testing.T) {
	c := newCluster(t, us, eu)
	c.share(t, us, &filesharepb.Share{Name: "cfg", KeepVersions: 1})
	s := c.svc(us)
	ctx := ctxT(t)
	var parent string
	for i := range 3 {
		f := upload(t, s, "train.yaml", fmt.Appendf(nil, "lr: 0.%d", i+1), 64)
		if parent != "" {
			f.Parents = []string{parent}
		}
		vs, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{f}, CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent = vs[0].Id
	}
	n, err := s.Prune(ctx, "cfg")
	if err != nil || n != 2 {
		t.Fatalf("pruned %d versions (%v), want the 2 superseded ones", n, err)
	}
	stabilizertest.Eventually(t, 0, func() error {
		vs, err := c.svc(eu).List(ctx, "cfg", "train.yaml")
		if err != nil {
			return err
		}
		pruned := 0
		for _, v := range vs {
			switch {
			case v.Pruned && len(v.Chunks) == 0:
				pruned++
			case v.Pruned:
				t.Fatalf("pruned version %s still names %d chunks", v.Id, len(v.Chunks))
			case v.Id != parent:
				return fmt.Errorf("%s not pruned at eu yet", v.Id)
			}
		}
		if pruned != 2 {
			return fmt.Errorf("%d pruned at eu", pruned)
		}
		return nil
	})
	if n, _ := s.Prune(ctx, "cfg"); n != 0 {
		t.Errorf("a second prune pruned %d more", n)
	}
}

// TestEarlyCommit: a version recorded before its chunks are uploaded is
// listed everywhere at once, unstable, with its chunks named by hash, and
// becomes stable at every site once the chunks arrive.
func TestEarlyCommit(t *testing.T) {
	c := newCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	data := []byte("shard bytes that are not uploaded yet")
	h := sha256.Sum256(data)
	f := &filesharepb.FileVersion{Path: "step-1/shard-0", Size: int64(len(data)),
		Chunks: []*filesharepb.ChunkRef{{Hash: h[:], Size: uint32(len(data))}}}
	if _, err := c.svc(us).Commit(ctxT(t), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{}); !errors.Is(err, ErrMissingChunk) {
		t.Fatalf("a commit naming a chunk not uploaded: %v, want ErrMissingChunk", err)
	}
	vs, err := c.svc(us).Commit(ctxT(t), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{Early: true})
	if err != nil || len(vs) != 1 || vs[0].Stable {
		t.Fatalf("early commit: %v, %v", vs, err)
	}
	for _, site := range []string{eu, ap} {
		stabilizertest.Eventually(t, 0, func() error {
			v, err := version(t, c.svc(site), "ckpt", f.Path)
			if err != nil {
				return err
			}
			if v.Stable || len(v.PersistedAt) > 0 {
				t.Fatalf("%s: stable %v persisted at %v before the chunk was uploaded", site, v.Stable, v.PersistedAt)
			}
			return nil
		})
	}
	if _, _, err := c.svc(us).chunks.put(ctxT(t), h, data); err != nil {
		t.Fatal(err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			v, err := version(t, c.svc(site), "ckpt", f.Path)
			if err != nil {
				return err
			}
			if !v.Stable {
				return fmt.Errorf("%s: not stable yet", site)
			}
			return nil
		})
	}
}

// TestStripedTransfer: with three sites, a site's files transfer is two
// bulk streams, one per peer; an upload's chunks are appended to them at
// once (one call, as PutChunks stores a batch), spread by bytes, and the
// version names each chunk's stream. Every site applies both stripes, holds
// every chunk whole and lists the version stable, with the refs its origin
// gave.
func TestStripedTransfer(t *testing.T) {
	c := newCluster(t, sites3...)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	s := c.svc(us)
	ctx := ctxT(t)
	if want := []string{Stream, Stream + "/1"}; !slices.Equal(s.stripes, want) {
		t.Fatalf("the files transfer's streams are %v, want %v (one per peer)", s.stripes, want)
	}
	const n, size = 16, 64 << 10
	data := make([]byte, n*size)
	rand.NewChaCha8([32]byte{1}).Read(data)
	var appends int
	s.chunks.mu.Lock()
	appendStriped := s.chunks.mu.appendStriped
	s.chunks.mu.appendStriped = func(ctx context.Context, name string, payloads [][]byte) ([]stabilizer.Appended, error) {
		appends++
		return appendStriped(ctx, name, payloads)
	}
	s.chunks.mu.Unlock()
	f := &filesharepb.FileVersion{Path: "step-1/shard-0", Size: int64(len(data)), Mode: 0o644}
	var ups []putItem
	for off := 0; off < len(data); off += size {
		h := sha256.Sum256(data[off : off+size])
		ups = append(ups, putItem{Hash: h, Data: data[off : off+size]})
		f.Chunks = append(f.Chunks, &filesharepb.ChunkRef{Hash: h[:], Size: size})
	}
	if _, err := s.chunks.putBatch(ctx, ups); err != nil {
		t.Fatal(err)
	}
	if appends != 1 {
		t.Fatalf("%d appends for one batch, want 1", appends)
	}
	vs, err := s.Commit(ctx, "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := vs[0]
	got := map[string]int{}
	for i, ch := range v.Chunks {
		r := refOf(ch)
		if r.Origin != us || !isStripe(r.Stream) || (ch.Stream == "") != (r.Stream == Stream) {
			t.Fatalf("chunk %d at %+v (stream %q in the ref)", i, r, ch.Stream)
		}
		got[r.Stream] += int(r.Size)
	}
	if got[Stream] != n/2*size || got[Stream+"/1"] != n/2*size {
		t.Fatalf("bytes per stripe %v: want half of the %d on each", got, len(data))
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			lv, err := version(t, c.svc(site), "ckpt", f.Path)
			if err != nil {
				return err
			}
			if !lv.Stable || len(lv.PersistedAt) != 3 {
				return fmt.Errorf("%s: stable %v, persisted at %v", site, lv.Stable, lv.PersistedAt)
			}
			for i, ch := range lv.Chunks {
				if !proto.Equal(ch, v.Chunks[i]) {
					t.Fatalf("%s lists chunk %d as %v, its origin recorded %v", site, i, ch, v.Chunks[i])
				}
			}
			sts, err := c.Node(site).Streams(ctx)
			if err != nil {
				return err
			}
			heads := map[string]uint64{}
			for _, st := range sts {
				if st.Stream.Origin == us && isStripe(st.Stream.Name) {
					heads[st.Stream.Name] = st.Head
				}
			}
			if heads[Stream] != n/2 || heads[Stream+"/1"] != n/2 {
				return fmt.Errorf("%s holds %v of us's stripes, want %d entries of each", site, heads, n/2)
			}
			return download(ctx, c.svc(site), lv, data)
		})
	}
}
