package consumer_test

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

var (
	flagSeed  = flag.Uint64("seed", 0, "run TestModel with this one seed (0: run -seeds seeds)")
	flagSeeds = flag.Int("seeds", 300, "number of seeds TestModel runs")
	flagSteps = flag.Int("steps", 300, "steps per seed of TestModel")
)

// TestModel drives a State and a reference model (plain maps, brute force)
// with the same seeded random inputs and compares them after every step:
// the deliveries (which message, to whom, which attempt), the result of
// every reply, the dead letters, the stats, and the position, which must
// claim exactly the resolved messages plus the seqs the pump skipped. At the
// end every offered message must be resolved once the consumers ack all.
func TestModel(t *testing.T) {
	seeds := *flagSeeds
	first := uint64(1)
	if *flagSeed != 0 {
		seeds, first = 1, *flagSeed
	}
	total := map[string]int{}
	failed := 0
	for i := range seeds {
		seed := first + uint64(i)
		if _, err := runModel(seed, *flagSteps, total); err != nil {
			t.Errorf("seed %d: %v\nreproduce: go test ./pubsub/internal/consumer -run 'TestModel$' -seed=%d -steps=%d", seed, err, seed, *flagSteps)
			if failed++; failed == 3 {
				t.Fatal("stopping after 3 failing seeds")
			}
		}
	}
	t.Logf("%d seeds (internal assertions: %v): %v", seeds, consumer.InvariantsEnabled, total)
	if seeds >= 50 {
		for _, k := range []string{"offer", "offer.full", "offer.order", "offer.skip", "next.delivered", "ack", "nak", "nak.delay",
			"inprogress", "term", "reply.unknown", "reply.expired", "expired", "dead", "resolve", "merge", "merge.dropped", "detach", "redelivered",
			"skip", "drop"} {
			if total[k] == 0 {
				t.Errorf("no seed exercised %q: %v", k, total)
			}
		}
	}
}

// TestModelDeterministic replays seeds: a printed failing seed must
// reproduce.
func TestModelDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		a, errA := runModel(seed, 200, map[string]int{})
		b, errB := runModel(seed, 200, map[string]int{})
		if a != b || (errA == nil) != (errB == nil) {
			t.Errorf("seed %d: traces %x and %x differ (%v, %v)", seed, a, b, errA, errB)
		}
	}
}

type mPhase int

const (
	mReady mPhase = iota
	mInFlight
	mDelayed
	mDead
)

// mMsg is the model of one offered message.
type mMsg struct {
	id       consumer.MsgID
	done     bool // resolved here, or acked by a merged position
	phase    mPhase
	attempts int
	consumer consumer.ConsumerID
	at       time.Time // in flight: deadline; delayed: end of the delay
	handed   bool      // a dead letter DeadLetters handed out
}

type mCons struct {
	max      int
	inflight int
	lowered  bool // an Attach lowered max below inflight; it gets nothing until below
}

// model is the reference: the same subscription, as maps and scans.
type model struct {
	cfg    consumer.Config
	msgs   map[consumer.MsgID]*mMsg
	cursor map[string]uint64
	// ext is what positions from outside (New, Merge) claim.
	extFloor map[string]uint64
	extAcked map[consumer.MsgID]bool
	cons     map[consumer.ConsumerID]*mCons
	stats    consumer.Stats // counters only
}

func (m *model) pending() []*mMsg {
	var out []*mMsg
	for _, mm := range m.msgs {
		if !mm.done {
			out = append(out, mm)
		}
	}
	slices.SortFunc(out, func(a, b *mMsg) int { return cmpID(a.id, b.id) })
	return out
}

