package filesharetest

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// MaxChunk is the largest chunk PutChunks takes, as at a real site.
const MaxChunk = 8 << 20

// Cluster is what the fake sites share: share definitions and every
// version (the KV's part), plus each site's chunks.
type Cluster struct {
	mu struct {
		sync.Mutex
		shares     map[string]*filesharepb.Share
		versions   []*filesharepb.Version // in the order recorded
		wall       int64                  // the fake HLC: one tick per version
		holdStable bool
		held       map[string]bool // version id: not stable yet
		sites      map[string]*site
		order      []string // site names in start order
		changed    chan struct{}
		// Lists with a cursor: per version id, what the last such List
		// said of it and the generation it changed at; versions
		// forgotten, with theirs. epoch voids every cursor when it moves.
		listGen   uint64
		listed    map[string]listedState
		goneAt    map[string]uint64
		epoch     uint64
		noCursors bool
	}
}

// listedState is what a List with a cursor last said of a version.
type listedState struct {
	gen         uint64
	stable      bool
	persistedAt []string
}

// stripes is how many files streams a fake site spreads its chunks over,
// as a site of three does (one per peer).
const stripes = 2

// site is one fake site's own state, guarded by Cluster.mu.
type site struct {
	name      string
	chunks    map[[32]byte][]byte
	refs      map[[32]byte]*filesharepb.ChunkRef
	seq       [stripes]uint64 // per stripe of the files transfer
	holdChunk bool
	pending   map[[32]byte]*filesharepb.ChunkRef // arrived elsewhere, held back
	failAfter int                                // GetChunks: fail after this many chunks; < 0 never
	served    int                                // chunks sent by GetChunks with held = true
	put       int                                // chunks stored through PutChunks (not duplicates)
	fullLists int                                // Lists answered in full
	deltas    int                                // Lists answered with what changed since a cursor
	holdPut   bool                               // PutChunks holds its answers back
	puts      PutStats
}

// NewCluster returns a cluster with no shares and no sites.
func NewCluster() *Cluster {
	c := &Cluster{}
	c.mu.shares = map[string]*filesharepb.Share{}
	c.mu.held = map[string]bool{}
	c.mu.sites = map[string]*site{}
	c.mu.wall = 1_700_000_000_000_000_000
	c.mu.changed = make(chan struct{})
	c.mu.listed = map[string]listedState{}
	c.mu.goneAt = map[string]uint64{}
	c.mu.epoch = 1
	return c
}

func (c *Cluster) changedLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
}

func (c *Cluster) watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.changed
}

// WaitFor waits until cond holds, looking again on every change of the
// cluster; it fails the test after 10 s. cond may look at the cluster.
func (c *Cluster) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		ch := c.watch()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waited 10s for %s", what)
		}
	}
}

func (c *Cluster) addSite(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.sites[name] != nil {
		return
	}
	s := &site{name: name, chunks: map[[32]byte][]byte{}, refs: map[[32]byte]*filesharepb.ChunkRef{},
		pending: map[[32]byte]*filesharepb.ChunkRef{}, failAfter: -1}
	// A new site holds what the others hold, as it would once caught up.
	for _, o := range c.mu.sites {
		for h, d := range o.chunks {
			s.chunks[h], s.refs[h] = d, o.refs[h]
		}
	}
	c.mu.sites[name] = s
	c.mu.order = append(c.mu.order, name)
}

// normalize fills a share's defaults, so that two definitions that mean
// the same compare equal.
func normalize(sh *filesharepb.Share) *filesharepb.Share {
	sh = proto.Clone(sh).(*filesharepb.Share)
	if sh.Visibility == "" {
		sh.Visibility = "majority"
	}
	if sh.CommitMarker != "" && sh.CommitDirs == "" {
		sh.CommitDirs = "*"
	}
	if sh.KeepVersions == 0 {
		sh.KeepVersions = 10
	}
	if sh.KeepSeconds == 0 {
		sh.KeepSeconds = 30 * 24 * 3600
	}
	return sh
}

func (c *Cluster) createShare(sh *filesharepb.Share) (*filesharepb.Share, error) {
	if sh == nil || sh.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "a share needs a name")
	}
	sh = normalize(sh)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.mu.shares[sh.Name]; old != nil {
		if !proto.Equal(old, sh) {
			return nil, status.Errorf(codes.AlreadyExists, "share %s exists with another definition (visibility %s, commit_marker %q, commit_dirs %q)",
				sh.Name, old.Visibility, old.CommitMarker, old.CommitDirs)
		}
		return proto.Clone(old).(*filesharepb.Share), nil
	}
	c.mu.shares[sh.Name] = sh
	c.changedLocked()
	return proto.Clone(sh).(*filesharepb.Share), nil
}

