package segment

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// inlinePayload is the largest payload Append copies into its header
// buffer; a larger one is written from the caller's slice by a write of its
// own, which costs less than copying it.
const inlinePayload = 32 << 10

// appendRun is the part of an Append that goes into one segment.
type appendRun struct {
	seg *segment
	// fresh is set when this Append creates seg; it is then invisible to
	// everyone else until the Append commits.
	fresh bool
	off   int64    // where the run's bytes start
	recs  []Record // what it writes
	offs  []int64  // where each of recs starts
	end   int64    // where the run's bytes end

	// Set while writing, for undo and commit.
	created bool  // the file was created
	written int64 // bytes from off that reached the file
	synced  bool  // fdatasynced through end, for the two-segment window
}

// Append writes recs at the end of stream (origin, stream). recs must be
// consecutive and continue the stream's head; a stream that holds nothing
// and was never Reset takes any first seq >= 1. Nothing is durable until a
// Sync covers it.
//
// A failed Append leaves the stream as it was: a segment it created is
// removed, bytes it wrote into the active segment are zeroed and that is
// synced, so that a crash cannot bring them back. If that undo fails too,
// the store fails (ErrFailed). A full disk (ENOSPC) is such a failed write:
// the Append fails, and a later one succeeds once there is space.
func (s *Store) Append(origin, stream string, recs []Record) error {
	id := streamID{origin, stream}
	if err := checkRecords(origin, stream, recs); err != nil {
		return fmt.Errorf("segment: append %s: %w", id, err)
	}
	if !s.enter() {
		return fmt.Errorf("segment: append %s: %w", id, ErrClosed)
	}
	defer s.ops.Done()
	st := s.streamFor(id)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	runs, err := s.planAppend(st, recs)
	if err != nil {
		return fmt.Errorf("segment: append %s: %w", id, err)
	}
	if err := s.writeRuns(st, runs); err != nil {
		return fmt.Errorf("segment: append %s seq %d: %w", id, recs[0].Seq, s.undoAppend(runs, err))
	}
	s.commitAppend(st, runs)
	return nil
}

// checkRecords checks what Append can check without the store.
func checkRecords(origin, stream string, recs []Record) error {
	if err := checkNames(origin, stream); err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("no records: %w", ErrInvalid)
	}
	for i, r := range recs {
		if r.Seq == 0 {
			return fmt.Errorf("seq 0: %w", ErrInvalid)
		}
		if i > 0 && r.Seq != recs[i-1].Seq+1 {
			return fmt.Errorf("seq %d follows %d: %w", r.Seq, recs[i-1].Seq, ErrSeqGap)
		}
		if n := len(r.Head) + len(r.Payload); n > MaxRecordBytes {
			return fmt.Errorf("seq %d: payload of %d bytes, at most %d: %w", r.Seq, n, MaxRecordBytes, ErrInvalid)
		}
	}
	return nil
}

// planAppend checks recs against the stream's head and splits them into
// runs, one per segment they go to.
func (s *Store) planAppend(st *stream, recs []Record) ([]*appendRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failed != nil {
		return nil, s.mu.failed
	}
	if st.pinned && recs[0].Seq != st.head+1 {
		return nil, fmt.Errorf("seq %d, head %d: %w", recs[0].Seq, st.head, ErrSeqGap)
	}
	var runs []*appendRun
	var cur *appendRun
	var count int // records in cur's segment
	if n := len(st.segs); n > 0 {
		g := st.segs[n-1]
		cur = &appendRun{seg: g, off: g.size, end: g.size}
		count = len(g.offs)
	}
	for _, r := range recs {
		n := int64(recHeaderLen + len(r.Head) + len(r.Payload))
		if cur == nil || cur.end >= s.cfg.SegmentBytes || count > 0 && n > s.cfg.SegmentBytes {
			g := &segment{first: r.Seq, path: s.fs.PathJoin(st.dir, segName(r.Seq)),
				hdrLen: int64(fileHeaderLen(st.id.origin, st.id.stream))}
			cur = &appendRun{seg: g, fresh: true, end: g.hdrLen}
			count = 0
		}
		if len(runs) == 0 || runs[len(runs)-1] != cur {
			runs = append(runs, cur)
		}
		cur.recs = append(cur.recs, r)
		cur.offs = append(cur.offs, cur.end)
		cur.end += n
		count++
	}
	return runs, nil
}