func cmpID(a, b consumer.MsgID) int {
	if c := strings.Compare(a.Origin, b.Origin); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// floor is the spec's floor: the lowest pending seq - 1 while one is
// pending, else the last offered seq or the outside floor, if higher.
func (m *model) floor(origin string) uint64 {
	low := uint64(0)
	for _, mm := range m.msgs {
		if mm.id.Origin == origin && !mm.done && (low == 0 || mm.id.Seq < low) {
			low = mm.id.Seq
		}
	}
	if low > 0 {
		return low - 1
	}
	return max(m.cursor[origin], m.extFloor[origin])
}

// claims is what the position must say of a seq.
func (m *model) claims(id consumer.MsgID) bool {
	return m.claimsWith(id, m.floor(id.Origin))
}

// claimsWith is claims with the origin's floor computed.
func (m *model) claimsWith(id consumer.MsgID, floor uint64) bool {
	if mm := m.msgs[id]; mm != nil {
		return mm.done
	}
	return id.Seq <= floor || id.Seq <= m.extFloor[id.Origin] || m.extAcked[id]
}

func (m *model) bound(c *mCons) int {
	if c.max == 0 {
		return m.cfg.MaxAckPending
	}
	return c.max
}

// pick is the consumer with room and the fewest in flight, lowest id first.
func (m *model) pick() (consumer.ConsumerID, bool) {
	var best consumer.ConsumerID
	found := false
	for _, id := range slices.Sorted(mapKeys(m.cons)) {
		c := m.cons[id]
		if c.inflight < m.bound(c) && (!found || c.inflight < m.cons[best].inflight) {
			best, found = id, true
		}
	}
	return best, found
}

func mapKeys[K comparable, V any](mp map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range mp {
			if !yield(k) {
				return
			}
		}
	}
}

func (m *model) exhausted(mm *mMsg) bool {
	return m.cfg.MaxDeliver > 0 && mm.attempts >= m.cfg.MaxDeliver
}

// unhold takes a message from its consumer.
func (m *model) unhold(mm *mMsg) {
	if mm.phase == mInFlight {
		if c := m.cons[mm.consumer]; c != nil {
			c.inflight--
		}
	}
}

func (m *model) retry(mm *mMsg) {
	m.unhold(mm)
	if m.exhausted(mm) {
		mm.phase, mm.handed = mDead, false
		m.stats.DeadLettered++
		return
	}
	mm.phase = mReady
}

func (m *model) tick(now time.Time) {
	for _, mm := range m.pending() {
		switch {
		case mm.phase == mInFlight && !mm.at.After(now):
			m.stats.Expired++
			m.retry(mm)
		case mm.phase == mDelayed && !mm.at.After(now):
			mm.phase = mReady
		}
	}
}

// replyErr is the error a reply must get, nil when it counts.
func (m *model) replyErr(c consumer.ConsumerID, id consumer.MsgID, attempt int, now time.Time) error {
	mm := m.msgs[id]
	switch {
	case mm == nil || mm.done:
		return consumer.ErrUnknownDelivery
	case attempt < 1 || attempt > mm.attempts:
		return consumer.ErrUnknownDelivery
	case attempt < mm.attempts:
		return consumer.ErrExpired
	case mm.consumer != c:
		return consumer.ErrUnknownDelivery
	case mm.phase != mInFlight || !now.Before(mm.at):
		return consumer.ErrExpired
	}
	return nil
}

func (m *model) resolve(mm *mMsg) {
	m.unhold(mm)
	mm.done = true
}

// run is one seed's run: the state, the model, the random source and the
// trace of what happened.
type run struct {
	s      *consumer.State
	m      *model
	rng    *rand.Rand
	now    time.Time
	step   int
	trace  []string
	counts map[string]int
	prev   consumer.Position
}

var origins = []string{"a", "b", "c"}

func newRun(seed uint64, counts map[string]int) *run {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := consumer.Config{
		AckWait:       time.Duration(1+rng.IntN(10)) * time.Second,
		MaxDeliver:    rng.IntN(4),
		MaxAckPending: 1 + rng.IntN(8),
	}
	m := &model{
		cfg: cfg, msgs: map[consumer.MsgID]*mMsg{}, cursor: map[string]uint64{},
		extFloor: map[string]uint64{}, extAcked: map[consumer.MsgID]bool{}, cons: map[consumer.ConsumerID]*mCons{},
	}
	var pos consumer.Position
	if rng.IntN(3) == 0 {
		pos = randomPosition(rng, m)
		m.join(pos)
		for o, p := range pos {
			m.cursor[o] = p.Floor
		}
	}
	r := &run{s: consumer.New(cfg, pos), m: m, rng: rng, now: t0, counts: counts}
	r.logf("config %+v position %v", cfg, pos)
	return r
}

