package segment

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Truncate drops the records of stream (origin, stream) up to upto: the
// floor becomes max(floor, upto) at once, so reads at or below it fail with
// ErrTruncated, and every segment file whose records are all <= upto is
// deleted. A segment holding the truncation point stays until a later
// truncation passes its end. Truncating up to the head deletes every
// segment; the next Append still continues the numbering. upto above the
// head is ErrInvalid.
//
// The deletions are made durable (the directory is fsynced) before Truncate
// returns, so that a crash cannot bring back some deleted segments and not
// others, which Open would take for a gap. The floor itself is not stored:
// after a restart the stream starts at its first segment, and the caller
// truncates again from its own metadata.
func (s *Store) Truncate(origin, stream string, upto uint64) error {
	id := streamID{origin, stream}
	if err := checkNames(origin, stream); err != nil {
		return fmt.Errorf("segment: truncate %s: %w", id, err)
	}
	if !s.enter() {
		return fmt.Errorf("segment: truncate %s: %w", id, ErrClosed)
	}
	defer s.ops.Done()
	s.mu.Lock()
	st := s.mu.streams[id]
	s.mu.Unlock()
	if st == nil {
		if upto == 0 {
			return nil
		}
		return fmt.Errorf("segment: truncate %s to %d: head 0: %w", id, upto, ErrInvalid)
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	victims, err := s.planTruncate(st, upto)
	if err != nil {
		return fmt.Errorf("segment: truncate %s to %d: %w", id, upto, err)
	}
	if err := s.dropSegments(st, victims); err != nil {
		return fmt.Errorf("segment: truncate %s to %d: %w", id, upto, err)
	}
	return nil
}

// planTruncate raises the floor and returns the leading segments whose
// records are all <= upto.
func (s *Store) planTruncate(st *stream, upto uint64) ([]*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failed != nil {
		return nil, s.mu.failed
	}
	if upto > st.head {
		return nil, fmt.Errorf("head %d: %w", st.head, ErrInvalid)
	}
	if upto <= st.floor {
		return nil, nil
	}
	st.floor = upto
	n := 0
	for n < len(st.segs) && st.segs[n].last() <= upto {
		n++
	}
	return st.segs[:n:n], nil
}

// Reset sets the head and floor of stream (origin, stream) to head, for a
// stream that holds no record above head: every segment is deleted and the
// next Append must be head+1. A node calls it at start when its own
// metadata says the stream was truncated up to, or skipped to, head. Reset
// below the current head is ErrInvalid. Like Truncate's floor, the head it
// sets is not stored: Open does not know it.
func (s *Store) Reset(origin, stream string, head uint64) error {
	id := streamID{origin, stream}
	if err := checkNames(origin, stream); err != nil {
		return fmt.Errorf("segment: reset %s: %w", id, err)
	}
	if !s.enter() {
		return fmt.Errorf("segment: reset %s: %w", id, ErrClosed)
	}
	defer s.ops.Done()
	st := s.streamFor(id)
	st.wmu.Lock()
	defer st.wmu.Unlock()
	victims, err := s.planReset(st, head)
	if err != nil {
		return fmt.Errorf("segment: reset %s to %d: %w", id, head, err)
	}
	if err := s.dropSegments(st, victims); err != nil {
		// A segment left behind would precede the next Append's with a
		// gap, which Open cuts: the store must not go on.
		return fmt.Errorf("segment: reset %s to %d: %w", id, head, s.fail(err))
	}
	s.mu.Lock()
	st.head, st.floor, st.durable = head, head, head
	checkStreamLocked(st)
	s.mu.Unlock()
	return nil
}

// planReset checks a Reset, makes every record unreadable at once (the
// floor goes to the current head) and returns the segments to delete.
func (s *Store) planReset(st *stream, head uint64) ([]*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failed != nil {
		return nil, s.mu.failed
	}
	if head < st.head {
		return nil, fmt.Errorf("head is %d: %w", st.head, ErrInvalid)
	}
	st.pinned = true
	st.floor = st.head
	return st.segs[:len(st.segs):len(st.segs)], nil
}

// dropSegments removes victims, the leading segments of the stream, oldest
// first, so that a failure leaves a contiguous stream on disk, then syncs
// the directory. The caller holds st.wmu and has already raised the floor
// past them. A failed removal is returned; a failed sync fails the store.
func (s *Store) dropSegments(st *stream, victims []*segment) error {
	if len(victims) == 0 {
		return nil
	}
	removed := 0
	var rerr error
	for _, g := range victims {
		if rerr = s.fs.Remove(g.path); rerr != nil {
			rerr = fmt.Errorf("remove %s: %w", g.path, rerr)
			break
		}
		removed++
	}
	s.mu.Lock()
	var files []vfs.File
	for _, g := range victims[:removed] {
		g.deleted = true
		delete(s.mu.dirty, g)
		files = append(files, s.detachLocked(g)...)
	}
	st.segs = append([]*segment(nil), st.segs[removed:]...)
	checkStreamLocked(st)
	s.mu.Unlock()
	s.metrics.deletedSegments.Add(float64(removed))
	if err := closeAll(files); err != nil {
		s.log.Warn("closing a deleted segment failed", "origin", st.id.origin, "stream", st.id.stream, "error", err)
	}
	if removed > 0 {
		if err := s.syncDir(st.dir); err != nil {
			return s.fail(err)
		}
	}
	return rerr
}
