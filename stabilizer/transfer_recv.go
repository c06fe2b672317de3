package stabilizer

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// keyTransfer holds a receiver's progress through one stream's snapshot,
// written with every chunk it stores, so that a receiver killed mid-way
// resumes where its store stands.
const keyTransfer = 'T' // name(origin) name(stream) -> progress (JSON)

func transferKey(id StreamID) []byte {
	return appendName(appendName([]byte{keyTransfer}, id.Origin), id.Name)
}

// progress is a receiver's durable state of one transfer.
type progress struct {
	Source   string
	Snapshot string
	Pos      uint64
	Clock    HLC
	// Cleared: the application's old state of the stream is deleted; every
	// key stored since is the snapshot's, up to After.
	Cleared    bool
	After      []byte
	Keys       uint64
	Bytes      uint64
	TotalKeys  uint64
	TotalBytes uint64
	Sum        []byte
	Hash       []byte // the running SHA-256's state
	Started    time.Time
}

// receivers routes data frames to the transfer that asked for them.
type receivers struct {
	mu   sync.Mutex
	next uint64
	wait map[uint64]chan *xferFrame
}

func (n *Node) recvFrame(from string, f *xferFrame) {
	n.recv.mu.Lock()
	ch := n.recv.wait[f.req]
	n.recv.mu.Unlock()
	if ch == nil {
		return // an earlier request's
	}
	select {
	case ch <- f:
	case <-n.stop:
	}
}

func (n *Node) newRequest() (uint64, chan *xferFrame) {
	n.recv.mu.Lock()
	defer n.recv.mu.Unlock()
	if n.recv.wait == nil {
		n.recv.wait = map[uint64]chan *xferFrame{}
		n.recv.next = rand.Uint64() // no answer to an earlier run's request matches
	}
	n.recv.next++
	ch := make(chan *xferFrame, 4)
	n.recv.wait[n.recv.next] = ch
	return n.recv.next, ch
}

func (n *Node) endRequest(req uint64) {
	n.recv.mu.Lock()
	delete(n.recv.wait, req)
	n.recv.mu.Unlock()
}

// runTransfers brings streams up to date from peers' snapshots, one at a
// time: the streams the core says are behind what their holders dropped,
// and, once every peer was heard, a wiped site's own streams that peers
// hold beyond its log. Transfers a restart interrupted resume first.
func (n *Node) runTransfers() {
	defer n.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		for _, need := range n.needs() {
			if err := n.catchUp(need); err != nil && n.ctx.Err() == nil {
				n.log.Warn("state transfer", "stream", need.Stream, "error", err)
			}
		}
	}
}

// needs lists the streams to transfer, with the least position a snapshot
// must reach.
func (n *Node) needs() []Position {
	var out []Position
	seen := map[StreamID]bool{}
	add := func(p Position) {
		if !seen[p.Stream] && n.transferOf(p.Stream.Name) != nil {
			seen[p.Stream] = true
			out = append(out, p)
		}
	}
	_ = n.store.AppScanPrefix(nodeNS, []byte{keyTransfer}, func(k, _ []byte) error {
		if parts, ok := readNames(k[1:], 2); ok {
			add(Position{Stream: StreamID{Origin: parts[0], Name: parts[1]}})
		}
		return nil
	})
	_ = n.do(n.ctx, func() {
		for _, b := range n.core.Behind() {
			if n.transferOf(b.Stream.Name) != nil {
				add(b)
				continue
			}
			// Nothing can bring back what every holder dropped: go on
			// after it rather than stop the stream for good.
			n.log.Warn("entries this site lacks were dropped by every holder, and the stream's application has no state transfer: skipping them",
				"stream", b.Stream, "up_to", b.Seq)
			if err := n.core.SkipBehind(b.Stream); err != nil {
				n.log.Warn("skip behind", "stream", b.Stream, "error", err)
			}
		}
		if n.core.Joining() {
			return
		}
		for _, l := range n.core.Lost() {
			if n.transferOf(l.Stream.Name) != nil {
				add(l)
				continue
			}
			// No snapshot can bring it back: go on without this
			// site's copy, so that the application can append again.
			n.log.Warn("this site lost its copy of its own stream's entries, which peers hold; its application has no state transfer, so it goes on without them",
				"stream", l.Stream, "held_up_to", l.Seq)
			if err := n.core.SkipLost(l.Stream); err != nil {
				n.log.Warn("skip lost", "stream", l.Stream, "error", err)
			}
		}
	})
	return out
}