// CreateShare defines a share, failing the test if that fails.
func (c *Cluster) CreateShare(t testing.TB, sh *filesharepb.Share) *filesharepb.Share {
	t.Helper()
	out, err := c.createShare(sh)
	if err != nil {
		t.Fatalf("create share %s: %v", sh.GetName(), err)
	}
	return out
}

func unknownShare(name string) error { return status.Errorf(codes.NotFound, "unknown share %s", name) }

func (c *Cluster) getShare(name string) (*filesharepb.Share, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.mu.shares[name]
	if sh == nil {
		return nil, unknownShare(name)
	}
	return proto.Clone(sh).(*filesharepb.Share), nil
}

func (c *Cluster) listShares() []*filesharepb.Share {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*filesharepb.Share
	for _, n := range slices.Sorted(maps.Keys(c.mu.shares)) {
		out = append(out, proto.Clone(c.mu.shares[n]).(*filesharepb.Share))
	}
	return out
}

// HoldStability makes the versions recorded from now on not stable until
// released (on), or stops doing so for the next ones (off; those held stay
// held).
func (c *Cluster) HoldStability(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.holdStable = on
}

// Release makes the given held versions stable.
func (c *Cluster) Release(ids ...plan.VersionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.mu.held, string(id))
	}
	c.changedLocked()
}

// ReleaseAll makes every held version stable and stops holding new ones.
func (c *Cluster) ReleaseAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.holdStable = false
	clear(c.mu.held)
	c.changedLocked()
}

// Versions returns every version recorded, in the order recorded.
func (c *Cluster) Versions() []plan.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]plan.Version, 0, len(c.mu.versions))
	for _, v := range c.mu.versions {
		out = append(out, toPlan(c.decorateLocked(v)))
	}
	return out
}

// Inject records v as given (its Path unchecked, its chunks not needed at
// any site), giving it an id, HLC and origin when it has none: a version a
// broken or malicious site could send. It is held like any other when
// stability is held.
func (c *Cluster) Inject(t testing.TB, share string, v plan.Version) plan.Version {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.shares[share] == nil {
		t.Fatalf("inject: unknown share %s", share)
	}
	if v.Origin == "" {
		v.Origin = "injected"
	}
	pv := fromPlan(v)
	pv.Share = share
	c.recordLocked(pv)
	return toPlan(c.decorateLocked(pv))
}

// recordLocked gives v an HLC, id and content and appends it.
func (c *Cluster) recordLocked(v *filesharepb.Version) {
	c.mu.wall++
	if v.HlcWall == 0 {
		v.HlcWall = c.mu.wall
	}
	if v.Id == "" {
		v.Id = string(plan.NewVersionID(v.Origin, plan.HLC{Wall: v.HlcWall, Logical: v.HlcLogical}))
	}
	if len(v.Content) == 0 && !v.Deleted {
		pc := make([]plan.Chunk, len(v.Chunks))
		for i, r := range v.Chunks {
			copy(pc[i].Hash[:], r.Hash)
			pc[i].Size = r.Size
		}
		h := plan.ContentOf(pc)
		v.Content = h[:]
	}
	if c.mu.holdStable {
		c.mu.held[v.Id] = true
	}
	c.mu.versions = append(c.mu.versions, v)
	c.changedLocked()
}

// decorateLocked returns a copy of v with stable and persisted_at set.
func (c *Cluster) decorateLocked(v *filesharepb.Version) *filesharepb.Version {
	out := proto.Clone(v).(*filesharepb.Version)
	// An early commit's version is stable only once its origin holds
	// every chunk.
	out.Stable = !c.mu.held[v.Id] && c.holdsAllLocked(v.Origin, v)
	for _, n := range c.mu.order {
		s := c.mu.sites[n]
		all := true
		for _, r := range v.Chunks {
			if _, ok := s.chunks[[32]byte(r.Hash)]; !ok {
				all = false
				break
			}
		}
		if all {
			out.PersistedAt = append(out.PersistedAt, n)
		}
	}
	return out
}

func (c *Cluster) holdsAllLocked(site string, v *filesharepb.Version) bool {
	s := c.mu.sites[site]
	if s == nil {
		return true
	}
	for _, r := range v.Chunks {
		if _, ok := s.chunks[[32]byte(r.Hash)]; !ok {
			return false
		}
	}
	return true
}

func (c *Cluster) list(share, path string) ([]*filesharepb.Version, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.shares[share] == nil {
		return nil, unknownShare(share)
	}
	var out []*filesharepb.Version
	for _, v := range c.mu.versions {
		if v.Share == share && (path == "" || v.Path == path) {
			out = append(out, c.decorateLocked(v))
		}
	}
	return out, nil
}

