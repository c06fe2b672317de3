package wan

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

type endKind uint8

const (
	endNone  endKind = iota // a data chunk
	endEOF                  // the sender half-closed: deliver a FIN
	endAbort                // the sender failed or reset: reset the far side
)

// chunk is bytes read from one side of a connection with their schedule.
type chunk struct {
	data []byte
	// sent is when the chunk left the bandwidth limit; arrive is when it
	// is due at the far side.
	sent, arrive time.Time
	end          endKind
}

// delayQueue carries one direction's chunks from its reader to its writer,
// in order. It bounds the bytes inside (a TCP window's worth) so that a
// slow receiver or a cut pushes back on the sender instead of growing
// memory. One goroutine pushes and one pops.
type delayQueue struct {
	max      int
	done     <-chan struct{} // the connection's abort signal
	notEmpty chan struct{}
	notFull  chan struct{}

	mu struct {
		sync.Mutex
		items []chunk
		bytes int
	}
}

func newDelayQueue(max int, done <-chan struct{}) *delayQueue {
	return &delayQueue{
		max:      max,
		done:     done,
		notEmpty: make(chan struct{}, 1),
		notFull:  make(chan struct{}, 1),
	}
}

// push appends c, waiting while the queue is full. It returns false if the
// connection was aborted.
func (q *delayQueue) push(c chunk) bool {
	for {
		select {
		case <-q.done:
			return false
		default:
		}
		q.mu.Lock()
		if q.mu.bytes < q.max || len(q.mu.items) == 0 {
			q.mu.items = append(q.mu.items, c)
			q.mu.bytes += len(c.data)
			q.mu.Unlock()
			signal(q.notEmpty)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.notFull:
		case <-q.done:
			return false
		}
	}
}

// pop takes the oldest chunk, waiting for one. It returns false if the
// connection was aborted. The chunk's bytes still count against the bound
// until release.
func (q *delayQueue) pop() (chunk, bool) {
	for {
		select {
		case <-q.done:
			return chunk{}, false
		default:
		}
		q.mu.Lock()
		if len(q.mu.items) > 0 {
			c := q.mu.items[0]
			q.mu.items[0] = chunk{}
			q.mu.items = q.mu.items[1:]
			q.mu.Unlock()
			return c, true
		}
		q.mu.Unlock()
		select {
		case <-q.notEmpty:
		case <-q.done:
			return chunk{}, false
		}
	}
}

// held is the number of bytes pushed and not yet released.
func (q *delayQueue) held() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.bytes
}