// catchUp transfers one stream's state from a peer that applied it up to
// need.Seq at least, resuming what its progress record holds.
func (n *Node) catchUp(need Position) error {
	tr := n.transferOf(need.Stream.Name)
	id := need.Stream
	pr, err := n.loadProgress(id)
	if err != nil {
		return err
	}
	if pr.Source == "" {
		if pr.Source = n.pickSource(need); pr.Source == "" {
			n.setTransfer(TransferStatus{Stream: id, Waiting: fmt.Sprintf("a connected peer that applied %s up to %d", id, need.Seq)})
			return nil
		}
		pr.Started = time.Now()
	}
	n.pauseStream(id)
	tr.app.Restoring(id)
	n.log.Info("state transfer: receiving", "stream", id, "from", pr.Source, "needs", need.Seq, "resume", pr.Snapshot != "")
	for n.ctx.Err() == nil {
		done, err := n.receive(tr, id, &pr)
		if done {
			return n.finish(tr, id, &pr)
		}
		if errors.Is(err, errUnknownSnapshot) {
			n.log.Warn("state transfer: the source lost the snapshot; starting over", "stream", id, "from", pr.Source)
			pr = progress{Source: pr.Source, Cleared: pr.Cleared, Started: pr.Started}
			continue
		}
		if err != nil {
			n.log.Warn("state transfer: interrupted; resuming", "stream", id, "from", pr.Source, "error", err)
		}
		if !n.Connected()[pr.Source] {
			// Another holder may do; what was stored of this one's
			// snapshot is cleared and fetched again from the next.
			if src := n.pickSource(need); src != "" && src != pr.Source {
				pr = progress{Source: src, Cleared: pr.Cleared, Started: pr.Started}
			}
		}
		select {
		case <-n.stop:
		case <-time.After(time.Second):
		}
	}
	return n.ctx.Err()
}

// pickSource returns the connected peer that applied most of need's
// stream, if that is more than this site holds: the holder of the rest may
// be down, and catching up as far as can be had beats waiting for it. The
// origin, which holds its every entry, goes first among equals.
func (n *Node) pickSource(need Position) string {
	var acks []uint64
	var head uint64
	if err := n.do(n.ctx, func() {
		acks, _ = n.core.Acks(need.Stream)
		head, _, _ = n.core.Head(need.Stream)
	}); err != nil || acks == nil {
		return ""
	}
	sites := n.cfg.Schema.Sites
	conn := n.Connected()
	best, most := "", head
	for i, s := range sites {
		a := acks[frontier.Applied*len(sites)+i]
		if !conn[s] || a <= head {
			continue
		}
		if a > most || (a == most && s == need.Stream.Origin) {
			best, most = s, a
		}
	}
	return best
}

// receive asks for the snapshot from where pr stands and stores what comes
// until it is complete (true) or something interrupts it.
func (n *Node) receive(tr *transfer, id StreamID, pr *progress) (bool, error) {
	req, ch := n.newRequest()
	defer n.endRequest(req)
	q := &xferFrame{kind: frameRequest, req: req, stream: id, snapshot: pr.Snapshot, credit: DefaultTransferWindow}
	if pr.Snapshot != "" {
		q.after = pr.After
		if q.after == nil {
			q.after = []byte{}
		}
	}
	if err := n.cfg.Transport.Send(pr.Source, PlaneData, append([]byte{transferChannel}, q.encode()...)); err != nil {
		return false, err
	}
	h, err := pr.hasher()
	if err != nil {
		return false, err
	}
	for {
		var f *xferFrame
		select {
		case f = <-ch:
		case <-time.After(transferIdle):
			return false, fmt.Errorf("nothing from %s for %v", pr.Source, transferIdle)
		case <-n.stop:
			return false, ErrStopped
		}
		if f.kind == frameError {
			if f.unknown {
				return false, errUnknownSnapshot
			}
			return false, errors.New(f.msg)
		}
		if err := n.store1(tr, id, pr, h, f); err != nil {
			return false, err
		}
		n.report(id, pr)
		if f.done {
			if pr.Keys != pr.TotalKeys || !bytes.Equal(h.Sum(nil), pr.Sum) {
				return false, fmt.Errorf("snapshot %s of %s: received %d keys, %d bytes, digest %x; the source has %d keys, %d bytes, digest %x",
					pr.Snapshot, id, pr.Keys, pr.Bytes, h.Sum(nil), pr.TotalKeys, pr.TotalBytes, pr.Sum)
			}
			return true, nil
		}
		c := &xferFrame{kind: frameCredit, req: req, credit: uint64(chunkSize(f))}
		_ = n.cfg.Transport.Send(pr.Source, PlaneData, append([]byte{transferChannel}, c.encode()...))
	}
}

func chunkSize(f *xferFrame) int {
	size := 0
	for _, p := range f.pairs {
		size += len(p[0]) + len(p[1])
	}
	return size
}

