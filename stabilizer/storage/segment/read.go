package segment

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readRun is a stretch of consecutive records in one segment that Read
// fetches with one ReadAt.
type readRun struct {
	seg   *segment
	first uint64
	// offs holds where each record starts, then where the last one ends.
	offs []int64
}

// Read returns the durable records of stream (origin, stream) from seq from
// on, in order: at most maxCount of them (<= 0: no limit) and, past the
// first, at most maxBytes of payload (<= 0: no limit). Nothing above the
// durable head is returned, so an origin never sends what a crash could
// take back. from above the durable head returns nothing; from at or below
// the floor is ErrTruncated.
//
// Every record's checksum is checked: a mismatch is ErrCorrupt, naming the
// record and where it is, and none of the Read's records are returned.
// Returned payloads are the caller's; the records of one Read may share one
// allocation. Reads run concurrently with each other and with writers.
func (s *Store) Read(origin, stream string, from uint64, maxCount int, maxBytes int64) ([]Record, error) {
	id := streamID{origin, stream}
	if err := checkNames(origin, stream); err != nil {
		return nil, fmt.Errorf("segment: read %s: %w", id, err)
	}
	if from == 0 {
		return nil, fmt.Errorf("segment: read %s from seq 0: %w", id, ErrInvalid)
	}
	if !s.enter() {
		return nil, fmt.Errorf("segment: read %s: %w", id, ErrClosed)
	}
	defer s.ops.Done()
	st, runs, n, err := s.planRead(id, from, maxCount, maxBytes)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]Record, 0, n)
	for _, r := range runs {
		if out, err = s.readRun(st, r, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// planRead picks the records to read, under the mutex; it returns how many.
func (s *Store) planRead(id streamID, from uint64, maxCount int, maxBytes int64) (*stream, []readRun, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.streams[id]
	if st == nil || from > st.durable {
		return nil, nil, 0, nil
	}
	if from <= st.floor {
		return nil, nil, 0, fmt.Errorf("segment: read %s from seq %d: floor %d: %w", id, from, st.floor, ErrTruncated)
	}
	// The floor is at least the first segment's first seq - 1, so some
	// segment starts at or below from.
	i := sort.Search(len(st.segs), func(i int) bool { return st.segs[i].first > from }) - 1
	if i < 0 {
		return nil, nil, 0, fmt.Errorf("segment: read %s from seq %d: no segment holds it (floor %d): %w", id, from, st.floor, ErrTruncated)
	}
	var runs []readRun
	n, bytes, seq := 0, int64(0), from
	for ; i < len(st.segs) && seq <= st.durable; i++ {
		g := st.segs[i]
		r := readRun{seg: g, first: seq}
		for k := int(seq - g.first); k < len(g.offs) && seq <= st.durable; k++ {
			size := g.end(k) - g.offs[k] - recHeaderLen
			if maxCount > 0 && n >= maxCount || maxBytes > 0 && n > 0 && bytes+size > maxBytes {
				return st, addRun(runs, r), n, nil
			}
			if len(r.offs) == 0 {
				r.offs = append(r.offs, g.offs[k])
			}
			r.offs = append(r.offs, g.end(k))
			n, bytes, seq = n+1, bytes+size, seq+1
		}
		runs = addRun(runs, r)
	}
	return st, runs, n, nil
}

func addRun(runs []readRun, r readRun) []readRun {
	if len(r.offs) == 0 {
		return runs
	}
	return append(runs, r)
}

// readRun reads one run with one ReadAt, checks each record and appends it
// to out.
func (s *Store) readRun(st *stream, r readRun, out []Record) ([]Record, error) {
	ref, err := s.readHandle(r.seg)
	if err != nil {
		return nil, s.readGone(st, r, err)
	}
	start, end := r.offs[0], r.offs[len(r.offs)-1]
	buf := make([]byte, end-start)
	err = readFull(ref.f, buf, start)
	s.release(ref)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, s.corrupt(st, r.seg, r.first, start, errors.New("segment file shorter than its index"))
	}
	if err != nil {
		return nil, fmt.Errorf("segment: read %s seq %d: %s at %d: %w", st.id, r.first, r.seg.path, start, err)
	}
	for k := 0; k+1 < len(r.offs); k++ {
		seq := r.first + uint64(k)
		b := buf[r.offs[k]-start : r.offs[k+1]-start]
		h, p, err := decodeRecord(b, seq)
		if err != nil {
			return nil, s.corrupt(st, r.seg, seq, r.offs[k], err)
		}
		out = append(out, Record{Seq: seq, HLC: h.hlc, Payload: p[:len(p):len(p)]})
	}
	return out, nil
}

// corrupt counts a corrupt record and returns the error that names it.
func (s *Store) corrupt(st *stream, g *segment, seq uint64, off int64, why error) error {
	s.metrics.corruptRecords.Inc()
	s.log.Error("corrupt record", "origin", st.id.origin, "stream", st.id.stream, "seq", seq, "segment", g.path, "offset", off, "error", why)
	return fmt.Errorf("segment: read %s seq %d: segment %s offset %d: %v: %w", st.id, seq, g.path, off, why, ErrCorrupt)
}

// readGone explains a failure to open a segment for reading: if a Truncate
// removed it meanwhile, the records are truncated.
func (s *Store) readGone(st *stream, r readRun, err error) error {
	s.mu.Lock()
	floor := st.floor
	s.mu.Unlock()
	if r.first <= floor {
		return fmt.Errorf("segment: read %s from seq %d: floor %d: %w", st.id, r.first, floor, ErrTruncated)
	}
	return fmt.Errorf("segment: read %s seq %d: %w", st.id, r.first, err)
}

// errDeleted reports a segment deleted before it could be opened.
var errDeleted = errors.New("segment deleted")

// readHandle returns a reference to g's read handle, opening it if needed.
// The file is opened without the mutex; the handle joins the LRU, and the
// least recently used handles beyond MaxOpenFiles are closed once unused.
func (s *Store) readHandle(g *segment) (*fileRef, error) {
	s.mu.Lock()
	if ref := s.useLocked(g); ref != nil || g.deleted {
		s.mu.Unlock()
		if ref == nil {
			return nil, errDeleted
		}
		return ref, nil
	}
	s.mu.Unlock()
	f, err := s.fs.Open(g.path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ref := s.useLocked(g) // another reader may have opened it meanwhile
	var files []vfs.File
	switch {
	case ref != nil:
		files = append(files, f)
	case g.deleted:
		files = append(files, f)
	default:
		ref = &fileRef{f: f, refs: 2} // the segment's and ours
		g.r, g.relem = ref, s.mu.lru.PushFront(g)
		files = s.evictLocked()
	}
	s.mu.Unlock()
	if err := closeAll(files); err != nil {
		s.log.Warn("closing a read handle failed", "error", err)
	}
	if ref == nil {
		return nil, errDeleted
	}
	return ref, nil
}

// useLocked returns a new reference to g's open read handle, if any.
func (s *Store) useLocked(g *segment) *fileRef {
	if g.r == nil {
		return nil
	}
	g.r.refs++
	s.mu.lru.MoveToFront(g.relem)
	return g.r
}

// evictLocked drops the least recently used read handles beyond
// MaxOpenFiles and returns those nobody is using, to close.
func (s *Store) evictLocked() []vfs.File {
	var files []vfs.File
	for s.mu.lru.Len() > s.cfg.MaxOpenFiles {
		g := s.mu.lru.Remove(s.mu.lru.Back()).(*segment)
		files = append(files, releaseLocked(g.r)...)
		g.r, g.relem = nil, nil
	}
	return files
}

// release drops a reference to a read handle.
func (s *Store) release(ref *fileRef) {
	s.mu.Lock()
	files := releaseLocked(ref)
	s.mu.Unlock()
	if err := closeAll(files); err != nil {
		s.log.Warn("closing a read handle failed", "error", err)
	}
}