// release frees n bytes of the bound once they were delivered.
func (q *delayQueue) release(n int) {
	q.mu.Lock()
	q.mu.bytes -= n
	q.mu.Unlock()
	signal(q.notFull)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pipe moves one direction of a proxied connection through a link: read
// from src, schedule on shape, deliver to dst when due.
type pipe struct {
	c        *conn
	shape    *Link
	src, dst *net.TCPConn
	q        *delayQueue
	// rtxFrom is the restore the held bytes now being retransmitted
	// belong to; rtxDone is when the last of them has been sent.
	// Only write touches them.
	rtxFrom, rtxDone time.Time
}

// retransmit books n held bytes sent again after the restore at
// restoredAt, back to back at the link's rate, and returns when they are
// sent.
func (p *pipe) retransmit(restoredAt time.Time, n int) time.Time {
	if !p.rtxFrom.Equal(restoredAt) {
		p.rtxFrom, p.rtxDone = restoredAt, restoredAt
	}
	p.rtxDone = p.rtxDone.Add(p.shape.Config().Bandwidth.transmit(n))
	return p.rtxDone
}

func newPipe(c *conn, shape *Link, src, dst *net.TCPConn, maxHeld int) *pipe {
	return &pipe{c: c, shape: shape, src: src, dst: dst, q: newDelayQueue(maxHeld, c.done)}
}

// read runs until src ends or the connection is aborted.
func (p *pipe) read() {
	var w waiter
	var prev time.Time     // arrival of the previous chunk: no overtaking
	var prevDone time.Time // when the previous chunk was sent, on the link's clock
	var backlogged bool    // bytes remained in the socket after the previous read
	buf := make([]byte, maxChunk)
	src := newStampedReader(p.src)
	for {
		want := p.shape.chunkSize()
		ready := time.Now()
		n, now, more, err := src.read(buf[:want])
		// Bytes that waited in the socket while this reader was pacing
		// or pushed back were waiting to enter the link, as in a
		// sender's buffer: they enter it now, not when they arrived.
		now = latest(now, ready)
		if n > 0 {
			data := make([]byte, n)
			copy(data, buf[:n])
			// If bytes were left in the socket last time, the sender has
			// been ahead of the link ever since its previous chunk, however
			// late this goroutine ran.
			var backlogSince time.Time
			if backlogged {
				backlogSince = prevDone
			}
			sent, done, arrive, lost := p.shape.schedule(now, n, backlogSince, prev)
			prev, prevDone, backlogged = arrive, done, more
			p.shape.m.sent.Add(float64(n))
			if lost {
				p.shape.m.lost.Inc()
			}
			p.shape.m.held.Add(float64(n))
			if !p.q.push(chunk{data: data, sent: sent, arrive: arrive}) {
				p.shape.m.held.Sub(float64(n))
				return
			}
			// Read no more until the bandwidth limit has sent this chunk:
			// the sender's own buffers fill and push back, as they would
			// behind a slow link.
			if !w.coarse(sent, p.c.done) {
				return
			}
		}
		if err != nil {
			end := endEOF
			if !errors.Is(err, io.EOF) {
				end = endAbort
			}
			// The FIN or reset travels like data, behind the bytes before it.
			sent, _, arrive, _ := p.shape.schedule(now, 0, time.Time{}, prev)
			p.q.push(chunk{sent: sent, arrive: arrive, end: end})
			return
		}
	}
}

// write runs until the end marker is delivered or the connection is aborted.
func (p *pipe) write() {
	var w waiter
	for {
		c, ok := p.q.pop()
		if !ok || !p.await(&w, &c) {
			return
		}
		switch c.end {
		case endEOF:
			_ = p.dst.CloseWrite()
			return
		case endAbort:
			p.c.abort(true)
			return
		}
		_, err := p.dst.Write(c.data)
		p.q.release(len(c.data))
		p.shape.m.held.Sub(float64(len(c.data)))
		if err != nil {
			p.c.abort(true)
			return
		}
		p.shape.m.delivered.Add(float64(len(c.data)))
	}
}

// await waits until c is due and the link lets it through. A chunk that
// was in flight across a cut, or sent during one, is lost with the
// partition and retransmitted by TCP once it heals: it arrives one delay
// after the restore, at the link's rate (and, in order, so does everything
// behind it).
func (p *pipe) await(w *waiter, c *chunk) bool {
	for {
		if !w.until(c.arrive, p.c.done) {
			return false
		}
		st := p.shape.state()
		if st.cut {
			select {
			case <-st.restored:
				continue
			case <-p.c.done:
				return false
			}
		}
		if c.sent.Before(st.restoredAt) && c.arrive.After(st.cutAt) {
			// Retransmitted bytes queue at the bandwidth limit again,
			// so a restore does not burst everything held at once. They
			// go out back to back from the restore, on this connection's
			// own clock: the link's clock has meanwhile moved on with
			// what the sender wrote after the restore (booked by read as
			// it came), and timing each held chunk after that would make
			// every one of them wait a full delay after the one before,
			// so a connection that kept writing small messages through a
			// long cut would take its backlog times the delay to recover.
			p.shape.rebook(st.restoredAt, len(c.data)) // the link's rate is spent all the same
			sent := p.retransmit(st.restoredAt, len(c.data))
			c.sent = st.restoredAt
			if r := sent.Add(st.delay); r.After(c.arrive) {
				c.arrive = r
			}
			continue
		}
		return true
	}
}
