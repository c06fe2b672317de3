package psload

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSystem is an in-memory pub/sub: a publish is delivered at once to
// every durable subscription of its topic; durable subscriptions keep what
// arrives while no consumer reads them.
type fakeSystem struct {
	mu struct {
		sync.Mutex
		durables map[string]chan Msg // by topic/durable
		acks     map[string]int
		pubs     int
	}
	// failAfter fails every publish after that many (0: never).
	failAfter int
	// dupEvery delivers every n-th message twice (0: never).
	dupEvery int
}

func newFake() *fakeSystem {
	f := &fakeSystem{}
	f.mu.durables = map[string]chan Msg{}
	f.mu.acks = map[string]int{}
	return f
}

func (f *fakeSystem) CreateTopic(context.Context, Topic) error { return nil }

func (f *fakeSystem) durable(topic, name string) chan Msg {
	k := topic + "/" + name
	ch, ok := f.mu.durables[k]
	if !ok {
		ch = make(chan Msg, 1<<16)
		f.mu.durables[k] = ch
	}
	return ch
}

func (f *fakeSystem) Publish(_ context.Context, region, topic string, data []byte) error {
	type target struct {
		ch  chan Msg
		ack func() error
	}
	var to []target
	f.mu.Lock()
	f.mu.pubs++
	if f.failAfter > 0 && f.mu.pubs > f.failAfter {
		f.mu.Unlock()
		return errors.New("fake: refused")
	}
	dup := f.dupEvery > 0 && f.mu.pubs%f.dupEvery == 0
	for k, ch := range f.mu.durables {
		if strings.HasPrefix(k, topic+"/") {
			to = append(to, target{ch, func() error {
				f.mu.Lock()
				f.mu.acks[k]++
				f.mu.Unlock()
				return nil
			}})
		}
	}
	f.mu.Unlock()
	for _, x := range to {
		x.ch <- Msg{Data: data, Ack: x.ack}
		if dup {
			x.ch <- Msg{Data: data, Ack: x.ack}
		}
	}
	return nil
}

type doneFuture struct{ err error }

func (d doneFuture) Wait(context.Context) error { return d.err }

func (f *fakeSystem) PublishAsync(ctx context.Context, region, topic string, data []byte) (Future, error) {
	return doneFuture{f.Publish(ctx, region, topic, data)}, nil
}

type fakeSub struct{ ch chan Msg }

func (s fakeSub) Next(ctx context.Context) (Msg, error) {
	select {
	case m := <-s.ch:
		return m, nil
	case <-ctx.Done():
		return Msg{}, ctx.Err()
	}
}

func (fakeSub) Close() error { return nil }

func (f *fakeSystem) Subscribe(_ context.Context, region, topic, durable string) (Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeSub{f.durable(topic, durable)}, nil
}

func (f *fakeSystem) Close() error { return nil }

func TestStamp(t *testing.T) {
	s := Stamp{Run: 7, Region: 2, Topic: 3, Warmup: true, Seq: 1 << 40, Sent: time.Unix(1764400000, 123).UnixNano()}
	buf := payload(64)
	s.Put(buf)
	got, err := ReadStamp(buf)
	if err != nil || got != s {
		t.Fatalf("ReadStamp = %+v, %v; want %+v", got, err, s)
	}
	for _, bad := range [][]byte{nil, buf[:StampBytes-1], append([]byte("xxxx"), buf[4:]...)} {
		if _, err := ReadStamp(bad); !errors.Is(err, ErrNoStamp) {
			t.Errorf("ReadStamp(%q) = %v, want ErrNoStamp", bad, err)
		}
	}
	if n := len(payload(3)); n != StampBytes {
		t.Errorf("payload(3) is %d bytes, want StampBytes", n)
	}
}

