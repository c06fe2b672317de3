package segment

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

// Record is one stream message as stored: its seq, the wall part of its HLC
// and its payload. Head, when set, is stored in front of Payload as one
// payload: a writer's small prefix, so that it need not copy a large
// payload to prepend a few bytes. What Read returns has it in Payload, Head
// empty. (The shape of storage.Message.)
type Record struct {
	Seq     uint64
	HLC     uint64
	Head    []byte
	Payload []byte
}

// StreamInfo describes one stream the store holds.
type StreamInfo struct {
	Origin, Stream string
	// First is the lowest seq the stream holds (its floor + 1), 0 if it
	// holds none; it is readable once durable.
	First uint64
	// Head is the highest seq appended; Durable the highest a Sync (or
	// Open) made durable. Records First..Durable are readable.
	Head, Durable uint64
	// Bytes is the size of the stream's segment files up to their last
	// record, file headers included.
	Bytes int64
}

// Durable reports that a stream's records up to Seq are durable.
type Durable struct {
	Origin, Stream string
	Seq            uint64
}

type streamID struct{ origin, stream string }

func (id streamID) String() string { return strconv.Quote(id.origin) + "/" + strconv.Quote(id.stream) }

// fileRef is an open file shared by the segment that owns it and by calls
// that use it outside Store.mu. Whoever drops the last reference closes it.
type fileRef struct {
	f    vfs.File
	refs int // guarded by Store.mu
}

// segment is one segment file. first, path and hdrLen never change; the
// rest is guarded by Store.mu.
type segment struct {
	first  uint64
	path   string
	hdrLen int64

	// offs holds the offset of each record: record i has seq first+i. It
	// only grows; a reader copies what it needs under the mutex.
	offs []int64
	// size is the end of the last record: where the next one goes. The
	// file may be longer by a zeroed tail (see doc.go).
	size int64
	// sealed is set once a later segment exists; a sealed segment is never
	// written again.
	sealed bool
	// syncedSize is how much of the file a completed fdatasync covers.
	syncedSize int64
	// w is the write handle, held while the segment may still be written
	// or is not yet synced; r the read handle, in Store.mu.lru while open.
	w, r  *fileRef
	relem *list.Element
	// deleted is set once the file is removed (by Truncate or Reset).
	deleted bool
}

// last is the seq of the segment's last record; only for segments that
// hold one.
func (g *segment) last() uint64 { return g.first + uint64(len(g.offs)) - 1 }

// end returns the offset just past record k.
func (g *segment) end(k int) int64 {
	if k+1 < len(g.offs) {
		return g.offs[k+1]
	}
	return g.size
}

// stream is one stream's state.
type stream struct {
	id  streamID
	dir string

	// wmu serializes the stream's writer calls (Append, Reset, Truncate),
	// which hold it across their file writes and removals. Sync and Read
	// never take it. Taken before Store.mu.
	wmu sync.Mutex
	// buf is Append's buffer for headers and small payloads; wmu guards it.
	buf []byte

	// Guarded by Store.mu. segs is also only written with wmu held, so a
	// writer holding wmu may read it without Store.mu.
	//
	// pinned is set once the stream's numbering is fixed (by an Append, a
	// Reset or Open): the next Append must then continue head.
	pinned bool
	// dirMade is set once the directory exists; dirDirty while its entries
	// changed since the last Sync took its snapshot.
	dirMade, dirDirty    bool
	head, floor, durable uint64
	segs                 []*segment // oldest first; every one but the last is sealed
}

// Store is an append-only segment store: one directory per stream, records
// checksummed, durable in groups by Sync. Its methods are safe for
// concurrent use; see the package documentation for what may overlap.
type Store struct {
	cfg     Config
	fs      vfs.FS
	log     hclog.Logger
	metrics *metrics
	lock    io.Closer

	// ops counts method calls in progress, so that Close can wait for them
	// before closing files.
	ops sync.WaitGroup
	// syncMu serializes Sync calls, which hold it across their fsyncs, so
	// that durable heads are reported in order. Taken before mu.
	syncMu sync.Mutex

	mu struct {
		sync.Mutex
		closed bool
		// failed is set once a write could not be undone or an fsync
		// failed; it wraps ErrFailed.
		failed  error
		streams map[streamID]*stream
		// dirty holds the segments written since the last Sync took its
		// snapshot; rootDirty is set while Dir's entries changed since.
		dirty     map[*segment]struct{}
		rootDirty bool
		// lru holds the segments with an open read handle, most recently
		// used first.
		lru *list.List
	}
}

