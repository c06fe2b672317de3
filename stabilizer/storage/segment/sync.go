package segment

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncPlan is what one Sync makes durable, taken under the mutex.
type syncPlan struct {
	files []syncFile
	dirs  []string
	heads []syncHead
}

// syncFile is a segment to fdatasync and how much of it was written when
// Sync started.
type syncFile struct {
	seg  *segment
	ref  *fileRef
	size int64
}

// syncHead is a stream's head when Sync started: durable once Sync is done.
type syncHead struct {
	st   *stream
	head uint64
}

// Sync makes every record appended before it was called durable and
// returns, for each stream whose durable head advanced, the new durable
// seq, sorted by origin then stream. It fdatasyncs each segment written
// since the last Sync and fsyncs each directory in which a segment or a
// stream directory was created.
//
// Appends may run while Sync waits for the disk: it holds no lock they need
// across its fsyncs. Calls to Sync are serialized. If an fsync fails,
// nothing can be said about what reached the disk: the store fails and the
// error wraps ErrFailed; every later Append and Sync fails too.
func (s *Store) Sync() ([]Durable, error) {
	if !s.enter() {
		return nil, fmt.Errorf("segment: sync: %w", ErrClosed)
	}
	defer s.ops.Done()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	start := time.Now()
	p, err := s.planSync()
	if err != nil {
		return nil, fmt.Errorf("segment: sync: %w", err)
	}
	if err := s.runSync(p); err != nil {
		s.mu.Lock()
		var files []vfs.File
		for _, f := range p.files {
			files = append(files, releaseLocked(f.ref)...)
		}
		s.mu.Unlock()
		return nil, fmt.Errorf("segment: sync: %w", s.fail(errors.Join(err, closeAll(files))))
	}
	out := s.finishSync(p)
	s.metrics.syncs.Inc()
	s.metrics.syncSeconds.Observe(time.Since(start).Seconds())
	return out, nil
}

// planSync takes what the next Sync must cover and clears the dirty marks,
// so that what is appended from now on goes to the Sync after.
func (s *Store) planSync() (syncPlan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p syncPlan
	if s.mu.failed != nil {
		return p, s.mu.failed
	}
	for g := range s.mu.dirty {
		// A segment without a write handle is synced through its end or
		// deleted.
		if g.w != nil {
			g.w.refs++
			p.files = append(p.files, syncFile{seg: g, ref: g.w, size: g.size})
		}
	}
	clear(s.mu.dirty)
	if s.mu.rootDirty {
		p.dirs = append(p.dirs, s.cfg.Dir)
		s.mu.rootDirty = false
	}
	for _, st := range s.mu.streams {
		if st.dirDirty {
			p.dirs = append(p.dirs, st.dir)
			st.dirDirty = false
		}
		if st.head > st.durable {
			p.heads = append(p.heads, syncHead{st, st.head})
		}
	}
	// A fixed order, so that fault-injection tests can name the n-th fsync.
	slices.SortFunc(p.files, func(a, b syncFile) int { return cmp.Compare(a.seg.path, b.seg.path) })
	slices.Sort(p.dirs)
	return p, nil
}

// runSync does the fsyncs, without the mutex: files first, then
// directories. Only once all are done is anything reported durable.
func (s *Store) runSync(p syncPlan) error {
	for _, f := range p.files {
		if err := f.ref.f.SyncData(); err != nil {
			return fmt.Errorf("sync %s: %w", f.seg.path, err)
		}
	}
	for _, d := range p.dirs {
		if err := s.syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// finishSync records what the fsyncs covered, retires the write handles of
// sealed segments now synced through their end and returns the heads that
// advanced.
func (s *Store) finishSync(p syncPlan) []Durable {
	s.mu.Lock()
	var files []vfs.File
	for _, f := range p.files {
		g := f.seg
		g.syncedSize = max(g.syncedSize, f.size)
		files = append(files, releaseLocked(f.ref)...)
		files = append(files, retireLocked(g)...)
	}
	var out []Durable
	for _, h := range p.heads {
		// A Reset since the snapshot may have moved durable past it.
		if h.head > h.st.durable {
			h.st.durable = h.head
			out = append(out, Durable{Origin: h.st.id.origin, Stream: h.st.id.stream, Seq: h.head})
		}
		checkStreamLocked(h.st)
	}
	s.mu.Unlock()
	if err := closeAll(files); err != nil {
		s.log.Warn("closing a synced segment failed", "error", err)
	}
	slices.SortFunc(out, func(a, b Durable) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Stream, b.Stream))
	})
	return out
}