// randomPosition is a position another site might have stored: any floor
// and acked seqs near what this run offers.
func randomPosition(rng *rand.Rand, m *model) consumer.Position {
	p := consumer.Position{}
	for _, o := range origins {
		if rng.IntN(2) == 0 {
			continue
		}
		base := m.floor(o)
		floor := base + uint64(rng.IntN(4))
		if rng.IntN(3) == 0 && floor > 2 {
			floor -= 2 // behind ours
		}
		op := consumer.OriginPos{Floor: floor}
		for range rng.IntN(4) {
			op.Acked = append(op.Acked, base+uint64(rng.IntN(10)))
		}
		p[o] = op
	}
	return p
}

func (m *model) join(p consumer.Position) {
	for o, op := range p {
		m.extFloor[o] = max(m.extFloor[o], op.Floor)
		for _, seq := range op.Acked {
			m.extAcked[consumer.MsgID{Origin: o, Seq: seq}] = true
		}
	}
}

type modelFailure struct{ msg string }

func (r *run) failf(format string, args ...any) {
	panic(modelFailure{fmt.Sprintf("step %d: ", r.step) + fmt.Sprintf(format, args...)})
}

func (r *run) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("%d %v: ", r.step, r.now.Sub(t0))+fmt.Sprintf(format, args...))
}

// runModel runs one seed and returns a hash of its trace.
func runModel(seed uint64, steps int, counts map[string]int) (trace uint64, err error) {
	r := newRun(seed, counts)
	defer func() {
		h := fnv.New64a()
		for _, l := range r.trace {
			h.Write([]byte(l))
		}
		trace = h.Sum64()
		if x := recover(); x != nil {
			f, ok := x.(modelFailure)
			if !ok {
				f.msg = fmt.Sprintf("step %d: panic: %v", r.step, x)
			}
			tail := r.trace[max(0, len(r.trace)-40):]
			err = fmt.Errorf("%s\nlast steps:\n\t%s", f.msg, strings.Join(tail, "\n\t"))
		}
	}()
	r.checkAll()
	for r.step = 1; r.step <= steps; r.step++ {
		r.randomStep()
		r.checkAll()
	}
	r.drain()
	return 0, nil
}

func (r *run) randomStep() {
	switch n := r.rng.IntN(100); {
	case n < 25:
		r.offer()
	case n < 30:
		r.attach()
	case n < 34:
		r.detach()
	case n < 54:
		r.next()
	case n < 84:
		r.reply()
	case n < 92:
		r.advance()
	case n < 95:
		r.deadLetters()
	case n < 97:
		r.resolve()
	case n < 98:
		r.skip()
	case n < 99:
		r.drop()
	default:
		r.merge()
	}
}

// skip is retention dropping messages of an origin before they were
// offered: the cursor moves past them, nothing pending changes.
func (r *run) skip() {
	o := origins[r.rng.IntN(len(origins))]
	cur := r.m.cursor[o]
	seq := cur + uint64(r.rng.IntN(4))
	if r.rng.IntN(5) == 0 && cur > 0 {
		seq = uint64(r.rng.IntN(int(cur))) // behind the cursor: nothing
	}
	if seq > cur {
		r.m.cursor[o] = seq
		r.m.stats.Skipped++
		r.counts["skip"]++
	}
	r.s.Skip(o, seq)
	r.logf("skip %s to %d", o, seq)
}

// drop is retention dropping a message after it was offered: mostly a
// pending one, else one that is resolved or was never offered.
func (r *run) drop() {
	var id consumer.MsgID
	if p := r.m.pending(); len(p) > 0 && r.rng.IntN(4) != 0 {
		id = p[r.rng.IntN(len(p))].id
	} else {
		o := origins[r.rng.IntN(len(origins))]
		id = consumer.MsgID{Origin: o, Seq: uint64(r.rng.IntN(int(r.m.cursor[o]) + 3))}
	}
	var want error
	mm := r.m.msgs[id]
	switch {
	case mm != nil && !mm.done:
		r.m.resolve(mm)
		r.m.stats.Dropped++
		r.counts["drop"]++
	case !r.m.claims(id):
		want = consumer.ErrUnknownDelivery
	}
	err := r.s.Drop(id)
	r.logf("drop %v: %v", id, err)
	r.sameErr("drop", err, want)
}

