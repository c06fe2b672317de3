package stabilizer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
	"github.com/stabilizer/stabilizer/stabilizer/storage/segment"
)

// Bulk streams (HandleBulk, Config.Core.BulkStreams) keep their payloads
// out of pebble, in the segment store under Dir/bulk: each byte written
// once at each site, fsynced in groups by a goroutine of its own, read back
// from there to serve peers and clients. The core hands their entries out
// apart (Ready.BulkEntries) and counts them persisted only once this
// writer says so (core.BulkPersisted), so a KV write's fsync of pebble's
// log never waits behind chunk bytes, and no bulk entry leaves the site
// before its segment is synced.

// bulkDir is the segment store's directory inside the node's Dir. Pebble
// ignores files it does not know, and whatever deletes a site's data
// directory deletes its bulk store with it.
const bulkDir = "bulk"

// maxBulkQueued bounds the bulk bytes handed to the writer and not yet
// appended to the segment store. The core holds bulk entries in memory
// until they are durable, and a receiver's window (MaxBulkInflightBytes
// per origin) bounds what peers send it; this bounds what the site's own
// appends may pile up when the disk is slower than the clients.
const maxBulkQueued = 64 << 20

// bulkJob is one Ready's work for the bulk store, in Ready order.
type bulkJob struct {
	entries []Entry           // BulkEntries: in seq order per stream
	truncs  []core.Truncation // of bulk streams: done once p is durable
	// p makes the Ready's pebble writes durable, the records of the
	// truncations' floors among them: segments are deleted only after, so
	// that a crash never leaves a floor below entries already gone.
	p *storage.Pending
}

func (j *bulkJob) bytes() int64 {
	var n int64
	for i := range j.entries {
		n += int64(len(j.entries[i].Payload))
	}
	return n
}

// bulkWriter is the queue between the node's writer, which hands it each
// Ready's bulk work, and runBulk, which appends it to the segment store,
// syncs in groups and tells the loop what became durable.
type bulkWriter struct {
	seg  *segment.Store
	wake chan struct{} // buffered 1: work was queued
	room chan struct{} // buffered 1: queued bytes fell
	mu   struct {
		sync.Mutex
		queue []bulkJob
		bytes int64
	}
}