// writeRuns writes every run, creating the directory and segment files it
// needs.
func (s *Store) writeRuns(st *stream, runs []*appendRun) error {
	if err := s.makeDir(st); err != nil {
		return err
	}
	nsegs := len(st.segs) // read under wmu: only writers change it
	for _, r := range runs {
		if r.fresh {
			if err := s.boundWindow(st, runs, nsegs); err != nil {
				return err
			}
			f, err := s.fs.Create(r.seg.path, vfs.WriteCategoryUnspecified)
			if err != nil {
				return fmt.Errorf("create %s: %w", r.seg.path, err)
			}
			r.seg.w = &fileRef{f: f, refs: 1}
			r.created = true
			nsegs++
		} else if err := s.openForAppend(r.seg); err != nil {
			return err
		}
		if err := s.writeRun(st, r); err != nil {
			return err
		}
	}
	return nil
}

// makeDir creates the stream's directory on its first Append.
func (s *Store) makeDir(st *stream) error {
	s.mu.Lock()
	made := st.dirMade
	s.mu.Unlock()
	if made {
		return nil
	}
	if err := s.fs.MkdirAll(st.dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", st.dir, err)
	}
	s.mu.Lock()
	st.dirMade = true
	s.mu.rootDirty = true
	s.mu.Unlock()
	return nil
}

// openForAppend opens the write handle of the active segment if it has none
// (a segment Open recovered).
func (s *Store) openForAppend(g *segment) error {
	s.mu.Lock()
	open := g.w != nil
	s.mu.Unlock()
	if open {
		return nil
	}
	f, err := s.fs.OpenReadWrite(g.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("open %s: %w", g.path, err)
	}
	s.mu.Lock()
	g.w = &fileRef{f: f, refs: 1}
	s.mu.Unlock()
	return nil
}

// boundWindow keeps at most the last two segments of a stream unsynced:
// before a run creates segment number nsegs (counting the stream's
// segments, then this Append's), it fdatasyncs the one two places before
// it if no Sync has covered it yet. Open relies on this to read only the
// last two segments whole. With Sync called every few MiB it never syncs
// here.
func (s *Store) boundWindow(st *stream, runs []*appendRun, nsegs int) error {
	t := nsegs - 2 // index of the segment to check, in segs then this Append's
	if t < 0 {
		return nil
	}
	if t < len(st.segs) && (runs[0].fresh || t < len(st.segs)-1) {
		return s.syncSealed(st.segs[t])
	}
	// The segment was written by this Append: runs[0] if it was the active
	// one, else a fresh run.
	k := t - len(st.segs) + 1
	if runs[0].fresh {
		k--
	}
	r := runs[k]
	if err := r.seg.w.f.SyncData(); err != nil {
		return s.fail(fmt.Errorf("sync %s: %w", r.seg.path, err))
	}
	r.synced = true
	return nil
}

// syncSealed fdatasyncs a sealed segment unless a Sync already covered all
// of it.
func (s *Store) syncSealed(g *segment) error {
	s.mu.Lock()
	if g.syncedSize >= g.size || g.w == nil {
		s.mu.Unlock()
		return nil
	}
	ref := g.w
	ref.refs++
	s.mu.Unlock()
	err := ref.f.SyncData()
	s.mu.Lock()
	if err == nil {
		g.syncedSize = g.size
	}
	files := releaseLocked(ref)
	files = append(files, retireLocked(g)...)
	s.mu.Unlock()
	if err != nil {
		return s.fail(fmt.Errorf("sync %s: %w", g.path, errors.Join(err, closeAll(files))))
	}
	return closeAll(files)
}