func (r *run) offer() {
	o := origins[r.rng.IntN(len(origins))]
	cur := r.m.cursor[o]
	seq := cur + 1 + uint64(r.rng.IntN(3))
	if n := r.rng.IntN(10); n == 0 && cur > 0 {
		seq = 1 + uint64(r.rng.IntN(int(cur))) // at or below the cursor
	}
	id := consumer.MsgID{Origin: o, Seq: seq}
	var want error
	switch {
	case r.m.msgs[id] != nil || r.m.claims(id):
		r.counts["offer.skip"]++
	case seq <= cur:
		want = consumer.ErrOrder
		r.counts["offer.order"]++
	case len(r.m.pending()) >= r.m.cfg.MaxAckPending:
		want = consumer.ErrFull
		r.counts["offer.full"]++
	default:
		r.m.msgs[id] = &mMsg{id: id, phase: mReady}
		r.m.stats.Offered++
		r.counts["offer"]++
	}
	if want == nil {
		r.m.cursor[o] = max(cur, seq)
	}
	err := r.s.Offer(id, r.now)
	r.logf("offer %v: %v", id, err)
	r.sameErr("offer", err, want)
}

func (r *run) sameErr(op string, got, want error) {
	if !errors.Is(got, want) || (got == nil) != (want == nil) {
		r.failf("%s: error %v, want %v", op, got, want)
	}
}

func (r *run) attach() {
	c := consumer.ConsumerID(1 + r.rng.IntN(4))
	bound := r.rng.IntN(4)
	if mc := r.m.cons[c]; mc != nil {
		mc.max = bound
		mc.lowered = bound > 0 && mc.inflight > bound
	} else {
		r.m.cons[c] = &mCons{max: bound}
	}
	r.s.Attach(c, bound)
	r.logf("attach c%d max %d", c, bound)
}

func (r *run) detach() {
	c := consumer.ConsumerID(1 + r.rng.IntN(4))
	if r.m.cons[c] != nil {
		for _, mm := range r.m.pending() {
			if mm.phase == mInFlight && mm.consumer == c {
				r.m.retry(mm)
				r.counts["detach"]++
			}
		}
		delete(r.m.cons, c)
	}
	r.s.Detach(c, r.now)
	r.logf("detach c%d", c)
}

func (r *run) next() {
	r.m.tick(r.now)
	ds := r.s.Next(r.now)
	r.logf("next: %v", show(ds))
	seen := map[string]uint64{}
	for _, d := range ds {
		mm := r.m.msgs[d.Msg]
		if mm == nil || mm.done || mm.phase != mReady {
			r.failf("delivered %v, not ready in the model", d.Msg)
		}
		// Per-origin order: the lowest ready seq of the origin goes first.
		for _, other := range r.m.pending() {
			if other.phase == mReady && other.id.Origin == d.Msg.Origin && other.id.Seq < d.Msg.Seq {
				r.failf("delivered %v before the ready %v", d.Msg, other.id)
			}
		}
		if d.Msg.Seq <= seen[d.Msg.Origin] {
			r.failf("delivered %v after %s:%d in one Next", d.Msg, d.Msg.Origin, seen[d.Msg.Origin])
		}
		seen[d.Msg.Origin] = d.Msg.Seq
		want, ok := r.m.pick()
		if !ok || d.Consumer != want {
			r.failf("delivered %v to c%d, want c%d (any: %v)", d.Msg, d.Consumer, want, ok)
		}
		if d.Attempt != mm.attempts+1 || d.Deadline != r.now.Add(r.m.cfg.AckWait) {
			r.failf("delivered %v attempt %d deadline %v, want attempt %d", d.Msg, d.Attempt, d.Deadline, mm.attempts+1)
		}
		mm.attempts++
		mm.phase, mm.consumer, mm.at = mInFlight, d.Consumer, d.Deadline
		r.m.cons[d.Consumer].inflight++
		r.m.stats.Delivered++
		r.counts["next.delivered"]++
		if mm.attempts > 1 {
			r.m.stats.Redelivered++
			r.counts["redelivered"]++
		}
	}
	if _, ok := r.m.pick(); ok {
		for _, mm := range r.m.pending() {
			if mm.phase == mReady {
				r.failf("Next left %v ready while a consumer has room", mm.id)
			}
		}
	}
}