// listChanges answers a List of a whole share with a cursor (track or
// since), as a real site does: what changed since the cursor, or every
// version when it is not one of this site's.
func (c *Cluster) listChanges(site, share string, since []byte) (*filesharepb.ListResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.shares[share] == nil {
		return nil, unknownShare(share)
	}
	var all []*filesharepb.Version
	for _, v := range c.mu.versions {
		if v.Share != share {
			continue
		}
		d := c.decorateLocked(v)
		all = append(all, d)
		if old, ok := c.mu.listed[d.Id]; !ok || old.stable != d.Stable || !slices.Equal(old.persistedAt, d.PersistedAt) {
			c.mu.listGen++
			c.mu.listed[d.Id] = listedState{gen: c.mu.listGen, stable: d.Stable, persistedAt: d.PersistedAt}
		}
	}
	cursor := fmt.Appendf(nil, "fake:%s:%d:%d", site, c.mu.epoch, c.mu.listGen)
	var gen uint64
	var epoch uint64
	var from string
	s := c.mu.sites[site]
	if n, err := fmt.Sscanf(strings.ReplaceAll(string(since), ":", " "), "fake %s %d %d", &from, &epoch, &gen); err != nil || n != 3 ||
		from != site || epoch != c.mu.epoch || gen > c.mu.listGen {
		s.fullLists++
		return &filesharepb.ListResponse{Versions: all, Site: site, Cursor: cursor}, nil
	}
	s.deltas++
	out := &filesharepb.ListResponse{Site: site, Cursor: cursor, Delta: true}
	for _, d := range all {
		if c.mu.listed[d.Id].gen > gen {
			out.Versions = append(out.Versions, d)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.mu.goneAt)) {
		if c.mu.goneAt[id] > gen {
			out.Gone = append(out.Gone, id)
		}
	}
	return out, nil
}

// Forget removes a version, as a delete of its record in the KV would.
func (c *Cluster) Forget(id plan.VersionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.versions = slices.DeleteFunc(c.mu.versions, func(v *filesharepb.Version) bool { return v.Id == string(id) })
	delete(c.mu.listed, string(id))
	c.mu.listGen++
	c.mu.goneAt[string(id)] = c.mu.listGen
	c.changedLocked()
}

// ResetCursors voids every cursor given so far, as a site's restart does:
// the next List of each client is answered in full.
func (c *Cluster) ResetCursors() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.epoch++
}

// NoCursors makes the sites answer as older ones do (on): every List in
// full, without a cursor.
func (c *Cluster) NoCursors(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.noCursors = on
}

func (c *Cluster) cursorsOff() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.noCursors
}

func (c *Cluster) missing(name string, hashes [][]byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mu.sites[name]
	var out [][]byte
	for _, h := range hashes {
		if len(h) != 32 {
			out = append(out, h)
			continue
		}
		if _, ok := s.chunks[[32]byte(h)]; !ok {
			out = append(out, h)
		}
	}
	return out
}

func (c *Cluster) putChunk(name string, hash, data []byte) (*filesharepb.PutChunkResponse, error) {
	if len(data) > MaxChunk {
		return nil, status.Errorf(codes.InvalidArgument, "chunk %x: %d bytes, more than %d", hash, len(data), MaxChunk)
	}
	if sum := sha256.Sum256(data); len(hash) != 32 || [32]byte(hash) != sum {
		return nil, status.Errorf(codes.InvalidArgument, "chunk %x: data does not match its hash (sha256 %x)", hash, sum)
	}
	h := [32]byte(hash)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mu.sites[name]
	if r, ok := s.refs[h]; ok {
		return &filesharepb.PutChunkResponse{Hash: hash, Ref: proto.Clone(r).(*filesharepb.ChunkRef), Duplicate: true}, nil
	}
	// Stored on the stripes in turn, as a site spreads its chunks over
	// its files streams: refs name the stream ("" for "files").
	i := s.put % stripes
	s.seq[i]++
	r := &filesharepb.ChunkRef{Hash: h[:], Size: uint32(len(data)), Origin: name, Seq: s.seq[i]}
	if i > 0 {
		r.Stream = fmt.Sprintf("files/%d", i)
	}
	d := slices.Clone(data)
	s.chunks[h], s.refs[h] = d, r
	s.put++
	for _, o := range c.mu.sites {
		if o == s {
			continue
		}
		if _, ok := o.chunks[h]; ok {
			continue
		}
		if o.holdChunk {
			o.pending[h] = r
			continue
		}
		o.chunks[h], o.refs[h] = d, r
	}
	c.changedLocked()
	return &filesharepb.PutChunkResponse{Hash: h[:], Ref: proto.Clone(r).(*filesharepb.ChunkRef)}, nil
}