func openBulk(cfg *Config) (*segment.Store, error) {
	seg, err := segment.Open(segment.Config{
		Dir: filepath.Join(cfg.Dir, bulkDir), FS: cfg.FS,
		Logger: cfg.Logger.Named("bulk"), Registerer: cfg.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("stabilizer: open bulk store: %w", err)
	}
	return seg, nil
}

// queue hands a Ready's bulk work to runBulk. It waits while the queue
// holds more than maxBulkQueued, unless the queue is empty, so that the
// disk pushes back on the writer, and through it on the loop.
func (b *bulkWriter) queue(stop <-chan struct{}, j bulkJob) {
	n := j.bytes()
	for {
		b.mu.Lock()
		if b.mu.bytes == 0 || b.mu.bytes+n <= maxBulkQueued {
			b.mu.queue = append(b.mu.queue, j)
			b.mu.bytes += n
			b.mu.Unlock()
			select {
			case b.wake <- struct{}{}:
			default:
			}
			return
		}
		b.mu.Unlock()
		select {
		case <-b.room:
		case <-stop:
			return
		}
	}
}

func (b *bulkWriter) take() []bulkJob {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.mu.queue
	b.mu.queue, b.mu.bytes = nil, 0
	if len(q) > 0 {
		select {
		case b.room <- struct{}{}:
		default:
		}
	}
	return q
}

// runBulk is the bulk store's goroutine: it appends what the writer
// queued, then syncs everything appended since the last sync with one
// fsync per segment file, and tells the loop which bulk entries are
// durable. While one group's fsync runs the writer queues the next, so
// groups grow with the load. A write or fsync that fails stops the site:
// after a failed fsync nothing can be said about what reached the disk.
func (n *Node) runBulk() {
	defer n.wg.Done()
	b := &n.bulk
	for {
		select {
		case <-n.stop:
			return
		case <-b.wake:
		}
		jobs := b.take()
		if len(jobs) == 0 {
			continue
		}
		for i := range jobs {
			if err := n.writeBulk(&jobs[i]); err != nil {
				n.fail(err)
				return
			}
		}
		done, err := b.seg.Sync()
		if err != nil {
			n.fail(fmt.Errorf("stabilizer: bulk store: %w", err))
			return
		}
		if len(done) > 0 && n.submit(n.ctx, func() { n.bulkDurable(done) }) != nil {
			return
		}
	}
}

// writeBulk appends one Ready's bulk entries, then does its truncations
// once the Ready's pebble writes are durable.
func (n *Node) writeBulk(j *bulkJob) error {
	ents := j.entries
	for i := 0; i < len(ents); {
		k := i
		id := ents[i].Stream
		for k < len(ents) && ents[k].Stream == id {
			k++
		}
		recs := make([]segment.Record, 0, k-i)
		heads := make([]byte, 0, 8*(k-i))
		for e := i; e < k; e++ {
			var m storage.Message
			heads, m = stored(heads, &ents[e])
			recs = append(recs, segment.Record(m))
		}
		if err := n.bulk.seg.Append(id.Origin, id.Name, recs); err != nil {
			return fmt.Errorf("stabilizer: bulk store: append %s: %w", id, err)
		}
		i = k
	}
	if len(j.truncs) == 0 {
		return nil
	}
	if j.p != nil {
		if err := j.p.Wait(); err != nil {
			return fmt.Errorf("stabilizer: persist: %w", err)
		}
	}
	for _, t := range j.truncs {
		if err := n.truncateBulk(t); err != nil {
			return err
		}
	}
	return nil
}

// truncateBulk drops a bulk stream's prefix from the segment store, or
// moves its head past a snapshot (a Skip beyond what it holds).
func (n *Node) truncateBulk(t core.Truncation) error {
	id := t.Stream
	var err error
	if head := n.bulkHead(id); t.Skip && t.Seq > head {
		err = n.bulk.seg.Reset(id.Origin, id.Name, t.Seq)
	} else {
		err = n.bulk.seg.Truncate(id.Origin, id.Name, min(t.Seq, head))
	}
	if err != nil {
		return fmt.Errorf("stabilizer: bulk store: truncate %s to %d: %w", id, t.Seq, err)
	}
	return nil
}

func (n *Node) bulkHead(id StreamID) uint64 {
	for _, si := range n.bulk.seg.Streams() {
		if si.Origin == id.Origin && si.Stream == id.Name {
			return si.Head
		}
	}
	return 0
}

// bulkDurable tells the core which bulk entries the segment store synced;
// it runs on the loop.
func (n *Node) bulkDurable(done []segment.Durable) {
	for _, d := range done {
		id := StreamID{Origin: d.Origin, Name: d.Stream}
		if err := n.core.BulkPersisted(id, d.Seq); err != nil {
			// A skip moved the stream past what was being synced.
			n.log.Debug("bulk persisted", "stream", id, "error", err)
		}
	}
}

// isBulk reports whether streams of this name are bulk streams. The set is
// fixed at Start.
func (n *Node) isBulk(name string) bool {
	return slices.Contains(n.bulkNames, name)
}

// readBulk reads durable entries lo.. of a bulk stream from the segment
// store, none above hi, at most maxBytes past the first.
func (n *Node) readBulk(id StreamID, lo, hi uint64, maxBytes int) ([]Entry, error) {
	recs, err := n.bulk.seg.Read(id.Origin, id.Name, lo, int(hi-lo+1), int64(maxBytes))
	if err != nil {
		if errors.Is(err, segment.ErrTruncated) {
			return nil, fmt.Errorf("%w: %w", storage.ErrTruncated, err)
		}
		return nil, err
	}
	out := make([]Entry, 0, len(recs))
	for i := range recs {
		m := storage.Message(recs[i])
		e, err := fromStored(id, &m)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// migrateBulk moves the entries of bulk streams that an earlier release
// kept in pebble into the segment store: appended and synced there first,
// then deleted from pebble, so a crash in between leaves them in both
// places and the next start finishes the move.
func (n *Node) migrateBulk(ctx context.Context) error {
	for _, si := range n.store.Streams() {
		if !n.isBulk(si.Stream) || si.Head <= si.Truncated {
			continue
		}
		id := StreamID{Origin: si.Origin, Name: si.Stream}
		from := max(si.Truncated, n.bulkHead(id)) + 1
		if n.bulkHead(id) < si.Truncated {
			if err := n.bulk.seg.Reset(si.Origin, si.Stream, si.Truncated); err != nil {
				return fmt.Errorf("stabilizer: move %s to the bulk store: %w", id, err)
			}
		}
		for from <= si.Head {
			msgs, err := n.store.ReadRange(si.Origin, si.Stream, from, 256, 64<<20)
			if err != nil {
				return fmt.Errorf("stabilizer: move %s to the bulk store: %w", id, err)
			}
			recs := make([]segment.Record, len(msgs))
			for i := range msgs {
				recs[i] = segment.Record(msgs[i])
			}
			if err := n.bulk.seg.Append(si.Origin, si.Stream, recs); err != nil {
				return fmt.Errorf("stabilizer: move %s to the bulk store: %w", id, err)
			}
			from = msgs[len(msgs)-1].Seq + 1
		}
		if _, err := n.bulk.seg.Sync(); err != nil {
			return fmt.Errorf("stabilizer: move %s to the bulk store: %w", id, err)
		}
		var b storage.Batch
		b.Truncate(si.Origin, si.Stream, si.Head)
		if err := n.store.Write(ctx, &b); err != nil {
			return fmt.Errorf("stabilizer: move %s to the bulk store: %w", id, err)
		}
		n.log.Info("moved a bulk stream's entries out of pebble", "stream", id, "entries", si.Head-si.Truncated)
	}
	return nil
}
