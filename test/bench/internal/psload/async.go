package psload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// AsyncConfig is a window of asynchronous publishing: a publisher per
// region, InFlight publishes in flight between them, and durable
// subscribers that ack what they receive (one of them stopping for a while
// when Stall says so).
type AsyncConfig struct {
	// Regions have a publisher each; at most 255.
	Regions []string `json:"regions"`
	Topic   string   `json:"topic"`
	// InFlight is how many publishes may await their acks at once, over
	// all publishers.
	InFlight int `json:"in_flight"`
	// Bytes is each message's size; default (and least) StampBytes.
	Bytes int `json:"bytes,omitempty"`
	// Warm is unmeasured; Window follows it and is measured.
	Warm   time.Duration `json:"warm"`
	Window time.Duration `json:"window"`
	// Subscribers are opened before anything is published.
	Subscribers []Sub `json:"subscribers,omitempty"`
	// Stall, if set, stops one subscriber acking for a while.
	Stall *Stall `json:"stall,omitempty"`
	// Drain is how long subscribers may take, after the last ack, to
	// receive every acknowledged message; default 10 s.
	Drain time.Duration `json:"drain,omitempty"`
	// Timeout bounds the wait for one ack; default 30 s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Run tells this load's messages from earlier loads'; 0 picks one.
	Run uint32 `json:"run,omitempty"`
}

// Stall stops a subscriber acking: from After (since publishing began)
// for For, it keeps receiving but holds every delivery unacked; then it
// acks what it holds and carries on.
type Stall struct {
	// Subscriber indexes AsyncConfig.Subscribers.
	Subscriber int           `json:"subscriber"`
	After      time.Duration `json:"after"`
	For        time.Duration `json:"for"`
}

// SubStats is one subscriber of an Async load.
type SubStats struct {
	Sub
	// InWindow counts deliveries received inside the measured window.
	InWindow int     `json:"in_window"`
	PerS     float64 `json:"per_s"`
	// Distinct counts the load's distinct messages received in all;
	// Redelivered the deliveries of a message received before.
	Distinct    int `json:"distinct"`
	Redelivered int `json:"redelivered"`
	// Lag is how many acknowledged messages it had not received when the
	// drain ended.
	Lag int `json:"lag"`
	// MaxHeld is the most deliveries it held unacked during a stall.
	MaxHeld int `json:"max_held,omitempty"`
}

// AsyncResult is what an Async load measured.
type AsyncResult struct {
	Run uint32 `json:"run"`
	// Start, WindowFrom, WindowTo, StallFrom and StallTo are Unix
	// nanoseconds; the stall's are 0 without one.
	Start      int64 `json:"start"`
	WindowFrom int64 `json:"window_from"`
	WindowTo   int64 `json:"window_to"`
	StallFrom  int64 `json:"stall_from,omitempty"`
	StallTo    int64 `json:"stall_to,omitempty"`
	// Published counts the acks that arrived inside the window, PerS their
	// rate; Total every ack of the load.
	Published int     `json:"published"`
	PerS      float64 `json:"per_s"`
	Total     int     `json:"total"`
	// P50Ms and P99Ms are of the publish-to-ack times inside the window.
	P50Ms      float64    `json:"p50_ms"`
	P99Ms      float64    `json:"p99_ms"`
	Errors     int        `json:"errors"`
	FirstError string     `json:"first_error,omitempty"`
	Subs       []SubStats `json:"subs"`
	SubErrors  []string   `json:"sub_errors,omitempty"`
}

func (c *AsyncConfig) withDefaults() (AsyncConfig, error) {
	o := *c
	var errs []error
	if len(o.Regions) == 0 || len(o.Regions) > 255 {
		errs = append(errs, fmt.Errorf("psload: Regions: %d regions, want 1 to 255", len(o.Regions)))
	}
	if o.InFlight < 1 {
		errs = append(errs, fmt.Errorf("psload: InFlight: %d, want at least 1", o.InFlight))
	}
	if o.Window <= 0 || o.Warm < 0 {
		errs = append(errs, fmt.Errorf("psload: Warm %v, Window %v: want a positive window", o.Warm, o.Window))
	}
	for i, s := range o.Subscribers {
		if s.Topic != o.Topic {
			errs = append(errs, fmt.Errorf("psload: Subscribers[%d]: topic %q, the load publishes to %q", i, s.Topic, o.Topic))
		}
	}
	if o.Stall != nil && (o.Stall.Subscriber < 0 || o.Stall.Subscriber >= len(o.Subscribers) || o.Stall.For <= 0) {
		errs = append(errs, fmt.Errorf("psload: Stall: subscriber %d of %d for %v", o.Stall.Subscriber, len(o.Subscribers), o.Stall.For))
	}
	if o.Bytes < StampBytes {
		o.Bytes = StampBytes
	}
	if o.Drain == 0 {
		o.Drain = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	for o.Run == 0 {
		o.Run = rand.Uint32()
	}
	return o, errors.Join(errs...)
}

// bitset records which seqs of one publisher a subscriber received.
type bitset []uint64

// add sets bit i and reports whether it was clear.
func (b *bitset) add(i uint64) bool {
	w := int(i / 64)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w-len(*b)+1+len(*b)/2)...)
	}
	m := uint64(1) << (i % 64)
	if (*b)[w]&m != 0 {
		return false
	}
	(*b)[w] |= m
	return true
}