// chunkData finds a held chunk's data; ok is false if the site lacks it.
func (c *Cluster) chunkData(name string, hash []byte) (data []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mu.sites[name]
	if len(hash) != 32 {
		return nil, false
	}
	d, ok := s.chunks[[32]byte(hash)]
	return d, ok
}

// commit records a Commit request's files at site name.
func (c *Cluster) commit(name string, r *filesharepb.CommitRequest) ([]*filesharepb.Version, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.shares[r.Share] == nil {
		return nil, unknownShare(r.Share)
	}
	if len(r.Files) == 0 {
		return nil, status.Error(codes.InvalidArgument, "commit: no files")
	}
	s := c.mu.sites[name]
	for _, f := range r.Files {
		if err := safepath.Check(f.Path); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "commit: path %q: %v", f.Path, err)
		}
		for _, ch := range f.Chunks {
			if len(ch.Hash) != 32 {
				return nil, status.Errorf(codes.InvalidArgument, "commit %s: chunk hash of %d bytes", f.Path, len(ch.Hash))
			}
			if _, ok := s.chunks[[32]byte(ch.Hash)]; !ok && !r.Early {
				return nil, status.Errorf(codes.FailedPrecondition, "commit %s: chunk %x is not held at %s", f.Path, ch.Hash, name)
			}
		}
	}
	var out []*filesharepb.Version
	commitID := ""
	for _, f := range r.Files {
		v := &filesharepb.Version{Share: r.Share, Path: f.Path, Parents: f.Parents, Kept: f.Kept, Deleted: f.Deleted,
			Size: f.Size, Mode: f.Mode, Mtime: f.Mtime, Origin: name}
		for _, ch := range f.Chunks {
			ref, ok := s.refs[[32]byte(ch.Hash)]
			if !ok { // an early commit: located once it arrives
				ref = &filesharepb.ChunkRef{Hash: ch.Hash, Size: ch.Size}
			}
			v.Chunks = append(v.Chunks, proto.Clone(ref).(*filesharepb.ChunkRef))
		}
		if r.Commit {
			if commitID == "" {
				commitID = string(plan.NewVersionID(name, plan.HLC{Wall: c.mu.wall + 1}))
			}
			v.Commit, v.CommitFiles = commitID, uint32(len(r.Files))
		}
		c.recordLocked(v)
		out = append(out, v)
	}
	return out, nil
}

// stable decorates versions again, saying whether all are stable.
func (c *Cluster) stable(vs []*filesharepb.Version) ([]*filesharepb.Version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := true
	out := make([]*filesharepb.Version, len(vs))
	for i, v := range vs {
		out[i] = c.decorateLocked(v)
		all = all && out[i].Stable
	}
	return out, all
}

func toPlan(v *filesharepb.Version) plan.Version {
	out := plan.Version{ID: plan.VersionID(v.Id), Path: v.Path, Deleted: v.Deleted, Size: v.Size, Mode: v.Mode, MTime: v.Mtime,
		HLC: plan.HLC{Wall: v.HlcWall, Logical: v.HlcLogical}, Origin: v.Origin, Commit: v.Commit, CommitFiles: int(v.CommitFiles), Stable: v.Stable}
	copy(out.Content[:], v.Content)
	for _, p := range v.Parents {
		out.Parents = append(out.Parents, plan.VersionID(p))
	}
	for _, p := range v.Kept {
		out.Kept = append(out.Kept, plan.VersionID(p))
	}
	for _, r := range v.Chunks {
		var ch plan.Chunk
		copy(ch.Hash[:], r.Hash)
		ch.Size = r.Size
		out.Chunks = append(out.Chunks, ch)
	}
	return out
}

func fromPlan(v plan.Version) *filesharepb.Version {
	out := &filesharepb.Version{Id: string(v.ID), Path: v.Path, Deleted: v.Deleted, Size: v.Size, Mode: v.Mode, Mtime: v.MTime,
		HlcWall: v.HLC.Wall, HlcLogical: v.HLC.Logical, Origin: v.Origin, Commit: v.Commit, CommitFiles: uint32(v.CommitFiles)}
	if v.Content != (plan.Hash{}) {
		out.Content = slices.Clone(v.Content[:])
	}
	for _, p := range v.Parents {
		out.Parents = append(out.Parents, string(p))
	}
	for _, p := range v.Kept {
		out.Kept = append(out.Kept, string(p))
	}
	for _, ch := range v.Chunks {
		out.Chunks = append(out.Chunks, &filesharepb.ChunkRef{Hash: slices.Clone(ch.Hash[:]), Size: ch.Size})
	}
	return out
}

func sortByHLC(vs []*filesharepb.Version) {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].HlcWall != vs[j].HlcWall {
			return vs[i].HlcWall < vs[j].HlcWall
		}
		return vs[i].HlcLogical < vs[j].HlcLogical
	})
}
