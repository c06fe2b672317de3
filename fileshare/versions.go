package fileshare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// versionKey is the KV key of one version: every version its own key, so
// that concurrent versions of a path are all kept.
func versionKey(share, p, id string) string {
	return versionsPrefix + share + "/" + p + "\x00" + id
}

func pathPrefix(share, p string) string {
	if p == "" {
		return versionsPrefix + share + "/"
	}
	return versionsPrefix + share + "/" + p + "\x00"
}

// CommitOptions says how a commit waits.
type CommitOptions struct {
	Commit  bool          // the files form one commit (visible together)
	Timeout time.Duration // 0: Config.DefaultTimeout
	NoWait  bool          // return once recorded, stable or not
	// Early records the versions before their chunks are all here: a
	// chunk not held yet is named by hash and size, located by hash at
	// each site once it arrives. Implies NoWait.
	Early bool
}

// Commit records file versions once every chunk they name is held here,
// then waits until they are stable under the share's visibility predicate:
// first the chunks, then the manifests, written through the KV with that
// predicate as their wait. On a timeout it returns the library's WaitError
// (how far the acks got); the versions stay recorded and become stable
// later.
func (s *Service) Commit(ctx context.Context, share string, files []*filesharepb.FileVersion, o CommitOptions) ([]*filesharepb.Version, error) {
	sh, err := s.Share(ctx, share)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: commit to %q names no file", ErrBadVersion, share)
	}
	o.NoWait = o.NoWait || o.Early
	var held [][32]byte // live until the versions are in the KV
	defer func() { s.chunks.release(held) }()
	vs, err := s.buildVersions(sh, files, o.Commit, o.Early, &held)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = s.cfg.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := sh.Visibility
	if o.NoWait {
		wait = "none"
	} else if err := s.waitChunks(ctx, sh.Visibility, vs); err != nil {
		return nil, err
	}
	ops := make([]kv.Op, len(vs))
	for i, v := range vs {
		b, err := manifest.Encode(v)
		if err != nil {
			return nil, err
		}
		ops[i] = kv.Op{Key: versionKey(share, v.Path, v.Id), Value: b}
	}
	res, err := s.kv.WriteBatch(ctx, ops, kv.WriteOptions{Wait: wait})
	s.wrote(share, ops, res)
	if err != nil {
		return nil, fmt.Errorf("fileshare: commit to %q: %w", share, err)
	}
	for i, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("fileshare: commit %q to %q: %w", vs[i].Path, share, r.Err)
		}
	}
	for _, v := range vs {
		v.Stable = !o.NoWait
		s.metrics.committed(share)
	}
	return vs, nil
}