type inflight struct {
	f  Future
	t0 time.Time
}

type asyncState struct {
	cfg                        AsyncConfig
	start, from, to            time.Time
	stallFrom, stallTo, stopAt time.Time
	sem                        chan struct{}
	delivered                  chan struct{}
	mu                         struct {
		sync.Mutex
		res  AsyncResult
		lat  []time.Duration
		seen [][]bitset // per subscriber, per region
	}
}

// Async runs the asynchronous load cfg against sys. It returns an error
// when the load could not start; failures while it runs are in the result.
func Async(ctx context.Context, sys System, cfg AsyncConfig) (*AsyncResult, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st := &asyncState{cfg: c, sem: make(chan struct{}, c.InFlight), delivered: make(chan struct{}, 1)}
	st.mu.res.Run = c.Run
	for _, s := range c.Subscribers {
		st.mu.res.Subs = append(st.mu.res.Subs, SubStats{Sub: s})
		st.mu.seen = append(st.mu.seen, make([]bitset, len(c.Regions)))
	}
	var subs []Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Close()
		}
	}()
	for _, s := range c.Subscribers {
		sub, err := sys.Subscribe(ctx, s.Region, s.Topic, s.Durable)
		if err != nil {
			return nil, fmt.Errorf("psload: subscribe %s: %w", s, err)
		}
		subs = append(subs, sub)
	}
	st.start = time.Now()
	st.from, st.to = st.start.Add(c.Warm), st.start.Add(c.Warm+c.Window)
	st.stopAt = st.to
	if c.Stall != nil {
		st.stallFrom = st.start.Add(c.Stall.After)
		st.stallTo = st.stallFrom.Add(c.Stall.For)
		st.mu.res.StallFrom, st.mu.res.StallTo = st.stallFrom.UnixNano(), st.stallTo.UnixNano()
	}
	st.mu.res.Start, st.mu.res.WindowFrom, st.mu.res.WindowTo = st.start.UnixNano(), st.from.UnixNano(), st.to.UnixNano()

	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var subsWG sync.WaitGroup
	for i, sub := range subs {
		subsWG.Add(1)
		go func() {
			defer subsWG.Done()
			st.consume(subCtx, i, sub)
		}()
	}
	var pubs sync.WaitGroup
	for ri := range c.Regions {
		q := make(chan inflight, c.InFlight)
		pubs.Add(2)
		go func() {
			defer pubs.Done()
			defer close(q)
			st.dispatch(ctx, sys, ri, q)
		}()
		go func() {
			defer pubs.Done()
			st.collect(ctx, q)
		}()
	}
	pubs.Wait()
	st.drain(ctx)
	stopSubs()
	subsWG.Wait()

	st.mu.Lock()
	defer st.mu.Unlock()
	res := st.mu.res
	res.Subs = slices.Clone(res.Subs)
	res.PerS = float64(res.Published) / c.Window.Seconds()
	res.P50Ms, res.P99Ms = msOf(percentile(st.mu.lat, .5)), msOf(percentile(st.mu.lat, .99))
	for i := range res.Subs {
		s := &res.Subs[i]
		s.PerS = float64(s.InWindow) / c.Window.Seconds()
		s.Lag = max(0, res.Total-s.Distinct)
	}
	return &res, nil
}

