package stabilizer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Applier consumes the messages of the streams of one name, from every
// origin, in seq order per stream. Apply is called from one goroutine per
// Applier; when it returns nil the site acks `applied` for the entries. An
// error is logged and the same entries are offered again after a pause.
// An Applier that keeps state in a Namespace records how far it applied
// with Batch.SetApplied, in the batch that holds the state: delivery then
// resumes after that position on restart, and each entry is applied once.
type Applier interface {
	Apply(ctx context.Context, entries []Entry) error
}

// appQueue hands one Applier its entries in order. The core bounds how many
// entries a stream may have delivered and not applied, which bounds the
// queue.
type appQueue struct {
	name   string
	app    Applier
	wake   chan struct{}
	mu     sync.Mutex
	queued []Entry
	// applying is held during Apply, so that a state transfer can wait
	// for the one in progress (pauseStream).
	applying sync.Mutex
}

// Handle registers the application of stream name. Call before Start.
func (n *Node) Handle(stream string, app Applier) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.started {
		return fmt.Errorf("stabilizer: handle %q: register appliers before Start", stream)
	}
	if _, ok := n.mu.apps[stream]; ok {
		return fmt.Errorf("stabilizer: handle %q: an applier is already registered", stream)
	}
	n.mu.apps[stream] = &appQueue{name: stream, app: app, wake: make(chan struct{}, 1)}
	return nil
}

// HandleBulk registers the application of stream name, as Handle, and
// makes it a bulk stream: its messages travel on a window and a connection
// of their own (PlaneBulk, Config.Core.MaxBulkInflightBytes), so that a
// bulk transfer saturating a link delays neither other streams' messages
// nor acks. Every site should register the same bulk streams; a site that
// does not still receives them, and sends its own on the data plane.
func (n *Node) HandleBulk(stream string, app Applier) error {
	if err := n.Handle(stream, app); err != nil {
		return err
	}
	n.mu.Lock()
	n.mu.bulk = append(n.mu.bulk, stream)
	n.mu.Unlock()
	return nil
}

func (n *Node) startApps() {
	for _, q := range n.mu.apps {
		n.wg.Add(1)
		go n.runApp(q)
	}
}

// deliver queues entries for their applications; it runs on the
// completer, for the release-th Ready. Entries of streams nobody handles
// are acked by ackUnhandled on the loop; those of streams the gate holds
// back are dropped.
func (n *Node) deliver(entries []Entry, release uint64) {
	for i := 0; i < len(entries); {
		j := i
		id := entries[i].Stream
		for j < len(entries) && entries[j].Stream == id {
			j++
		}
		if q, ok := n.mu.apps[id.Name]; ok && !n.gate.drops(id, release) {
			q.mu.Lock()
			q.queued = append(q.queued, entries[i:j]...)
			q.mu.Unlock()
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
		i = j
	}
}

// ackUnhandled runs on the loop: it acks `applied` at once for delivered
// entries of streams no application handles.
func (n *Node) ackUnhandled(entries []Entry) {
	for i := 0; i < len(entries); {
		j := i
		id := entries[i].Stream
		for j < len(entries) && entries[j].Stream == id {
			j++
		}
		if _, ok := n.mu.apps[id.Name]; !ok {
			if err := n.core.Applied(id, entries[j-1].Seq); err != nil {
				n.log.Warn("ack applied", "stream", id, "error", err)
			}
		}
		i = j
	}
}

// runApp feeds one application; after each successful Apply it tells the
// core through the loop.
func (n *Node) runApp(q *appQueue) {
	defer n.wg.Done()
	ctx := n.ctx
	for {
		select {
		case <-n.stop:
			return
		case <-q.wake:
		}
		q.mu.Lock()
		batch := q.queued
		q.queued = nil
		q.mu.Unlock()
		for len(batch) > 0 {
			j := 0
			id := batch[0].Stream
			for j < len(batch) && batch[j].Stream == id {
				j++
			}
			q.applying.Lock()
			ok := n.gate.isPaused(id) || n.applyOne(ctx, q, batch[:j])
			q.applying.Unlock()
			if !ok {
				return
			}
			batch = batch[j:]
		}
	}
}

func (n *Node) applyOne(ctx context.Context, q *appQueue, ents []Entry) bool {
	for {
		err := q.app.Apply(ctx, ents)
		if err == nil {
			break
		}
		n.log.Error("application failed; retrying", "stream", ents[0].Stream, "from", ents[0].Seq, "error", err)
		select {
		case <-n.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	id, last := ents[0].Stream, ents[len(ents)-1].Seq
	err := n.submit(ctx, func() {
		if err := n.core.Applied(id, last); err != nil {
			n.log.Warn("ack applied", "stream", id, "error", err)
		}
	})
	return err == nil
}

// gate holds back the deliveries of streams whose application state is
// being replaced (state transfer): while a stream is paused its entries
// are dropped on their way to the application, and once it resumes, those
// of every Ready taken before are dropped too: the core delivers the
// stream again from the snapshot's position, in Readies taken after.
type gate struct {
	mu     sync.Mutex
	paused map[StreamID]bool
	// from: per resumed stream, the first release index whose deliveries
	// count.
	from map[StreamID]uint64
}

func (g *gate) drops(id StreamID, release uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused[id] || release < g.from[id]
}

func (g *gate) isPaused(id StreamID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused[id]
}

// pauseStream stops deliveries of id and waits for an Apply of it in
// progress to end.
func (n *Node) pauseStream(id StreamID) {
	n.gate.mu.Lock()
	if n.gate.paused == nil {
		n.gate.paused, n.gate.from = map[StreamID]bool{}, map[StreamID]uint64{}
	}
	n.gate.paused[id] = true
	n.gate.mu.Unlock()
	n.mu.Lock()
	q := n.mu.apps[id.Name]
	n.mu.Unlock()
	if q == nil {
		return
	}
	q.mu.Lock()
	kept := q.queued[:0]
	for _, e := range q.queued {
		if e.Stream != id {
			kept = append(kept, e)
		}
	}
	q.queued = kept
	q.mu.Unlock()
	waitApply(q)
}

// waitApply returns once no Apply of q is in progress: the next one sees
// the stream paused.
func waitApply(q *appQueue) {
	q.applying.Lock()
	//lint:ignore SA2001 the empty section waits for the Apply in progress
	q.applying.Unlock()
}

// resumeStream lets deliveries of id through again from the Readies taken
// from now on; it runs on the loop, where taken counts.
func (n *Node) resumeStream(id StreamID) {
	n.gate.mu.Lock()
	defer n.gate.mu.Unlock()
	delete(n.gate.paused, id)
	n.gate.from[id] = n.taken + 1
}
