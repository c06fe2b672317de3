package kv

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// Limits of the batches a Client sends. Up to batchInFlight requests of one
// wait and timeout are in flight at once; writes that find them all busy
// queue and leave together in the next request, which answers each alone.
const (
	batchInFlight = 2
	batchMaxOps   = 1024
	batchMaxBytes = 1 << 20
)

// batcher coalesces a Client's concurrent writes. Writes are grouped by
// their wait and timeout, since a request waits once for all its writes: a
// write that asks for no wait must not queue behind one that waits for
// every region. A write that finds a free slot goes out at once as a plain
// Put or Delete, so batching costs a lone writer nothing.
type batcher struct {
	c      *Client
	ctx    context.Context // ended by Client.Close
	cancel context.CancelFunc

	mu     sync.Mutex
	groups map[batchKey]*batchGroup
}

type batchKey struct {
	wait    string
	timeout time.Duration
}

type batchGroup struct {
	inFlight int
	queue    []*queuedOp
}

type queuedOp struct {
	op   *kvpb.WriteOp
	done chan struct{}
	resp *kvpb.WriteResponse
	err  error
}

func newBatcher(c *Client) *batcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &batcher{c: c, ctx: ctx, cancel: cancel, groups: map[batchKey]*batchGroup{}}
}

// write makes op under (wait, timeout), alone or in a batch.
func (b *batcher) write(ctx context.Context, op *kvpb.WriteOp, wait string, timeout time.Duration) (*kvpb.WriteResponse, error) {
	k := batchKey{wait, timeout}
	b.mu.Lock()
	g := b.groups[k]
	if g == nil {
		g = &batchGroup{}
		b.groups[k] = g
	}
	if g.inFlight < batchInFlight {
		g.inFlight++
		b.mu.Unlock()
		resp, err := b.c.writeOne(ctx, op, wait, timeout)
		b.finished(k)
		return resp, err
	}
	q := &queuedOp{op: op, done: make(chan struct{})}
	g.queue = append(g.queue, q)
	b.mu.Unlock()
	select {
	case <-q.done:
		return q.resp, q.err
	case <-ctx.Done():
		// Dequeued, it is never written; already sent, it may still be,
		// as a Put in flight may.
		b.dequeue(k, q)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// dequeue removes q if it has not been sent.
func (b *batcher) dequeue(k batchKey, q *queuedOp) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.groups[k]
	for i, x := range g.queue {
		if x == q {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// finished frees a request's slot, or hands it to the writes that queued
// meanwhile.
func (b *batcher) finished(k batchKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.groups[k]
	if len(g.queue) == 0 {
		g.inFlight--
		if g.inFlight == 0 {
			delete(b.groups, k)
		}
		return
	}
	n, size := 0, 0
	for n < len(g.queue) && n < batchMaxOps {
		size += len(g.queue[n].op.Key) + len(g.queue[n].op.Value)
		if n > 0 && size > batchMaxBytes {
			break
		}
		n++
	}
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	go b.send(k, batch)
}

// send makes one WriteBatch request for the queued writes and answers each.
func (b *batcher) send(k batchKey, batch []*queuedOp) {
	defer b.finished(k)
	// The request outlives any one writer's context; a write whose caller
	// gave up is still made, as a Put in flight would be.
	limit := 2 * time.Minute
	if k.timeout > 0 {
		limit = k.timeout + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	req := &kvpb.WriteBatchRequest{Ops: make([]*kvpb.WriteOp, len(batch)), Wait: k.wait, TimeoutMs: k.timeout.Milliseconds()}
	for i, q := range batch {
		req.Ops[i] = q.op
	}
	resp, err := b.c.KV.WriteBatch(ctx, req)
	if err == nil && len(resp.Results) != len(batch) {
		err = status.Errorf(codes.Internal, "kv: batch of %d writes answered with %d results", len(batch), len(resp.Results))
	}
	for i, q := range batch {
		if err != nil {
			q.err = err
		} else {
			r := resp.Results[i]
			q.resp = r.Write
			b.c.remember(r.Write)
			if r.Code != 0 {
				q.err = status.Error(codes.Code(r.Code), r.Error)
			}
		}
		close(q.done)
	}
}