// buildVersions checks what a client sent and completes it into versions:
// id, HLC and origin from this site, chunk locations from what it holds.
// The chunks it names are held (added to held) until the caller releases
// them, so that the collector keeps them until the versions are recorded.
func (s *Service) buildVersions(sh *filesharepb.Share, files []*filesharepb.FileVersion, commit, early bool, held *[][32]byte) ([]*filesharepb.Version, error) {
	var errs []error
	vs := make([]*filesharepb.Version, 0, len(files))
	seen := map[string]bool{}
	for _, f := range files {
		if err := safepath.Check(f.Path); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrBadVersion, err))
			continue
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("%w: %q named twice in one commit", ErrBadVersion, f.Path))
			continue
		}
		seen[f.Path] = true
		h := s.nextHLC()
		v := &filesharepb.Version{
			Id: string(plan.NewVersionID(s.node.Site(), h)), Share: sh.Name, Path: f.Path,
			Parents: f.Parents, Kept: f.Kept, Deleted: f.Deleted, Mode: f.Mode & 0o777, Mtime: f.Mtime,
			HlcWall: h.Wall, HlcLogical: h.Logical, Origin: s.node.Site(),
		}
		if !f.Deleted {
			if err := s.resolveChunks(v, f, early, held); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		vs = append(vs, v)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if commit {
		for _, v := range vs {
			v.Commit, v.CommitFiles = vs[0].Id, uint32(len(vs))
		}
	}
	for _, v := range vs {
		if err := manifest.Validate(v); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// resolveChunks fills v's chunk list, size and content from what this site
// holds of the chunks f names; early, a chunk not held yet keeps the size
// the client gave and no location. Each chunk looked up is added to held.
func (s *Service) resolveChunks(v *filesharepb.Version, f *filesharepb.FileVersion, early bool, held *[][32]byte) error {
	chunks := make([]plan.Chunk, 0, len(f.Chunks))
	for i, c := range f.Chunks {
		if len(c.Hash) != 32 {
			return fmt.Errorf("%w: %q chunk %d: hash of %d bytes, want 32", ErrBadVersion, f.Path, i, len(c.Hash))
		}
		h := [32]byte(c.Hash)
		r, ok, err := s.chunks.hold(h)
		*held = append(*held, h)
		if err != nil {
			return err
		}
		if !ok && early {
			r = Ref{Size: c.Size}
		} else if !ok {
			return fmt.Errorf("%w: %q chunk %d (%x): upload it first", ErrMissingChunk, f.Path, i, h[:8])
		}
		v.Chunks = append(v.Chunks, chunkRef(c.Hash, r))
		v.Size += int64(r.Size)
		chunks = append(chunks, plan.Chunk{Hash: h, Size: r.Size})
	}
	if f.Size != 0 && f.Size != v.Size {
		return fmt.Errorf("%w: %q is %d bytes, its chunks hold %d", ErrBadVersion, f.Path, f.Size, v.Size)
	}
	content := plan.ContentOf(chunks)
	v.Content = content[:]
	return nil
}

// waitChunks waits until the chunks of vs are stable under pred: per files
// stream (each stripe of each origin's), its highest seq they name.
func (s *Service) waitChunks(ctx context.Context, pred string, vs []*filesharepb.Version) error {
	need := map[stabilizer.StreamID]uint64{}
	for _, v := range vs {
		s.chunks.needs(need, v)
	}
	for id, seq := range need {
		if err := s.node.WaitFor(ctx, id, pred, seq); err != nil {
			return fmt.Errorf("fileshare: chunks from %s up to seq %d: %w", id.Origin, seq, err)
		}
	}
	return nil
}

// List returns every version of a share (or of one path) this site knows,
// each marked stable or not under the share's visibility predicate, with
// the sites where it and its chunks are persisted.
func (s *Service) List(ctx context.Context, share, p string) ([]*filesharepb.Version, error) {
	sh, err := s.Share(ctx, share)
	if err != nil {
		return nil, err
	}
	if p != "" {
		if err := safepath.Check(p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadVersion, err)
		}
	}
	kvs, err := s.kv.Scan(ctx, pathPrefix(share, p), 0, kv.ReadOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*filesharepb.Version, 0, len(kvs))
	seqs := make([]uint64, 0, len(kvs))
	origins := make([]string, 0, len(kvs))
	for _, e := range kvs {
		v, err := manifest.Decode(e.Value)
		if err != nil || v.Share != share || !strings.HasPrefix(e.Key, pathPrefix(share, v.Path)) {
			s.log.Warn("skipping a bad version record", "key", e.Key, "error", err)
			continue
		}
		out = append(out, v)
		seqs = append(seqs, e.Seq)
		origins = append(origins, e.Origin)
	}
	st := s.newStability(sh.Visibility)
	for i, v := range out {
		st.mark(ctx, v, origins[i], seqs[i])
	}
	return out, nil
}

// stability answers, for one List, where versions are stable: frontiers
// and ack tables are read once per stream. A chunk recorded without a
// location (an early commit) is located by hash here; one not held here
// yet keeps its version unstable.
type stability struct {
	s      *Service
	pred   string
	sites  []string
	front  map[stabilizer.StreamID]uint64
	tables map[stabilizer.StreamID][]uint64
}

func (s *Service) newStability(pred string) *stability {
	return &stability{s: s, pred: pred, sites: s.node.Schema().Sites,
		front: map[stabilizer.StreamID]uint64{}, tables: map[stabilizer.StreamID][]uint64{}}
}

func (st *stability) frontier(ctx context.Context, id stabilizer.StreamID) uint64 {
	f, ok := st.front[id]
	if !ok {
		fs, err := st.s.node.Frontier(ctx, id, st.pred)
		if err == nil {
			f = fs.Seq
		}
		st.front[id] = f
	}
	return f
}

func (st *stability) persistedAt(ctx context.Context, id stabilizer.StreamID, site int) uint64 {
	t, ok := st.tables[id]
	if !ok {
		t, _ = st.s.node.AckTable(ctx, id)
		st.tables[id] = t
	}
	i := frontier.Persisted*len(st.sites) + site
	if i >= len(t) {
		return 0
	}
	return t[i]
}

// mark sets v.Stable and v.PersistedAt: the manifest (kv write origin:seq)
// and each chunk are covered by the frontier, and persisted, per site.
func (st *stability) mark(ctx context.Context, v *filesharepb.Version, origin string, seq uint64) {
	need := map[stabilizer.StreamID]uint64{{Origin: origin, Name: kv.Stream}: seq}
	located := st.s.chunks.needs(need, v)
	v.Stable, v.PersistedAt = st.markNeed(ctx, need, located)
}

// markNeed says whether entries up to need (per stream, the highest seq)
// are stable, and at which sites they are persisted, sorted; located false
// (a chunk not held here) makes neither hold.
func (st *stability) markNeed(ctx context.Context, need map[stabilizer.StreamID]uint64, located bool) (bool, []string) {
	stable := located
	for id, q := range need {
		if st.frontier(ctx, id) < q {
			stable = false
		}
	}
	var at []string
	for i, site := range st.sites {
		ok := located
		for id, q := range need {
			if st.persistedAt(ctx, id, i) < q {
				ok = false
			}
		}
		if ok {
			at = append(at, site)
		}
	}
	slices.Sort(at)
	return stable, at
}
