package kv

import (
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// MaxUnanswered bounds the writes of one Writes stream that the site has
// read and not yet answered: past it, the site stops reading the stream
// until answers go out, and gRPC's flow control holds the client back.
const MaxUnanswered = 4096

// Writes serves a stream of pipelined writes: it reads requests as they
// come, appends together whatever has arrived (one batch per wait and
// timeout), and answers each write once its batch's wait holds, with the
// code and message Put would have returned.
func (s *Server) Writes(stream kvpb.KV_WritesServer) error {
	w := &writeStream{s: s, stream: stream, slots: make(chan struct{}, MaxUnanswered),
		readWake: make(chan struct{}, 1), sendWake: make(chan struct{}, 1)}
	w.mu.waits = map[waitKey][]*waitingBatch{}
	if md, _ := metadata.FromIncomingContext(stream.Context()); len(md.Get(kvpb.WritesBatchHeader)) > 0 {
		// The header goes out now, not with the first answer, so that the
		// client can batch its first writes.
		if err := stream.SendHeader(metadata.Pairs(kvpb.WritesBatchHeader, "1")); err != nil {
			return err
		}
		w.batch = true
	}
	return w.run()
}

// maxBatchReplies bounds the answers in one message.
const maxBatchReplies = 256

// Drain asks the client of every Writes stream, open or opened later, to
// close it: the client sends no more on it, the site answers what it has
// read, and the stream ends. Call it before grpc.Server.GracefulStop, which
// waits for every stream to end. It is idempotent.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// writeStream is the site's side of one Writes stream. Its goroutines:
//
//   - the handler's reads requests, one write or a batch per message
//     (taking one of MaxUnanswered slots per write, so it stops reading
//     while they are all taken);
//   - process takes whatever has been read, appends it as one batch per
//     wait and timeout, answers refused writes and those that wait for
//     nothing, and queues each other batch for its waiter;
//   - one waiter per (wait, timeout) with batches queued waits for them in
//     order: a batch's wait cannot hold before an earlier one's (its seqs
//     are higher, frontiers only grow), so waiting in order answers each as
//     soon as it holds, with one WaitFor per batch;
//   - one per write of a linearizable key, made through the Raft group as
//     Put makes it;
//   - send, the only one that sends: it sends queued answers (together,
//     up to maxBatchReplies a message, to a client that reads batches),
//     freeing their slots, and the request to close the stream after
//     Server.Drain.
//
// The handler returns once all of them have ended: when the client closes
// its side, after answering every write read; when the stream breaks, at
// once.
type writeStream struct {
	s        *Server
	stream   kvpb.KV_WritesServer
	slots    chan struct{} // one per write read and not answered
	readWake chan struct{} // cap 1: requests were read, or reading ended
	sendWake chan struct{} // cap 1: answers were queued, or no more will be
	work     sync.WaitGroup
	batch    bool // the client reads answers in batches

	mu struct {
		sync.Mutex
		in       []streamWrite // read, for process
		readDone bool          // nothing more will be read
		replies  []*answer
		sendDone bool // nothing more will be queued
		// waits holds each waiter's queue; a key is present while its
		// waiter runs.
		waits map[waitKey][]*waitingBatch
	}
}

// streamWrite is a request and when it was read (zero unless observed).
type streamWrite struct {
	req  *kvpb.WriteRequest
	read time.Time
}

type waitKey struct {
	wait      string
	timeoutMs int64
}

// waitingBatch is an appended batch and the requests of its ops.
type waitingBatch struct {
	b      *Batch
	writes []streamWrite
}

func (w *writeStream) run() error {
	var process, send sync.WaitGroup
	process.Go(w.process)
	send.Go(w.send)
	err := w.read()
	w.mu.Lock()
	w.mu.readDone = true
	w.mu.Unlock()
	signal(w.readWake)
	process.Wait()
	// Every waiter and linearizable write was started by process.
	w.work.Wait()
	w.mu.Lock()
	w.mu.sendDone = true
	w.mu.Unlock()
	signal(w.sendWake)
	send.Wait()
	return err
}

// signal wakes the goroutine that waits on ch, which has room for one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// read reads requests until the client closes its side (nil) or the
// stream breaks.
func (w *writeStream) read() error {
	ctx := w.stream.Context()
	observe := w.s.Observe != nil
	// Reused from message to message: hand copies what it is given.
	var one [1]*kvpb.WriteRequest
	var in []streamWrite
	for {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		req, err := w.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		reqs, err := unbatch(req, &one)
		if err != nil {
			return err
		}
		var at time.Time
		if observe {
			at = time.Now()
		}
		in = in[:0]
		for i, r := range reqs {
			// The first has the slot taken before reading. The others
			// take theirs; those that have one go on before waiting.
			if i > 0 {
				select {
				case w.slots <- struct{}{}:
				default:
					w.hand(in)
					in = in[:0]
					select {
					case w.slots <- struct{}{}:
					case <-ctx.Done():
						return status.FromContextError(ctx.Err()).Err()
					}
				}
			}
			in = append(in, streamWrite{req: r, read: at})
		}
		w.hand(in)
	}
}

// hand gives writes read to process.
func (w *writeStream) hand(in []streamWrite) { push(&w.mu.Mutex, &w.mu.in, in, w.readWake) }

// push appends items to *q, which mu guards, and wakes the goroutine that
// waits on wake if *q was empty: that goroutine takes the whole queue each
// time it wakes, so only the first push after it needs to wake it.
func push[T any](mu *sync.Mutex, q *[]T, items []T, wake chan struct{}) {
	if len(items) == 0 {
		return
	}
	mu.Lock()
	*q = append(*q, items...)
	first := len(*q) == len(items)
	mu.Unlock()
	if first {
		signal(wake)
	}
}

// unbatch returns the writes a message carries: itself (in one), or those
// in More.
func unbatch(req *kvpb.WriteRequest, one *[1]*kvpb.WriteRequest) ([]*kvpb.WriteRequest, error) {
	one[0] = req
	reqs := one[:]
	if req.Id == 0 && len(req.More) > 0 {
		if req.Key != "" || len(req.Value) > 0 || req.Delete || req.Wait != "" || req.TimeoutMs != 0 {
			return nil, status.Error(codes.InvalidArgument, "kv: a message carrying writes in more has no write of its own")
		}
		reqs = req.More
	}
	for _, r := range reqs {
		if r.Id == 0 {
			// Its answer would read as the request to close the stream.
			return nil, status.Error(codes.InvalidArgument, "kv: a write's id must not be 0")
		}
		if len(r.More) > 0 {
			return nil, status.Errorf(codes.InvalidArgument, "kv: write %d carries more writes: only a message with id 0 may", r.Id)
		}
	}
	return reqs, nil
}

// process appends what has been read, without waiting for more, until
// reading has ended and everything read is appended, or the stream broke.
func (w *writeStream) process() {
	ctx := w.stream.Context()
	var batch []streamWrite
	for ctx.Err() == nil {
		w.mu.Lock()
		batch, w.mu.in = w.mu.in, batch[:0]
		done := w.mu.readDone
		w.mu.Unlock()
		if len(batch) > 0 {
			w.handle(batch)
			clear(batch)
			continue
		}
		if done {
			return
		}
		select {
		case <-w.readWake:
		case <-ctx.Done():
		}
	}
}

// handle appends one batch per (wait, timeout), in the order the writes
// arrived, and starts the linearizable writes.
func (w *writeStream) handle(batch []streamWrite) {
	type group struct {
		key    waitKey
		writes []streamWrite
	}
	var groups []group
	for _, sw := range batch {
		if w.s.isLinear(sw.req.Key) {
			w.work.Go(func() { w.linWrite(sw) })
			continue
		}
		k := waitKey{sw.req.Wait, sw.req.TimeoutMs}
		i := 0
		for i < len(groups) && groups[i].key != k {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{key: k})
		}
		groups[i].writes = append(groups[i].writes, sw)
	}
	for _, g := range groups {
		w.appendBatch(g.key, g.writes)
	}
}

