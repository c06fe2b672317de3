package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// Future is the answer of a PublishAsync, once Done is closed.
type Future struct {
	c     *Client
	op    string
	req   *pubsubpb.PublishRequest // as the caller made it; each attempt sends a copy
	tries int                      // sites it was handed to; owned by whoever holds it
	done  chan struct{}
	ack   PubAck
	err   error
}

// Done is closed once the publish is answered: its predicate holds, it
// failed, or the client was closed.
func (f *Future) Done() <-chan struct{} { return f.done }

// Result waits until Done is closed and returns the publish's answer.
func (f *Future) Result() (PubAck, error) {
	<-f.done
	return f.ack, f.err
}

// finish answers f and gives its slot of the window back.
func (f *Future) finish(ack PubAck, err error) {
	f.ack, f.err = ack, err
	close(f.done)
	<-f.c.window
}

// PublishAsync publishes like Publish without waiting for the answer: the
// Future gets it. Any number of goroutines may publish at once; the
// publishes go over one Publishes stream per Client, opened by the first,
// and the site answers each as soon as its predicate holds, not
// necessarily in order. PublishAsync blocks while the window of publishes
// in flight (WithWindow) is full, ctx bounding that wait; once it returned
// a Future, ctx plays no part (WithTimeout bounds the site's wait).
//
// When the stream's site is lost, the publishes not yet sent to it, and
// those with a MsgID, go to the next site; the others fail with
// ErrUnavailable (they may have been published).
func (c *Client) PublishAsync(ctx context.Context, topic string, data []byte, opts ...PublishOption) (*Future, error) {
	op := publishOp(topic)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pubsub: %s: %w", op, err)
	}
	if c.ctx.Err() != nil {
		return nil, errClientClosed(op)
	}
	select {
	case c.window <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("pubsub: %s: waiting for room in the window of %d: %w", op, cap(c.window), ctx.Err())
	case <-c.ctx.Done():
		return nil, errClientClosed(op)
	}
	req := c.publishRequest(topic, data, opts)
	req.TimeoutMs = c.timeout.Milliseconds()
	f := &Future{c: c, op: op, req: req, done: make(chan struct{})}
	c.enqueue(f)
	return f, nil
}

// enqueue hands f to the client's stream, opening one if there is none or
// the last one broke.
func (c *Client) enqueue(f *Future) {
	for range 3 {
		p, err := c.publisher()
		if err != nil {
			f.finish(PubAck{}, errClientClosed(f.op))
			return
		}
		// A stream that broke since publisher looked refuses f; the next
		// call replaces it.
		if p.enqueue(f) {
			return
		}
	}
	f.finish(PubAck{}, &Error{Op: f.op, Code: codes.Unavailable, kind: ErrUnavailable, Msg: "publish stream keeps breaking"})
}

// publisher returns the client's Publishes stream, starting one at the
// site in use when there is none or the last one broke.
func (c *Client) publisher() (*publisher, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.mu.pub; p != nil && !p.retired.Load() {
		return p, nil
	}
	s, err := c.currentLocked()
	if err != nil {
		return nil, err
	}
	p := newPublisher(c, s)
	c.mu.pub = p
	// Under c.mu, with closed false: Close waits for it.
	c.wg.Go(p.run)
	return p, nil
}

// publisher is one Publishes stream of a Client. Two goroutines serve it:
// run opens it and sends what is queued; read hands each reply to its
// Future by req_id.
type publisher struct {
	c      *Client
	site   site
	ctx    context.Context // ends when the stream breaks or the client closes
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: requests were queued
	// retired is set once the stream takes no more publishes.
	retired atomic.Bool

	mu struct {
		sync.Mutex
		nextID  uint64
		queue   []*pubsubpb.PublishRequest // to send, in order
		pending map[uint64]*Future         // queued or sent, not answered
		sent    map[uint64]bool            // handed to the stream
		failed  bool                       // then pending is nil
	}
}

