package psload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// LoopConfig is a closed-loop load: in every region, one publisher per
// topic publishes one message at a time and waits for its ack; the
// subscribers, opened first, measure how long each message took to reach
// them.
type LoopConfig struct {
	// Regions has a publisher per topic in each; a message's stamp names
	// its region by index, so at most 255.
	Regions []string `json:"regions"`
	// Topics each publisher of a region is one of; at most 255.
	Topics []string `json:"topics"`
	// Subscribers are opened before anything is published.
	Subscribers []Sub `json:"subscribers,omitempty"`
	// Warmup publishes per publisher come first and are not measured.
	Warmup int `json:"warmup"`
	// Count is how many measured publishes each publisher makes; with 0,
	// publishers run from StartAt (or the start) for Duration.
	Count    int           `json:"count,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// StartAt, when set, is when publishing begins (at once if it passed),
	// so that a caller can act at a known moment of the load.
	StartAt time.Time `json:"start_at,omitzero"`
	// Bytes is each message's size; default (and least) StampBytes.
	Bytes int `json:"bytes,omitempty"`
	// Timeout bounds each publish; default 10 s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxErrors ends a publisher after that many failed publishes; default 5.
	MaxErrors int `json:"max_errors,omitempty"`
	// Drain is how long subscribers may still take, after the last
	// publish, to receive every acknowledged measured message; default 5 s.
	Drain time.Duration `json:"drain,omitempty"`
	// Run tells this load's messages from earlier loads' (a durable
	// subscription may still hold some); 0 picks one at random.
	Run uint32 `json:"run,omitempty"`
	// Progress, if set, is called after each measured publish with how many
	// are done and how many the load makes (0 when it runs for Duration).
	// Calls are serialised.
	Progress func(done, total int) `json:"-"`
}

// PubSample is one publish.
type PubSample struct {
	Region string `json:"region"`
	Topic  string `json:"topic"`
	// At is when the publish began, in Unix nanoseconds.
	At int64 `json:"at"`
	// Ms is how long until its ack (or its failure).
	Ms     float64 `json:"ms"`
	Warmup bool    `json:"warmup,omitempty"`
	Err    string  `json:"err,omitempty"`
}

// DelSample is one measured message's first delivery to one subscriber.
type DelSample struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Topic string `json:"topic"`
	// At is when the message was published, in Unix nanoseconds.
	At int64 `json:"at"`
	// Ms is from its publish to its delivery.
	Ms float64 `json:"ms"`
}

// LoopResult is what a Loop measured.
type LoopResult struct {
	Run uint32 `json:"run"`
	// Start and End bound the publishing, in Unix nanoseconds.
	Start int64       `json:"start"`
	End   int64       `json:"end"`
	Pubs  []PubSample `json:"pubs"`
	Dels  []DelSample `json:"dels"`
	// Missing counts, per subscriber (Sub.String), the acknowledged
	// measured messages of its topic it had not received when the drain
	// ended; Duplicates those it received more than once.
	Missing    map[string]int `json:"missing,omitempty"`
	Duplicates map[string]int `json:"duplicates,omitempty"`
	// SubErrors are the errors that ended subscribers early.
	SubErrors []string `json:"sub_errors,omitempty"`
}

func (c *LoopConfig) withDefaults() (LoopConfig, error) {
	o := *c
	var errs []error
	if len(o.Regions) == 0 || len(o.Regions) > 255 {
		errs = append(errs, fmt.Errorf("psload: Regions: %d regions, want 1 to 255", len(o.Regions)))
	}
	if len(o.Topics) == 0 || len(o.Topics) > 255 {
		errs = append(errs, fmt.Errorf("psload: Topics: %d topics, want 1 to 255", len(o.Topics)))
	}
	if o.Count < 0 || o.Warmup < 0 || o.Duration < 0 {
		errs = append(errs, fmt.Errorf("psload: Count %d, Warmup %d, Duration %v: none may be negative", o.Count, o.Warmup, o.Duration))
	}
	if o.Count == 0 && o.Duration == 0 {
		errs = append(errs, errors.New("psload: give Count or Duration"))
	}
	for i, s := range o.Subscribers {
		if index(o.Topics, s.Topic) < 0 {
			errs = append(errs, fmt.Errorf("psload: Subscribers[%d]: topic %q is not in Topics", i, s.Topic))
		}
	}
	if o.Bytes < StampBytes {
		o.Bytes = StampBytes
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxErrors == 0 {
		o.MaxErrors = 5
	}
	if o.Drain == 0 {
		o.Drain = 5 * time.Second
	}
	for o.Run == 0 {
		o.Run = rand.Uint32()
	}
	return o, errors.Join(errs...)
}

func index(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

type msgKey struct {
	region, topic uint8
	seq           uint64
}

// loopState is what the goroutines of one Loop share.
type loopState struct {
	cfg LoopConfig
	mu  struct {
		sync.Mutex
		res  LoopResult
		done int
		// acked counts the acknowledged measured publishes per topic;
		// got the distinct measured messages per subscriber.
		acked []int
		got   []int
		seen  []map[msgKey]bool
	}
	// delivered is signalled (without blocking) at every delivery.
	delivered chan struct{}
}

// Loop runs the closed-loop load cfg against sys. It returns an error when
// the load could not start (a bad config, a subscription that did not
// open); failures while it runs are in the result.
func Loop(ctx context.Context, sys System, cfg LoopConfig) (*LoopResult, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st := &loopState{cfg: c, delivered: make(chan struct{}, 1)}
	st.mu.res.Run = c.Run
	st.mu.acked = make([]int, len(c.Topics))
	st.mu.got = make([]int, len(c.Subscribers))
	for range c.Subscribers {
		st.mu.seen = append(st.mu.seen, map[msgKey]bool{})
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
	if !c.StartAt.IsZero() {
		t := time.NewTimer(time.Until(c.StartAt))
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	start := time.Now()
	st.mu.res.Start = start.UnixNano()
	var pubs sync.WaitGroup
	for ri := range c.Regions {
		for ti := range c.Topics {
			pubs.Add(1)
			go func() {
				defer pubs.Done()
				st.publish(ctx, sys, start, ri, ti)
			}()
		}
	}
	pubs.Wait()
	st.mu.Lock()
	st.mu.res.End = time.Now().UnixNano()
	st.mu.Unlock()
	st.drain(ctx)
	stopSubs()
	subsWG.Wait()

	st.mu.Lock()
	defer st.mu.Unlock()
	res := st.mu.res
	for i, s := range c.Subscribers {
		if miss := st.mu.acked[index(c.Topics, s.Topic)] - st.mu.got[i]; miss > 0 {
			if res.Missing == nil {
				res.Missing = map[string]int{}
			}
			res.Missing[s.String()] = miss
		}
	}
	return &res, nil
}

// publish is one publisher's closed loop.
func (st *loopState) publish(ctx context.Context, sys System, start time.Time, ri, ti int) {
	c := &st.cfg
	region, topic := c.Regions[ri], c.Topics[ti]
	buf := payload(c.Bytes)
	errs := 0
	for seq := 0; ctx.Err() == nil && errs < c.MaxErrors; seq++ {
		warm := seq < c.Warmup
		if c.Count > 0 && seq >= c.Warmup+c.Count {
			return
		}
		t0 := time.Now()
		if c.Count == 0 && !warm && t0.Sub(start) >= c.Duration {
			return
		}
		// A fresh buffer per message: a system may keep it until acked.
		data := append([]byte(nil), buf...)
		Stamp{Run: c.Run, Region: uint8(ri), Topic: uint8(ti), Warmup: warm, Seq: uint64(seq), Sent: t0.UnixNano()}.Put(data)
		pctx, cancel := context.WithTimeout(ctx, c.Timeout)
		err := sys.Publish(pctx, region, topic, data)
		cancel()
		d := time.Since(t0)
		if ctx.Err() != nil {
			return
		}
		s := PubSample{Region: region, Topic: topic, At: t0.UnixNano(), Ms: msOf(d), Warmup: warm}
		if err != nil {
			errs++
			s.Err = err.Error()
		}
		st.mu.Lock()
		st.mu.res.Pubs = append(st.mu.res.Pubs, s)
		if !warm {
			if err == nil {
				st.mu.acked[ti]++
			}
			st.mu.done++
			if c.Progress != nil {
				c.Progress(st.mu.done, c.Count*len(c.Regions)*len(c.Topics))
			}
		}
		st.mu.Unlock()
	}
}

// consume reads one subscription until ctx ends, acking everything.
func (st *loopState) consume(ctx context.Context, i int, sub Subscription) {
	c := &st.cfg
	s := c.Subscribers[i]
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				st.mu.Lock()
				st.mu.res.SubErrors = append(st.mu.res.SubErrors, fmt.Sprintf("%s: %v", s, err))
				st.mu.Unlock()
			}
			return
		}
		now := time.Now()
		if m.Ack != nil {
			_ = m.Ack()
		}
		stamp, err := ReadStamp(m.Data)
		if err != nil || stamp.Run != c.Run || stamp.Warmup || int(stamp.Region) >= len(c.Regions) || int(stamp.Topic) >= len(c.Topics) {
			continue
		}
		k := msgKey{stamp.Region, stamp.Topic, stamp.Seq}
		st.mu.Lock()
		if st.mu.seen[i][k] {
			if st.mu.res.Duplicates == nil {
				st.mu.res.Duplicates = map[string]int{}
			}
			st.mu.res.Duplicates[s.String()]++
		} else {
			st.mu.seen[i][k] = true
			st.mu.got[i]++
			st.mu.res.Dels = append(st.mu.res.Dels, DelSample{From: c.Regions[stamp.Region], To: s.Region,
				Topic: c.Topics[stamp.Topic], At: stamp.Sent, Ms: msOf(now.Sub(time.Unix(0, stamp.Sent)))})
		}
		st.mu.Unlock()
		select {
		case st.delivered <- struct{}{}:
		default:
		}
	}
}

// drain waits until every subscriber has every acknowledged measured
// message of its topic, for at most cfg.Drain.
func (st *loopState) drain(ctx context.Context) {
	t := time.NewTimer(st.cfg.Drain)
	defer t.Stop()
	for {
		st.mu.Lock()
		all := true
		for i, s := range st.cfg.Subscribers {
			if st.mu.got[i] < st.mu.acked[index(st.cfg.Topics, s.Topic)] {
				all = false
			}
		}
		st.mu.Unlock()
		if all {
			return
		}
		select {
		case <-st.delivered:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