func (w *writeStream) appendBatch(k waitKey, writes []streamWrite) {
	ops := make([]Op, len(writes))
	for i, sw := range writes {
		ops[i] = Op{Key: sw.req.Key, Value: sw.req.Value, Delete: sw.req.Delete}
	}
	// The append is bounded by the stream; the wait by the timeout too.
	b, _ := w.s.store.Append(w.stream.Context(), ops, WriteOptions{Wait: k.wait, Timeout: timeout(k.timeoutMs)})
	wait := b.waits()
	var replies []*answer
	for i, sw := range writes {
		if r := &b.Results[i]; !wait || r.Seq == 0 {
			replies = append(replies, w.reply(sw, r.WriteResult, r.Err))
		}
	}
	w.queue(replies)
	if !wait {
		return
	}
	w.mu.Lock()
	q, running := w.mu.waits[k]
	w.mu.waits[k] = append(q, &waitingBatch{b: b, writes: writes})
	w.mu.Unlock()
	if !running {
		w.work.Go(func() { w.waitAll(k) })
	}
}

// waitAll waits for the batches queued under k in order, answering each
// batch's writes, until none is left.
func (w *writeStream) waitAll(k waitKey) {
	for {
		w.mu.Lock()
		q := w.mu.waits[k]
		if len(q) == 0 {
			delete(w.mu.waits, k)
			w.mu.Unlock()
			return
		}
		wb := q[0]
		q[0] = nil
		w.mu.waits[k] = q[1:]
		w.mu.Unlock()
		_ = wb.b.Wait(w.stream.Context())
		replies := make([]*answer, 0, len(wb.writes))
		for i, sw := range wb.writes {
			if r := &wb.b.Results[i]; r.Seq != 0 {
				replies = append(replies, w.reply(sw, r.WriteResult, r.Err))
			}
		}
		w.queue(replies)
	}
}

