package stabilizer

import (
	"fmt"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// Bounds on the Readies taken from the core and not yet released. Of those
// that asked for an fsync, one is being fsynced and a couple are applied
// behind it, for the next fsync to cover: more would only cut the Readies
// smaller. Those that wait for a later fsync may gather longer, so that an
// idle site's stable times and heartbeats share one fsync per SyncDelay.
const (
	maxSyncing     = 3
	maxOutstanding = 64
)

// DefaultSyncDelay is how long durable state that nobody waits for may wait
// for a later fsync to carry it before it gets one of its own.
const DefaultSyncDelay = 10 * time.Millisecond

// applied is the writer's word to the loop on a Ready it applied.
type applied struct {
	err  error
	sync bool // it waits for its own fsync
}

// job is a Ready the writer applied to the store, on its way to release.
type job struct {
	rd *core.Ready
	// p makes the Ready's writes durable; nil when nothing it releases
	// waits for an fsync.
	p *storage.Pending
	// sync: p's fsync was asked for at once. Otherwise the writes wait for
	// a later fsync, at most SyncDelay after at.
	sync bool
	// urgent: something the Ready releases is awaited (entries to send or
	// ack, a frontier a write waits for, a session message): whatever holds
	// it up gets its fsync now.
	urgent bool
	at     time.Time
	// bulkTruncs are the Ready's truncations of bulk streams, which the
	// bulk store does once p is durable.
	bulkTruncs []core.Truncation
}

func (j *job) durable() bool {
	if j.p == nil {
		return true
	}
	select {
	case <-j.p.Done():
		return true
	default:
		return false
	}
}

// writer applies each Ready to the store in the order the core hands them
// out, without waiting for its fsync, tells the loop (which may then
// Advance and take the next Ready), and passes it on to the completer.
func (n *Node) writer() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case rd := <-n.toWrite:
			j, err := n.persist(rd)
			n.applied <- applied{err, j.sync} // never blocks: one Ready is applied at a time
			if err != nil {
				return
			}
			n.toRelease <- j // never blocks: at most maxOutstanding are out
		}
	}
}

// completer releases Readies in order once their writes are durable: it
// sends their messages, hands their deliveries to the applications and
// publishes their frontiers, then returns them to the loop. A Ready whose
// writes nobody waits for (applied acks, stable times, clock heartbeats,
// frontiers without waiters) waits up to SyncDelay for a later fsync to
// carry it, so that such writes seldom cost an fsync of their own. It gets
// its fsync at once when something behind it is urgent, when a write
// starts waiting for one of its frontiers (WaitFor signals recheck), or
// when the loop has work but no room (hurry).
func (n *Node) completer() {
	defer n.wg.Done()
	var q []*job
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		for len(q) > 0 && q[0].durable() {
			n.release(q[0])
			q[0] = nil
			q = q[1:]
		}
		if len(q) == 0 {
			select {
			case <-n.stop:
				return
			case j := <-n.toRelease:
				q = append(q, j)
			}
			continue
		}
		h := q[0]
		if h.sync {
			if !n.waitDurable(h.p) {
				return
			}
			continue
		}
		if p := n.urgentWait(q); p != nil {
			if !n.waitDurable(p) {
				return
			}
			continue
		}
		force := false
		timer.Reset(time.Until(h.at.Add(n.cfg.SyncDelay)))
		select {
		case <-n.stop:
			return
		case <-h.p.Done():
		case j := <-n.toRelease:
			q = append(q, j)
		case <-n.recheck:
		case <-timer.C:
			force = true
		case <-n.hurry:
			force = true
		}
		timer.Stop()
		if force && !n.waitDurable(h.p) {
			return
		}
	}
}

// urgentWait returns what to wait for when the unsynced head of q holds up
// something urgent: the first urgent Ready's own fsync, which covers
// everything applied before it, or else the head's, asked for now (an
// empty synced write, which covers everything applied so far). Whether a
// frontier is awaited is asked again each time: a write may have started
// waiting for it since the Ready was applied.
func (n *Node) urgentWait(q []*job) *storage.Pending {
	for i, j := range q {
		if i > 0 && j.urgent && j.sync {
			return j.p
		}
		if j.urgent || n.pub.awaited(j.rd.Frontiers) {
			return q[0].p
		}
	}
	return nil
}

func (n *Node) waitDurable(p *storage.Pending) bool {
	if err := p.Wait(); err != nil {
		n.fail(fmt.Errorf("stabilizer: persist: %w", err))
		return false
	}
	return true
}

// release hands a durable Ready's effects out, in the order Ready
// prescribes, and returns it to the loop.
func (n *Node) release(j *job) {
	rd := j.rd
	for i := range rd.Messages {
		m := &rd.Messages[i]
		if m.Plane() != PlaneBulk {
			n.send(m)
			continue
		}
		select {
		case n.bulkOut <- m:
		case <-n.stop:
			return
		}
	}
	n.deliver(rd.Deliver, n.released+1)
	n.pub.publish(rd.Frontiers, rd.StableTimes)
	n.released++
	n.evaluated(n.released, rd.Scoped)
	n.completed <- j // never blocks: at most maxOutstanding are out
}

// urgent reports whether anything a Ready releases is awaited, so that its
// writes get their fsync at once instead of waiting for a later one.
func (n *Node) urgent(rd *core.Ready) bool {
	if len(rd.Entries) > 0 || len(rd.Predicates) > 0 || len(rd.Deliver) > 0 || len(rd.Scoped) > 0 {
		return true
	}
	for i := range rd.Messages {
		if rd.Messages[i].Type != core.MsgAcks {
			return true
		}
	}
	return n.pub.awaited(rd.Frontiers)
}