// reply sends a random reply: mostly one that counts, else one that misses
// in one of the ways a reply can.
func (r *run) reply() {
	kinds := []string{"ack", "ack", "ack", "nak", "nak", "inprogress", "term"}
	kind := kinds[r.rng.IntN(len(kinds))]
	var inflight, all []*mMsg
	for _, mm := range r.m.pending() {
		all = append(all, mm)
		if mm.phase == mInFlight {
			inflight = append(inflight, mm)
		}
	}
	var (
		c       consumer.ConsumerID
		id      consumer.MsgID
		attempt int
	)
	switch {
	case len(inflight) > 0 && r.rng.IntN(4) != 0:
		mm := inflight[r.rng.IntN(len(inflight))]
		c, id, attempt = mm.consumer, mm.id, mm.attempts
	case len(all) > 0 && r.rng.IntN(3) != 0:
		mm := all[r.rng.IntN(len(all))]
		c, id, attempt = consumer.ConsumerID(1+r.rng.IntN(4)), mm.id, mm.attempts-1+r.rng.IntN(3)
	default:
		o := origins[r.rng.IntN(len(origins))]
		c, id, attempt = consumer.ConsumerID(1+r.rng.IntN(4)), consumer.MsgID{Origin: o, Seq: uint64(r.rng.IntN(int(r.m.cursor[o]) + 3))}, 1
	}
	want := r.m.replyErr(c, id, attempt, r.now)
	var err error
	var delay time.Duration
	switch kind {
	case "ack":
		err = r.s.Ack(c, id, attempt, r.now)
	case "term":
		err = r.s.Term(c, id, attempt, r.now)
	case "inprogress":
		err = r.s.InProgress(c, id, attempt, r.now)
	case "nak":
		if r.rng.IntN(2) == 0 {
			delay = time.Duration(r.rng.Int64N(int64(2 * r.m.cfg.AckWait)))
		}
		err = r.s.Nak(c, id, attempt, delay, r.now)
	}
	r.logf("%s c%d %v #%d (delay %v): %v", kind, c, id, attempt, delay, err)
	r.sameErr(kind, err, want)
	switch {
	case errors.Is(want, consumer.ErrUnknownDelivery):
		r.counts["reply.unknown"]++
		return
	case want != nil:
		r.counts["reply.expired"]++
		return
	}
	r.counts[kind]++
	mm := r.m.msgs[id]
	switch kind {
	case "ack":
		r.m.resolve(mm)
		r.m.stats.Acked++
	case "term":
		r.m.resolve(mm)
		r.m.stats.Terminated++
	case "inprogress":
		mm.at = r.now.Add(r.m.cfg.AckWait)
	case "nak":
		r.m.stats.Naks++
		if delay > 0 && !r.m.exhausted(mm) {
			r.m.unhold(mm)
			mm.phase, mm.at = mDelayed, r.now.Add(delay)
			r.counts["nak.delay"]++
		} else {
			r.m.retry(mm)
		}
	}
}

// advance moves the clock, often exactly to the next deadline, and ticks.
func (r *run) advance() {
	if d, ok := r.s.NextDeadline(); ok && r.rng.IntN(3) == 0 && d.After(r.now) {
		r.now = d
	} else {
		r.now = r.now.Add(time.Duration(r.rng.Int64N(int64(r.m.cfg.AckWait) * 3 / 2)))
	}
	if r.rng.IntN(2) == 0 {
		expired := r.m.stats.Expired
		r.m.tick(r.now)
		r.s.Tick(r.now)
		r.counts["expired"] += int(r.m.stats.Expired - expired)
		r.logf("tick")
	}
}