// Open opens (creating if needed) the store in cfg.Dir and recovers every
// stream in it: see the package documentation for what it checks, cuts and
// syncs.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fs: cfg.FS, log: cfg.Logger, metrics: m}
	s.mu.streams = make(map[streamID]*stream)
	s.mu.dirty = make(map[*segment]struct{})
	s.mu.lru = list.New()
	if err := s.open(); err != nil {
		m.unregister()
		return nil, err
	}
	s.log.Info("opened", "dir", cfg.Dir, "streams", len(s.mu.streams))
	return s, nil
}

func (s *Store) open() error {
	dir := s.cfg.Dir
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("segment: open %s: %w", dir, err)
	}
	lock, err := s.fs.Lock(s.fs.PathJoin(dir, lockName))
	if err != nil {
		return fmt.Errorf("segment: open %s: lock: %w", dir, err)
	}
	if err := s.recoverAll(); err != nil {
		return errors.Join(err, s.closeFiles(), lock.Close())
	}
	s.lock = lock
	return nil
}

// enter registers a method call; false after Close.
func (s *Store) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.ops.Add(1)
	return true
}

// fail marks the store failed with cause unless it already is, and returns
// the failure (which wraps ErrFailed).
func (s *Store) fail(cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failLocked(cause)
}

func (s *Store) failLocked(cause error) error {
	if s.mu.failed == nil {
		s.mu.failed = fmt.Errorf("%w: %w", ErrFailed, cause)
		s.log.Error("store failed: appends and syncs refused until reopened", "error", cause)
	}
	return s.mu.failed
}

// Close waits for the calls in progress, then closes every file. It does not
// sync: what no Sync covered may be lost. It is idempotent; calls after the
// first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.ops.Wait()
	err := s.closeFiles()
	if s.lock != nil {
		err = errors.Join(err, s.lock.Close())
	}
	s.metrics.unregister()
	s.log.Info("closed")
	if err != nil {
		return fmt.Errorf("segment: close: %w", err)
	}
	return nil
}

// closeFiles closes every handle; no call may be in progress.
func (s *Store) closeFiles() error {
	s.mu.Lock()
	var files []vfs.File
	for _, st := range s.mu.streams {
		for _, g := range st.segs {
			files = append(files, s.detachLocked(g)...)
		}
	}
	s.mu.Unlock()
	return closeAll(files)
}

// Streams returns every stream the store holds, sorted by origin then
// stream; nil after Close.
func (s *Store) Streams() []StreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	out := make([]StreamInfo, 0, len(s.mu.streams))
	for _, st := range s.mu.streams {
		if !st.pinned {
			continue
		}
		si := StreamInfo{Origin: st.id.origin, Stream: st.id.stream, Head: st.head, Durable: st.durable}
		if st.head > st.floor {
			si.First = st.floor + 1
		}
		for _, g := range st.segs {
			si.Bytes += g.size
		}
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b StreamInfo) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Stream, b.Stream))
	})
	return out
}

// streamFor returns the stream (origin, stream), adding an empty one if the
// store has none.
func (s *Store) streamFor(id streamID) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.streams[id]
	if st == nil {
		st = &stream{id: id, dir: s.fs.PathJoin(s.cfg.Dir, streamDirName(id.origin, id.stream))}
		s.mu.streams[id] = st
	}
	return st
}

// releaseLocked drops a reference to ref and returns its file if it must be
// closed (after the mutex is released).
func releaseLocked(ref *fileRef) []vfs.File {
	ref.refs--
	if ref.refs == 0 {
		return []vfs.File{ref.f}
	}
	return nil
}

// retireLocked drops the write handle of a sealed segment that is synced
// through its end: it will never be written or synced again.
func retireLocked(g *segment) []vfs.File {
	if g.w == nil || !g.sealed || g.syncedSize < g.size {
		return nil
	}
	ref := g.w
	g.w = nil
	return releaseLocked(ref)
}

// detachLocked drops the segment's own references to its handles, for a
// deleted segment or at Close; users still holding one close it when done.
func (s *Store) detachLocked(g *segment) []vfs.File {
	var files []vfs.File
	if g.w != nil {
		files = append(files, releaseLocked(g.w)...)
		g.w = nil
	}
	if g.r != nil {
		s.mu.lru.Remove(g.relem)
		files = append(files, releaseLocked(g.r)...)
		g.r, g.relem = nil, nil
	}
	return files
}

// closeAll closes files, outside the mutex, and returns their errors.
func closeAll(files []vfs.File) error {
	var errs []error
	for _, f := range files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncDir fsyncs a directory, making its entries (files created, removed)
// durable.
func (s *Store) syncDir(dir string) error {
	d, err := s.fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// checkNames reports whether origin and stream are valid names.
func checkNames(origin, stream string) error {
	if len(origin) == 0 || len(origin) > MaxNameLen || len(stream) == 0 || len(stream) > MaxNameLen {
		return fmt.Errorf("names of %d and %d bytes, want 1..%d: %w", len(origin), len(stream), MaxNameLen, ErrInvalid)
	}
	return nil
}
