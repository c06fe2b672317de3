package kvclient

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// streamWriter is one Writes stream of a Client. Calls queue their requests
// and wait for their call's done; two goroutines serve the stream, whatever
// the number of calls: run opens it and sends what is queued, as much as
// has been queued each time it wakes (in batches once the site said it
// reads them), and read hands each reply to its call by id.
type streamWriter struct {
	c      *Client
	ctx    context.Context // ends when the stream breaks or the client closes
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: requests were queued, or the site asked to close
	// retired is set once the stream takes no more writes: it broke, or
	// the site asked to close it.
	retired atomic.Bool
	// batched is set once the site's header says it reads several writes
	// in one message; until then each goes alone.
	batched atomic.Bool

	mu struct {
		sync.Mutex
		nextID  uint64
		queue   []*call          // to send, in order
		pending map[uint64]*call // queued or sent, and not answered
		closing bool             // the site asked to close the stream
		err     error            // why the stream broke; then pending is empty
	}
}

// call is one write on a stream.
type call struct {
	req  kvpb.WriteRequest
	done chan struct{} // cap 1: signaled once reply or err is set
	// reply or err is the answer; guarded by streamWriter.mu until done is
	// signaled, then the caller's.
	reply *kvpb.WriteReply
	err   error
	// sent: handed to the sender; abandoned: its caller gave up.
	sent, abandoned bool
}

func newStreamWriter(c *Client) *streamWriter {
	w := &streamWriter{c: c, wake: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(c.ctx)
	w.mu.pending = map[uint64]*call{}
	return w
}

// errClosing refuses writes on a stream the site asked to close.
var errClosing = status.Error(codes.Unavailable, "kv: write stream closing: the site is shutting down")

// enqueue gives cl an id and queues it, or says why the stream takes no
// more writes.
func (w *streamWriter) enqueue(cl *call) error {
	w.mu.Lock()
	if err := w.mu.err; err != nil {
		w.mu.Unlock()
		return err
	}
	if w.mu.closing {
		w.mu.Unlock()
		return errClosing
	}
	w.mu.nextID++
	cl.req.Id = w.mu.nextID
	w.mu.pending[cl.req.Id] = cl
	w.mu.queue = append(w.mu.queue, cl)
	first := len(w.mu.queue) == 1
	w.mu.Unlock()
	if first {
		signal(w.wake)
	}
	return nil
}

// abandon is called when cl's caller gives up: a write not yet sent never
// will be; one sent keeps its place, so that its answer still updates the
// session. False if cl was answered meanwhile.
func (w *streamWriter) abandon(cl *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-cl.done:
		return false
	default:
	}
	cl.abandoned = true
	if !cl.sent {
		delete(w.mu.pending, cl.req.Id)
	}
	return true
}

// run opens the stream, starts read, and sends until the stream breaks or
// the site asks to close it.
func (w *streamWriter) run() {
	stream, err := w.c.KV.Writes(metadata.AppendToOutgoingContext(w.ctx, kvpb.WritesBatchHeader, "1"))
	if err != nil {
		w.fail(err)
		return
	}
	// run is one of c.wg's, so c.wg cannot be waited out before this.
	w.c.wg.Go(func() { w.read(stream) })
	var batch []*call
	for {
		select {
		case <-w.wake:
		case <-w.ctx.Done():
			return
		}
		for {
			w.mu.Lock()
			batch, w.mu.queue = w.mu.queue, batch[:0]
			n := 0
			for _, cl := range batch {
				if !cl.abandoned {
					cl.sent = true
					batch[n] = cl
					n++
				}
			}
			clear(batch[n:])
			batch = batch[:n]
			closing := w.mu.closing
			w.mu.Unlock()
			if len(batch) == 0 {
				if closing {
					// read goes on until the site has answered and ends
					// the stream.
					_ = stream.CloseSend()
					return
				}
				break
			}
			for i := 0; i < len(batch); {
				n, err := w.sendSome(stream, batch[i:])
				if err != nil {
					// io.EOF: the stream ended, and read learns why.
					if !errors.Is(err, io.EOF) {
						w.fail(err)
					}
					return
				}
				clear(batch[i : i+n])
				i += n
			}
		}
	}
}

// maxBatchWrites bounds the writes in one message; their keys, values and
// waits together stay within streamMaxBytes, which every site reads.
const maxBatchWrites = 256

// sendSome sends the first of batch, or as many as one message takes once
// the site reads batches, and returns how many it sent. A batch goes in a
// message of its own, so that no call's request is changed while its
// answer may be arriving.
func (w *streamWriter) sendSome(stream kvpb.KV_WritesClient, batch []*call) (int, error) {
	n, size := 0, 0
	for n < len(batch) && n < maxBatchWrites {
		r := &batch[n].req
		size += len(r.Key) + len(r.Value) + len(r.Wait) + 32
		if n > 0 && size > streamMaxBytes {
			break
		}
		n++
	}
	if !w.batched.Load() || n == 1 {
		return 1, stream.Send(&batch[0].req)
	}
	env := &kvpb.WriteRequest{More: make([]*kvpb.WriteRequest, n)}
	for i, cl := range batch[:n] {
		env.More[i] = &cl.req
	}
	return n, stream.Send(env)
}

// read hands each reply to its call until the stream ends.
func (w *streamWriter) read(stream kvpb.KV_WritesClient) {
	// The site sends its header when the stream opens; an older site
	// only with its first answer, and without the key.
	if md, err := stream.Header(); err == nil && len(md.Get(kvpb.WritesBatchHeader)) > 0 {
		w.batched.Store(true)
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the site ended it")
			}
			w.fail(err)
			return
		}
		switch {
		case r.Id != 0:
			w.answer(r)
		case len(r.More) > 0:
			for _, a := range r.More {
				w.answer(a)
			}
		default:
			w.close()
		}
	}
}

// answer hands r to its call.
func (w *streamWriter) answer(r *kvpb.WriteReply) {
	w.mu.Lock()
	cl := w.mu.pending[r.Id]
	delete(w.mu.pending, r.Id)
	abandoned := cl != nil && cl.abandoned
	if cl != nil && !abandoned {
		cl.reply = r
		cl.done <- struct{}{}
	}
	w.mu.Unlock()
	if abandoned {
		w.c.remember(r.Write)
	}
}

// close is the site's request to close the stream: it takes no more
// writes, sends those queued and closes its side.
func (w *streamWriter) close() {
	w.retired.Store(true)
	w.mu.Lock()
	w.mu.closing = true
	w.mu.Unlock()
	signal(w.wake)
}

// fail ends the stream: every unanswered write fails with codes.Unavailable
// naming the cause (codes.Canceled if the client was closed), and the
// client's next write opens another stream.
func (w *streamWriter) fail(cause error) {
	w.retired.Store(true)
	err := status.Errorf(codes.Unavailable, "kv: write stream broke: %s", status.Convert(cause).Message())
	if w.c.ctx.Err() != nil {
		err = errClientClosed
	}
	w.mu.Lock()
	if w.mu.err == nil {
		w.mu.err = err
		for _, cl := range w.mu.pending {
			if !cl.abandoned {
				cl.err = err
				cl.done <- struct{}{}
			}
		}
		w.mu.pending, w.mu.queue = nil, nil
	}
	w.mu.Unlock()
	w.cancel()
}

// signal wakes a goroutine waiting on ch, a channel of capacity 1, unless a
// wake is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