func TestLoop(t *testing.T) {
	f := newFake()
	f.dupEvery = 7
	regions, topics := []string{"a", "b"}, []string{"t1", "t2"}
	var subs []Sub
	for _, r := range regions {
		for _, tp := range topics {
			subs = append(subs, Sub{Region: r, Topic: tp, Durable: "d-" + r})
		}
	}
	// An earlier run's message that a durable still holds is not counted.
	old := payload(32)
	Stamp{Run: 1, Region: 0, Topic: 0, Sent: time.Now().Add(-time.Hour).UnixNano()}.Put(old)
	f.mu.Lock()
	f.durable("t1", "d-a") <- Msg{Data: old}
	f.mu.Unlock()
	var progress []int
	res, err := Loop(context.Background(), f, LoopConfig{Regions: regions, Topics: topics, Subscribers: subs, Warmup: 1, Count: 5, Run: 2,
		Progress: func(done, total int) {
			if total != 20 {
				t.Errorf("progress total %d, want 20", total)
			}
			progress = append(progress, done)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pubs) != 24 || len(progress) != 20 || progress[19] != 20 {
		t.Fatalf("%d publishes, progress %v; want 24 and 1..20", len(res.Pubs), progress)
	}
	warm := 0
	for _, p := range res.Pubs {
		if p.Warmup {
			warm++
		}
		if p.Err != "" || p.At == 0 {
			t.Errorf("publish %+v", p)
		}
	}
	if warm != 4 {
		t.Errorf("%d warm-up publishes, want 4", warm)
	}
	// 10 measured messages per topic, each to the 2 subscribers of its topic.
	if len(res.Dels) != 40 || len(res.Missing) != 0 {
		t.Fatalf("%d deliveries, missing %v; want 40 and none", len(res.Dels), res.Missing)
	}
	pairs := map[string]int{}
	for _, d := range res.Dels {
		pairs[d.From+">"+d.To+" "+d.Topic]++
		if d.Ms < 0 || d.Ms > 60_000 {
			t.Errorf("delivery %+v", d)
		}
	}
	for _, k := range []string{"a>a t1", "a>b t1", "b>a t2", "b>b t2"} {
		if pairs[k] != 5 {
			t.Errorf("%s: %d deliveries, want 5 (%v)", k, pairs[k], pairs)
		}
	}
	dups := 0
	for _, n := range res.Duplicates {
		dups += n
	}
	if dups == 0 {
		t.Errorf("no duplicates counted, though the fake sent some")
	}
	if res.Start == 0 || res.End < res.Start {
		t.Errorf("start %d, end %d", res.Start, res.End)
	}
}

// TestLoopErrors: a publisher stops after MaxErrors failures, and the
// subscribers miss nothing they were owed.
func TestLoopErrors(t *testing.T) {
	f := newFake()
	f.failAfter = 3
	res, err := Loop(context.Background(), f, LoopConfig{Regions: []string{"a"}, Topics: []string{"t"}, Count: 100, MaxErrors: 2,
		Subscribers: []Sub{{Region: "a", Topic: "t", Durable: "d"}}, Drain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, p := range res.Pubs {
		if p.Err != "" {
			failed++
		}
	}
	if len(res.Pubs) != 5 || failed != 2 || len(res.Dels) != 3 || len(res.Missing) != 0 {
		t.Fatalf("%d publishes (%d failed), %d deliveries, missing %v; want 5 (2), 3, none", len(res.Pubs), failed, len(res.Dels), res.Missing)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := Loop(context.Background(), newFake(), LoopConfig{Topics: []string{"t"}, Subscribers: []Sub{{Topic: "u"}}})
	for _, want := range []string{"Regions: 0 regions", "give Count or Duration", `Subscribers[0]: topic "u" is not in Topics`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Loop error %v lacks %q", err, want)
		}
	}
	_, err = Async(context.Background(), newFake(), AsyncConfig{Regions: []string{"a"}, Topic: "t", Stall: &Stall{Subscriber: 1, For: time.Second}})
	for _, want := range []string{"InFlight: 0", "want a positive window", "Stall: subscriber 1 of 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Async error %v lacks %q", err, want)
		}
	}
}

// TestAsync: every acknowledged message reaches every subscriber, the one
// that stalls too, and that one held deliveries unacked, then acked them.
func TestAsync(t *testing.T) {
	f := newFake()
	subs := []Sub{{Region: "a", Topic: "t", Durable: "da"}, {Region: "b", Topic: "t", Durable: "db"}}
	window := 40 * time.Millisecond
	res, err := Async(context.Background(), f, AsyncConfig{Regions: []string{"a", "b"}, Topic: "t", InFlight: 4, Window: window,
		Subscribers: subs, Stall: &Stall{Subscriber: 1, For: window}, Drain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total == 0 || res.Published > res.Total || res.Errors != 0 {
		t.Fatalf("total %d, in window %d, errors %d (%s)", res.Total, res.Published, res.Errors, res.FirstError)
	}
	for _, s := range res.Subs {
		if s.Distinct != res.Total || s.Lag != 0 {
			t.Errorf("%s: %d distinct, lag %d; want %d, 0", s.Sub, s.Distinct, s.Lag, res.Total)
		}
	}
	if res.Subs[1].MaxHeld == 0 || res.Subs[0].MaxHeld != 0 {
		t.Errorf("held: %d and %d, want 0 and some", res.Subs[0].MaxHeld, res.Subs[1].MaxHeld)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range []string{"t/da", "t/db"} {
		if f.mu.acks[k] != res.Total {
			t.Errorf("%s: %d acks, want %d", k, f.mu.acks[k], res.Total)
		}
	}
	if res.StallTo-res.StallFrom != window.Nanoseconds() || res.WindowTo-res.WindowFrom != window.Nanoseconds() {
		t.Errorf("stall %d..%d, window %d..%d", res.StallFrom, res.StallTo, res.WindowFrom, res.WindowTo)
	}
}

func TestBitset(t *testing.T) {
	var b bitset
	for _, i := range []uint64{0, 63, 64, 1000, 5} {
		if !b.add(i) {
			t.Errorf("add(%d) first time: false", i)
		}
	}
	for _, i := range []uint64{0, 63, 64, 1000, 5} {
		if b.add(i) {
			t.Errorf("add(%d) again: true", i)
		}
	}
	if !b.add(6) {
		t.Error("add(6): false")
	}
}