func (r *run) deadLetters() {
	var want []consumer.DeadLetter
	for _, mm := range r.m.pending() {
		if mm.phase == mDead && !mm.handed {
			want = append(want, consumer.DeadLetter{Msg: mm.id, Deliveries: mm.attempts})
			mm.handed = true
		}
	}
	got := r.s.DeadLetters()
	r.logf("dead letters: %v", got)
	slices.SortFunc(got, func(a, b consumer.DeadLetter) int { return cmpID(a.Msg, b.Msg) })
	if !slices.Equal(got, want) {
		r.failf("DeadLetters() = %v, want %v", got, want)
	}
	r.counts["dead"] += len(got)
}

func (r *run) resolve() {
	var dead []*mMsg
	for _, mm := range r.m.pending() {
		if mm.phase == mDead {
			dead = append(dead, mm)
		}
	}
	var id consumer.MsgID
	if len(dead) > 0 && r.rng.IntN(4) != 0 {
		id = dead[r.rng.IntN(len(dead))].id
	} else {
		o := origins[r.rng.IntN(len(origins))]
		id = consumer.MsgID{Origin: o, Seq: uint64(r.rng.IntN(int(r.m.cursor[o]) + 3))}
	}
	var want error
	mm := r.m.msgs[id]
	switch {
	case mm != nil && !mm.done && mm.phase == mDead:
		r.m.resolve(mm)
		r.m.stats.Resolved++
		r.counts["resolve"]++
	case !r.m.claims(id):
		want = consumer.ErrUnknownDelivery
	}
	err := r.s.Resolve(id)
	r.logf("resolve %v: %v", id, err)
	r.sameErr("resolve", err, want)
}

func (r *run) merge() {
	p := randomPosition(r.rng, r.m)
	r.m.join(p)
	for _, mm := range r.m.pending() {
		if r.m.extAcked[mm.id] || mm.id.Seq <= r.m.extFloor[mm.id.Origin] {
			r.m.resolve(mm)
			r.m.stats.Merged++
			r.counts["merge.dropped"]++
		}
	}
	r.s.Merge(p)
	r.counts["merge"]++
	r.logf("merge %v", p)
}

// checkAll compares the state with the model after a step.
func (r *run) checkAll() {
	if err := consumer.CheckInvariants(r.s); err != nil {
		r.failf("%v", err)
	}
	r.checkStats()
	r.checkPosition()
}

func (r *run) checkStats() {
	want := r.m.stats
	for _, mm := range r.m.pending() {
		want.Pending++
		switch mm.phase {
		case mReady:
			want.Ready++
		case mInFlight:
			want.InFlight++
		case mDelayed:
			want.Delayed++
		case mDead:
			want.Dead++
		}
	}
	want.Consumers = uint64(len(r.m.cons))
	got := r.s.Stats()
	if got != want {
		r.failf("Stats() =\n%+v, model\n%+v", got, want)
	}
	if got.Pending > uint64(r.m.cfg.MaxAckPending) || r.s.Room() != r.m.cfg.MaxAckPending-int(got.Pending) {
		r.failf("pending %d, room %d, MaxAckPending %d", got.Pending, r.s.Room(), r.m.cfg.MaxAckPending)
	}
	// Every offered message is pending or resolved; none vanished.
	if got.Offered != uint64(len(r.m.msgs)) {
		r.failf("offered %d, model %d", got.Offered, len(r.m.msgs))
	}
	for id, c := range r.m.cons {
		if c.max > 0 && c.inflight <= c.max {
			c.lowered = false
		}
		if c.max > 0 && c.inflight > c.max && !c.lowered {
			r.failf("c%d has %d in flight, bound %d", id, c.inflight, c.max)
		}
	}
}