// writeRun writes a run's bytes: the file header if the segment is new,
// then each record's header and small payload gathered in one buffer, and
// each large payload from the caller's slice.
func (s *Store) writeRun(st *stream, r *appendRun) error {
	f := r.seg.w.f
	pos := r.off
	write := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		n, err := f.WriteAt(b, pos)
		if err != nil {
			err = fmt.Errorf("write %s at %d: %w", r.seg.path, pos, err)
		}
		pos += int64(n)
		r.written += int64(n)
		return err
	}
	buf := st.buf[:0]
	if r.fresh {
		buf = appendFileHeader(buf, st.id.origin, st.id.stream)
	}
	var hdr [recHeaderLen]byte
	for _, rec := range r.recs {
		putRecHeader(hdr[:], rec.Seq, rec.HLC, rec.Head, rec.Payload)
		buf = append(append(buf, hdr[:]...), rec.Head...)
		if len(rec.Payload) <= inlinePayload {
			buf = append(buf, rec.Payload...)
			continue
		}
		if err := write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		if err := write(rec.Payload); err != nil {
			return err
		}
	}
	err := write(buf)
	if cap(buf) <= 4*inlinePayload {
		st.buf = buf[:0]
	}
	return err
}

// undoAppend takes back what a failed Append wrote and returns the error to
// report: cause, or the store's failure if the undo failed.
func (s *Store) undoAppend(runs []*appendRun, cause error) error {
	var errs []error
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		switch {
		case r.fresh && r.created:
			err := r.seg.w.f.Close()
			r.seg.w = nil
			if rerr := s.fs.Remove(r.seg.path); rerr != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", r.seg.path, errors.Join(rerr, err)))
			}
		case !r.fresh && r.written > 0:
			// Zeroed bytes read as the end of the segment. Synced, or a
			// crash could bring back the records just reported not written.
			f := r.seg.w.f
			err := zeroAt(f, r.off, r.off+r.written)
			if err == nil {
				err = f.SyncData()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("zero %s from %d: %w", r.seg.path, r.off, err))
			}
		}
	}
	if len(errs) > 0 {
		return s.fail(fmt.Errorf("undo failed append (%w): %w", cause, errors.Join(errs...)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failed != nil {
		return s.mu.failed
	}
	return cause
}

// commitAppend makes a written Append visible: the index, the head, the
// segments to sync.
func (s *Store) commitAppend(st *stream, runs []*appendRun) {
	s.mu.Lock()
	var files []vfs.File
	var bytes int64
	var n int
	for _, r := range runs {
		g := r.seg
		if r.fresh {
			st.segs = append(st.segs, g)
			st.dirDirty = true
		}
		g.offs = append(g.offs, r.offs...)
		g.size = r.end
		if r.synced {
			g.syncedSize = r.end
		}
		s.mu.dirty[g] = struct{}{}
		bytes += r.end - r.off
		n += len(r.recs)
	}
	for i := len(st.segs) - 2; i >= 0 && !st.segs[i].sealed; i-- {
		st.segs[i].sealed = true
		files = append(files, retireLocked(st.segs[i])...)
	}
	first := runs[0].recs[0].Seq
	if !st.pinned {
		st.pinned, st.floor = true, first-1
	}
	last := runs[len(runs)-1]
	st.head = last.recs[len(last.recs)-1].Seq
	checkStreamLocked(st)
	s.mu.Unlock()
	s.metrics.appendedBytes.Add(float64(bytes))
	s.metrics.appendedRecords.Add(float64(n))
	if err := closeAll(files); err != nil {
		s.log.Warn("closing a sealed segment failed", "origin", st.id.origin, "stream", st.id.stream, "error", err)
	}
}