func (w *writeStream) linWrite(sw streamWrite) {
	r := sw.req
	res, err := w.s.linPut(w.stream.Context(), r.Key, r.Value, r.Delete, r.TimeoutMs)
	var wr WriteResult
	if res != nil {
		wr = WriteResult{Origin: res.Origin, Seq: res.Seq, HLC: fromPBHLC(res.Hlc)}
	}
	w.queue([]*answer{w.reply(sw, wr, err)})
}

// answer is a reply with room for its write's response: one allocation,
// reused once sent.
type answer struct {
	reply kvpb.WriteReply
	write kvpb.WriteResponse
	hlc   kvpb.HLC
}

// reply answers one write: where it went (if anywhere) and its error as
// Put would have returned it.
func (w *writeStream) reply(sw streamWrite, res WriteResult, err error) *answer {
	a, _ := w.s.answers.Get().(*answer)
	if a == nil {
		a = new(answer)
	}
	a.reply.Id = sw.req.Id
	if res.Seq != 0 {
		a.write.Origin, a.write.Seq = res.Origin, res.Seq
		if !res.HLC.IsZero() {
			a.hlc.Wall, a.hlc.Logical = res.HLC.Wall, res.HLC.Logical
			a.write.Hlc = &a.hlc
		}
		a.reply.Write = &a.write
	}
	err = toStatus(err)
	if err != nil {
		st := status.Convert(err)
		a.reply.Code, a.reply.Error = uint32(st.Code()), st.Message()
	}
	if w.s.Observe != nil {
		w.s.Observe("write", sw.req.Wait, time.Since(sw.read), err)
	}
	return a
}

// sendSome sends the first of batch, or as many as one message takes if
// the client reads batches, and returns how many it sent.
func (w *writeStream) sendSome(batch []*answer) (int, error) {
	n := min(len(batch), maxBatchReplies)
	if !w.batch || n == 1 {
		return 1, w.stream.Send(&batch[0].reply)
	}
	env := &kvpb.WriteReply{More: make([]*kvpb.WriteReply, n)}
	for i, a := range batch[:n] {
		env.More[i] = &a.reply
	}
	return n, w.stream.Send(env)
}

// free returns a sent answer for reuse.
func (w *writeStream) free(a *answer) {
	a.reply = kvpb.WriteReply{}
	a.write = kvpb.WriteResponse{}
	w.s.answers.Put(a)
}

// queue hands answers to send.
func (w *writeStream) queue(replies []*answer) { push(&w.mu.Mutex, &w.mu.replies, replies, w.sendWake) }

// send sends the queued answers until no more will come, or the stream
// broke.
func (w *writeStream) send() {
	ctx := w.stream.Context()
	draining := w.s.draining
	var batch []*answer
	for {
		w.mu.Lock()
		batch, w.mu.replies = w.mu.replies, batch[:0]
		done := w.mu.sendDone
		w.mu.Unlock()
		for i := 0; i < len(batch); {
			n, err := w.sendSome(batch[i:])
			if err != nil {
				// The stream is broken: its context ends, and with it
				// every other goroutine's work.
				return
			}
			for _, a := range batch[i : i+n] {
				// Send encoded it: it can go.
				w.free(a)
				<-w.slots
			}
			clear(batch[i : i+n])
			i += n
		}
		if len(batch) > 0 {
			continue
		}
		if done {
			return
		}
		select {
		case <-w.sendWake:
		case <-draining:
			draining = nil
			// Id 0: not an answer, the request to close the stream.
			goAway := &kvpb.WriteReply{Code: uint32(codes.Unavailable), Error: "kv: the site is shutting down: close this stream"}
			if err := w.stream.Send(goAway); err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