// store1 stores one data frame with the progress it makes, in one write.
func (n *Node) store1(tr *transfer, id StreamID, pr *progress, h hash.Hash, f *xferFrame) error {
	if pr.Snapshot == "" {
		// The first frame of a snapshot names it.
		var cerr error
		_ = n.do(n.ctx, func() { cerr = n.core.CheckSnapshot([]Position{{Stream: id, Seq: f.pos}}) })
		if cerr != nil {
			return cerr
		}
		pr.Snapshot, pr.Pos, pr.Clock = f.snapshot, f.pos, f.clock
		pr.TotalKeys, pr.TotalBytes, pr.Sum = f.totalKeys, f.totalBytes, f.sum
		pr.After, pr.Keys, pr.Bytes = nil, 0, 0
		h.Reset()
	} else if f.snapshot != pr.Snapshot {
		return fmt.Errorf("data of snapshot %s, expected %s", f.snapshot, pr.Snapshot)
	}
	if !pr.Cleared {
		if err := n.clearState(tr, id); err != nil {
			return err
		}
		pr.Cleared = true
	}
	var b storage.Batch
	for _, p := range f.pairs {
		b.AppSet(tr.ns.name, p[0], p[1])
		digest(h, p[0], p[1])
		pr.Keys++
		pr.Bytes += uint64(len(p[0]) + len(p[1]))
		pr.After = p[0]
	}
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	pr.Hash = st
	v, err := json.Marshal(pr)
	if err != nil {
		return err
	}
	b.AppSet(nodeNS, transferKey(id), v)
	n.m.transferBytes.WithLabelValues("received").Add(float64(chunkSize(f)))
	return n.store.Write(n.ctx, &b)
}

// clearState deletes the application's state of stream id, in batches,
// before the snapshot's is stored in its place.
func (n *Node) clearState(tr *transfer, id StreamID) error {
	for {
		var b storage.Batch
		err := tr.ns.Scan(nil, nil, func(k, v []byte) error {
			if o, ok := tr.app.Owner(k, v); ok && o == id.Origin {
				b.AppDelete(tr.ns.name, k)
			}
			if b.Size() > 4<<20 {
				return errStopScan
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return err
		}
		if b.Empty() {
			return nil
		}
		if err := n.store.Write(n.ctx, &b); err != nil {
			return err
		}
	}
}

var errStopScan = errors.New("stop")

// finish makes the snapshot the stream's state: the position, the head
// moved past what the log lacks, and the progress record gone, in one
// write; then the core and the application.
func (n *Node) finish(tr *transfer, id StreamID, pr *progress) error {
	var b storage.Batch
	b.AppDelete(nodeNS, transferKey(id))
	b.AppSet(nodeNS, appliedKey(id), appliedValue(pr.Pos))
	if pr.Pos > n.store.Head(id.Origin, id.Name) {
		b.Skip(id.Origin, id.Name, pr.Pos)
	}
	if err := n.store.Write(n.ctx, &b); err != nil {
		return err
	}
	var err error
	derr := n.do(n.ctx, func() {
		err = n.core.InstallSnapshot([]core.Position{{Stream: id, Seq: pr.Pos}}, pr.Clock)
		n.resumeStream(id)
	})
	if derr != nil {
		return derr
	}
	if err != nil {
		return err
	}
	n.endTransfer(id)
	n.m.transfers.Inc()
	n.log.Info("state transfer: done", "stream", id, "from", pr.Source, "snapshot", pr.Snapshot, "position", pr.Pos,
		"keys", pr.Keys, "bytes", pr.Bytes, "took", time.Since(pr.Started).Round(time.Millisecond))
	return tr.app.Restored(n.ctx, id)
}

func (n *Node) loadProgress(id StreamID) (progress, error) {
	var pr progress
	v, err := n.store.AppGet(nodeNS, transferKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return pr, nil
	}
	if err != nil {
		return pr, err
	}
	if err := json.Unmarshal(v, &pr); err != nil {
		return pr, fmt.Errorf("state transfer of %s: corrupt progress record: %w", id, err)
	}
	return pr, nil
}

// hasher resumes the running digest of what was stored.
func (pr *progress) hasher() (hash.Hash, error) {
	h := sha256.New()
	if len(pr.Hash) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(pr.Hash); err != nil {
			return nil, fmt.Errorf("state transfer: corrupt digest state: %w", err)
		}
	}
	return h, nil
}

// report publishes a transfer's progress, and logs it every few seconds.
func (n *Node) report(id StreamID, pr *progress) {
	n.setTransfer(TransferStatus{Stream: id, Source: pr.Source, Snapshot: pr.Snapshot, Position: pr.Pos,
		Keys: pr.Keys, TotalKeys: pr.TotalKeys, Bytes: pr.Bytes, TotalBytes: pr.TotalBytes, Started: pr.Started})
	if time.Since(n.lastReport) > 5*time.Second {
		n.lastReport = time.Now()
		pct := 100.0
		if pr.TotalBytes > 0 {
			pct = 100 * float64(pr.Bytes) / float64(pr.TotalBytes)
		}
		n.log.Info("state transfer: progress", "stream", id, "from", pr.Source, "percent", fmt.Sprintf("%.1f", pct),
			"bytes", pr.Bytes, "of", pr.TotalBytes)
	}
}