// dispatch sends region ri's publishes while the window lasts, each once a
// slot of the shared window is free, and queues their futures in order.
func (st *asyncState) dispatch(ctx context.Context, sys System, ri int, q chan<- inflight) {
	c := &st.cfg
	buf := payload(c.Bytes)
	errs := 0
	for seq := uint64(0); ; seq++ {
		select {
		case st.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		if !t0.Before(st.stopAt) || errs > 1000 {
			<-st.sem
			return
		}
		data := append([]byte(nil), buf...)
		Stamp{Run: c.Run, Region: uint8(ri), Seq: seq, Sent: t0.UnixNano()}.Put(data)
		f, err := sys.PublishAsync(ctx, c.Regions[ri], c.Topic, data)
		if err != nil {
			<-st.sem
			errs++
			st.fail(err)
			continue
		}
		q <- inflight{f, t0}
	}
}

func (st *asyncState) fail(err error) {
	st.mu.Lock()
	st.mu.res.Errors++
	if st.mu.res.FirstError == "" {
		st.mu.res.FirstError = err.Error()
	}
	st.mu.Unlock()
}

// collect waits for the futures of one publisher in order, freeing a slot
// of the window for each.
func (st *asyncState) collect(ctx context.Context, q <-chan inflight) {
	for it := range q {
		wctx, cancel := context.WithTimeout(ctx, st.cfg.Timeout)
		err := it.f.Wait(wctx)
		cancel()
		now := time.Now()
		<-st.sem
		if err != nil {
			st.fail(err)
			continue
		}
		st.mu.Lock()
		st.mu.res.Total++
		if !now.Before(st.from) && now.Before(st.to) {
			st.mu.res.Published++
			st.mu.lat = append(st.mu.lat, now.Sub(it.t0))
		}
		st.mu.Unlock()
	}
}

// consume reads subscriber i until ctx ends; during its stall it holds
// what it receives unacked.
func (st *asyncState) consume(ctx context.Context, i int, sub Subscription) {
	c := &st.cfg
	stalls := c.Stall != nil && c.Stall.Subscriber == i
	var held []func() error
	release := func() {
		for _, ack := range held {
			if ack != nil {
				_ = ack()
			}
		}
		held = held[:0]
	}
	for {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		inStall := stalls && time.Now().Before(st.stallTo) && !time.Now().Before(st.stallFrom)
		if stalls && time.Now().Before(st.stallFrom) {
			// Wake at the stall's start even if nothing arrives.
			nctx, cancel = context.WithDeadline(ctx, st.stallFrom)
		} else if inStall {
			nctx, cancel = context.WithDeadline(ctx, st.stallTo)
		}
		m, err := sub.Next(nctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				// The drain ends after the stall: ack what is held
				// before the subscription closes.
				release()
				return
			}
			if nctx.Err() != nil { // a stall boundary
				if !time.Now().Before(st.stallTo) {
					release()
				}
				continue
			}
			st.mu.Lock()
			st.mu.res.SubErrors = append(st.mu.res.SubErrors, fmt.Sprintf("%s: %v", c.Subscribers[i], err))
			st.mu.Unlock()
			return
		}
		now := time.Now()
		if stalls && !now.Before(st.stallFrom) && now.Before(st.stallTo) {
			held = append(held, m.Ack)
		} else {
			if len(held) > 0 {
				release()
			}
			if m.Ack != nil {
				_ = m.Ack()
			}
		}
		stamp, err := ReadStamp(m.Data)
		if err != nil || stamp.Run != c.Run || int(stamp.Region) >= len(c.Regions) {
			continue
		}
		st.mu.Lock()
		s := &st.mu.res.Subs[i]
		if st.mu.seen[i][stamp.Region].add(stamp.Seq) {
			s.Distinct++
		} else {
			s.Redelivered++
		}
		if !now.Before(st.from) && now.Before(st.to) {
			s.InWindow++
		}
		s.MaxHeld = max(s.MaxHeld, len(held))
		st.mu.Unlock()
		select {
		case st.delivered <- struct{}{}:
		default:
		}
	}
}

// drain waits until every subscriber has every acknowledged message, for
// at most cfg.Drain (counted from the end of its stall, if that is later).
func (st *asyncState) drain(ctx context.Context) {
	until := time.Now().Add(st.cfg.Drain)
	if st.cfg.Stall != nil {
		until = later(until, st.stallTo.Add(st.cfg.Drain))
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for {
		st.mu.Lock()
		all := true
		for _, s := range st.mu.res.Subs {
			if s.Distinct < st.mu.res.Total {
				all = false
			}
		}
		st.mu.Unlock()
		if all && (st.cfg.Stall == nil || !time.Now().Before(st.stallTo)) {
			return
		}
		wake := st.delivered
		var stallEnd <-chan time.Time
		if all {
			wake = nil
			stallEnd = time.After(time.Until(st.stallTo))
		}
		select {
		case <-wake:
		case <-stallEnd:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// percentile is the q-quantile of ds, nearest rank; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}