func (r *run) checkPosition() {
	pos := r.s.Position()
	claims := func(id consumer.MsgID) bool {
		op, ok := pos[id.Origin]
		if !ok {
			return id.Seq == 0
		}
		_, found := slices.BinarySearch(op.Acked, id.Seq)
		return id.Seq <= op.Floor || found
	}
	for o, op := range pos {
		if !slices.IsSorted(op.Acked) || len(slices.Compact(slices.Clone(op.Acked))) != len(op.Acked) || len(op.Acked) > 0 && op.Acked[0] <= op.Floor {
			r.failf("position %s = %v: acked not sorted, unique and above the floor", o, op)
		}
		if prev, ok := r.prev[o]; ok && op.Floor < prev.Floor {
			r.failf("position %s floor went back from %d to %d", o, prev.Floor, op.Floor)
		}
		if op.Floor == 0 && len(op.Acked) == 0 {
			r.failf("position holds empty origin %s", o)
		}
	}
	for o, prev := range r.prev {
		for _, seq := range prev.Acked {
			if !claims(consumer.MsgID{Origin: o, Seq: seq}) {
				r.failf("position lost %s:%d", o, seq)
			}
		}
		if _, ok := pos[o]; !ok && prev.Floor > 0 {
			r.failf("position lost origin %s", o)
		}
	}
	r.prev = pos
	// Exactly the model's claims, for every seq up to past the cursor:
	// never a pending message, always a resolved one.
	for _, o := range origins {
		top := max(r.m.cursor[o], r.m.extFloor[o]) + 12
		floor := r.m.floor(o)
		for seq := uint64(0); seq <= top; seq++ {
			id := consumer.MsgID{Origin: o, Seq: seq}
			want := r.m.claimsWith(id, floor)
			if claims(id) != want || r.s.Acked(id) != want {
				r.failf("position claims %v: %v, Acked %v, model %v (pos %v)", id, claims(id), r.s.Acked(id), want, pos[o])
			}
			mm := r.m.msgs[id]
			if want && mm == nil && seq > max(r.m.cursor[o], r.m.extFloor[o]) && !r.m.extAcked[id] {
				r.failf("position claims %v, beyond what was offered or stored", id)
			}
		}
	}
	if d, ok := r.s.NextDeadline(); ok != (r.m.nextDeadline() != time.Time{}) || ok && d != r.m.nextDeadline() {
		r.failf("NextDeadline() = %v %v, model %v", d, ok, r.m.nextDeadline())
	}
}

func (m *model) nextDeadline() time.Time {
	var d time.Time
	for _, mm := range m.pending() {
		if (mm.phase == mInFlight || mm.phase == mDelayed) && (d.IsZero() || mm.at.Before(d)) {
			d = mm.at
		}
	}
	return d
}

// drain acks everything: at the end every offered message is resolved,
// none vanished.
func (r *run) drain() {
	r.step = -1
	for _, c := range slices.Sorted(mapKeys(r.m.cons)) {
		for _, mm := range r.m.pending() {
			if mm.phase == mInFlight && mm.consumer == c {
				r.m.retry(mm)
			}
		}
		delete(r.m.cons, c)
		r.s.Detach(c, r.now)
	}
	r.m.cons[100] = &mCons{}
	r.s.Attach(100, 0)
	for i := 0; r.s.Stats().Pending > 0; i++ {
		if i == 10 {
			r.failf("drain: %+v left after %d rounds", r.s.Stats(), i)
		}
		r.next()
		for _, mm := range r.m.pending() {
			if mm.phase == mInFlight {
				if err := r.s.Ack(100, mm.id, mm.attempts, r.now); err != nil {
					r.failf("drain: %v", err)
				}
				r.m.resolve(mm)
				r.m.stats.Acked++
			}
		}
		r.deadLetters()
		for _, mm := range r.m.pending() {
			if mm.phase == mDead {
				if err := r.s.Resolve(mm.id); err != nil {
					r.failf("drain: %v", err)
				}
				r.m.resolve(mm)
				r.m.stats.Resolved++
			}
		}
		r.now = r.now.Add(3 * r.m.cfg.AckWait) // past every nak delay
		r.checkAll()
	}
	for id, mm := range r.m.msgs {
		if !mm.done || !r.s.Acked(id) {
			r.failf("drain: %v not resolved", id)
		}
	}
}