func newPublisher(c *Client, s site) *publisher {
	p := &publisher{c: c, site: s, wake: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(c.ctx)
	p.mu.pending = map[uint64]*Future{}
	p.mu.sent = map[uint64]bool{}
	return p
}

// enqueue queues a copy of f's request under the stream's next id; false
// if the stream broke.
func (p *publisher) enqueue(f *Future) bool {
	p.mu.Lock()
	if p.mu.failed {
		p.mu.Unlock()
		return false
	}
	p.mu.nextID++
	r := &pubsubpb.PublishRequest{ReqId: p.mu.nextID, Topic: f.req.Topic, Data: f.req.Data, Headers: f.req.Headers,
		MsgId: f.req.MsgId, TimeoutMs: f.req.TimeoutMs}
	f.tries++
	p.mu.pending[r.ReqId] = f
	p.mu.queue = append(p.mu.queue, r)
	first := len(p.mu.queue) == 1
	p.mu.Unlock()
	if first {
		signal(p.wake)
	}
	return true
}

// maxBatch bounds the publishes sent in one message.
const maxBatch = 256

// headerWait bounds how long a new Publishes stream waits for the site's
// header before it sends.
const headerWait = 100 * time.Millisecond

// run opens the stream, starts read and sends until the stream breaks.
func (p *publisher) run() {
	ctx := metadata.AppendToOutgoingContext(p.ctx, pubsubpb.PublishesBatchHeader, "1")
	stream, err := p.site.api.Publishes(ctx)
	if err != nil {
		p.fail(err)
		return
	}
	// A site that reads batches says so in its header, at once; until it
	// has (and to one that does not), one publish goes per message.
	var batched atomic.Bool
	header := make(chan struct{})
	if !p.c.goroutine(func() {
		defer close(header)
		if md, err := stream.Header(); err == nil && len(md.Get(pubsubpb.PublishesBatchHeader)) > 0 {
			batched.Store(true)
		}
	}) {
		p.fail(context.Canceled)
		return
	}
	// A site sends its header at once: wait for it a little, so that the
	// first publishes are batched too; a site that sends none is not
	// waited for longer.
	t := time.NewTimer(headerWait)
	select {
	case <-header:
	case <-t.C:
	case <-p.ctx.Done():
	}
	t.Stop()
	if !p.c.goroutine(func() { p.read(stream) }) {
		p.fail(context.Canceled)
		return
	}
	var batch []*pubsubpb.PublishRequest
	for {
		select {
		case <-p.wake:
		case <-p.ctx.Done():
			return
		}
		for {
			p.mu.Lock()
			batch, p.mu.queue = p.mu.queue, batch[:0]
			for _, r := range batch {
				p.mu.sent[r.ReqId] = true
			}
			p.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for rest := batch; len(rest) > 0; {
				n := 1
				if batched.Load() {
					n = min(len(rest), maxBatch)
				}
				m := rest[0]
				if n > 1 {
					// A copy: the queued request stays as it was for a
					// resend after a failover.
					m = &pubsubpb.PublishRequest{ReqId: m.ReqId, Topic: m.Topic, Data: m.Data, Headers: m.Headers,
						MsgId: m.MsgId, TimeoutMs: m.TimeoutMs, More: rest[1:n]}
				}
				if err := stream.Send(m); err != nil {
					// io.EOF: the stream ended, and read learns why.
					if !errors.Is(err, io.EOF) {
						p.fail(err)
					}
					return
				}
				rest = rest[n:]
			}
			clear(batch)
		}
	}
}

// read hands each reply to its Future until the stream ends.
func (p *publisher) read(stream pubsubpb.PubSub_PublishesClient) {
	for {
		r, err := stream.Recv()
		if err != nil {
			p.fail(err)
			return
		}
		more := r.More
		r.More = nil
		p.answer(r)
		for _, q := range more {
			p.answer(q)
		}
	}
}

// answer hands r to its Future. A publish the site answered Unavailable
// goes to the next site like one of a lost stream, if it may, and the
// client moves there: this stream takes no more publishes and ends once
// its last is answered.
func (p *publisher) answer(r *pubsubpb.PublishReply) {
	p.mu.Lock()
	f := p.mu.pending[r.ReqId]
	delete(p.mu.pending, r.ReqId)
	delete(p.mu.sent, r.ReqId)
	p.mu.Unlock()
	if f == nil {
		return
	}
	switch {
	case r.Code == int32(codes.Unavailable):
		p.retired.Store(true)
		p.c.failover(p.site.gen)
		if f.req.MsgId != "" && f.tries < len(p.c.addrs) {
			p.c.enqueue(f)
		} else {
			f.finish(PubAck{}, newError(f.op, p.site.addr, codes.Unavailable, r.Error, ErrUnknownTopic))
		}
	case r.Code != 0:
		f.finish(PubAck{}, newError(f.op, p.site.addr, codes.Code(r.Code), r.Error, ErrUnknownTopic))
	case r.Result == nil:
		f.finish(PubAck{}, newError(f.op, p.site.addr, codes.Internal, "answered without a result", ErrUnknownTopic))
	default:
		if !r.Result.Duplicate {
			p.c.learn(p.site.addr, r.Result.Origin)
		}
		f.finish(pubAckOf(r.Result), nil)
	}
	if p.retired.Load() {
		p.endIfIdle()
	}
}

// endIfIdle ends a retired stream that has no publish left to answer.
func (p *publisher) endIfIdle() {
	p.mu.Lock()
	idle := len(p.mu.pending) == 0 && !p.mu.failed
	if idle {
		// enqueue refuses from now on.
		p.mu.failed = true
	}
	p.mu.Unlock()
	if idle {
		p.cancel()
	}
}

// fail ends the stream. When the client was closed, every unanswered
// publish fails with ErrClosed. When the site was lost, the client moves
// to the next address and the publishes it may not have made (not yet
// sent, or with a message id) go there, in the order they were queued;
// the others fail with ErrUnavailable. On other errors they fail with it.
func (p *publisher) fail(cause error) {
	p.retired.Store(true)
	p.mu.Lock()
	if p.mu.failed {
		p.mu.Unlock()
		return
	}
	p.mu.failed = true
	pending, sent := p.mu.pending, p.mu.sent
	p.mu.pending, p.mu.sent, p.mu.queue = nil, nil, nil
	p.mu.Unlock()
	p.cancel()

	closed := p.c.ctx.Err() != nil
	eof := errors.Is(cause, io.EOF)
	lost := !closed && (eof || lostSite(cause))
	if lost {
		p.c.failover(p.site.gen)
	}
	why := "the site ended the publish stream"
	if !eof {
		why = "publish stream broke: " + errMessage(cause)
	}
	for _, id := range slices.Sorted(maps.Keys(pending)) {
		f := pending[id]
		switch {
		case closed:
			f.finish(PubAck{}, errClientClosed(f.op))
		case lost && (!sent[id] || f.req.MsgId != "") && f.tries < len(p.c.addrs):
			p.c.enqueue(f)
		case lost:
			msg := why + "; tried every site"
			if sent[id] && f.req.MsgId == "" {
				msg = why + "; a publish without a message id is not retried: it may have been published"
			}
			f.finish(PubAck{}, &Error{Op: f.op, Code: codes.Unavailable, Site: p.site.addr, kind: ErrUnavailable, Msg: msg})
		default:
			f.finish(PubAck{}, siteErr(f.op, p.site.addr, cause))
		}
	}
}

// errMessage is an error's gRPC message, or its text.
func errMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// signal wakes a goroutine waiting on ch, a channel of capacity 1, unless a
// wake is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
