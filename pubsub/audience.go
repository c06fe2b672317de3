package pubsub

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// audience follows which sites have live subscribers of which topics, and
// gives each `audience` topic of this site's stream a versioned publish-ack
// predicate: persisted at this site and at every site with live
// subscribers. When the set changes, the seqs the old version released
// stay released and every later seq waits for the new one (DESIGN.md §3),
// so the topic's frontier, max(released, new), never moves back.
//
// Sites tell each other their own set on Channel when it changes and every
// AudienceEvery; a site that is disconnected, or silent for three periods,
// counts as having no live subscribers: a publisher never waits on a
// region nobody can read from.
type audience struct {
	b    *Broker
	wake chan struct{} // something changed: send and recompute
	mu   struct {
		sync.Mutex
		local  map[string]int // topic → live subscribers here
		remote map[string]remoteSet
		topics map[string]*audTopic
	}
}

type remoteSet struct {
	topics map[string]bool
	heard  time.Time
}

// audTopic is one audience topic's predicate at this origin.
type audTopic struct {
	version  uint64
	sites    []string
	pred     string
	released uint64        // what earlier versions released
	changed  chan struct{} // closed when the next version replaces this one
}

func newAudience(b *Broker) *audience {
	a := &audience{b: b, wake: make(chan struct{}, 1)}
	a.mu.local = map[string]int{}
	a.mu.remote = map[string]remoteSet{}
	a.mu.topics = map[string]*audTopic{}
	return a
}

func (a *audience) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// start runs the loop that broadcasts this site's set and recomputes the
// audiences.
func (a *audience) start(ctx context.Context) {
	a.b.goBackground(func() {
		t := time.NewTicker(a.b.cfg.AudienceEvery)
		defer t.Stop()
		for {
			a.broadcast()
			a.refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-a.wake:
			}
		}
	})
}

// addLocal counts a live subscriber of topic at this site arriving (+1) or
// leaving (-1).
func (a *audience) addLocal(topic string, d int) {
	a.mu.Lock()
	before := a.mu.local[topic] > 0
	a.mu.local[topic] += d
	if a.mu.local[topic] <= 0 {
		delete(a.mu.local, topic)
	}
	after := a.mu.local[topic] > 0
	a.mu.Unlock()
	a.b.metrics.liveSubscribers(topic, d)
	if before != after {
		a.signal()
	}
}

// encode: topics, each a uvarint length and the name.
func (a *audience) encode() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	var buf []byte
	for _, t := range slices.Sorted(maps.Keys(a.mu.local)) {
		buf = binary.AppendUvarint(buf, uint64(len(t)))
		buf = append(buf, t...)
	}
	return buf
}

func decodeTopics(b []byte) (map[string]bool, error) {
	out := map[string]bool{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, fmt.Errorf("pubsub: bad audience frame")
		}
		out[string(b[k:k+int(n)])] = true
		b = b[k+int(n):]
	}
	return out, nil
}

func (a *audience) broadcast() {
	frame := a.encode()
	for _, s := range a.b.node.Schema().Sites {
		if s != a.b.node.Site() {
			_ = a.b.node.SendChannel(s, Channel, frame) // lost while down; repeated
		}
	}
}

// frame receives a peer's set; it runs on the transport's goroutine.
func (a *audience) frame(from string, frame []byte) {
	topics, err := decodeTopics(frame)
	if err != nil {
		a.b.log.Warn("bad audience frame", "from", from, "error", err)
		return
	}
	a.mu.Lock()
	old := a.mu.remote[from]
	a.mu.remote[from] = remoteSet{topics: topics, heard: a.b.cfg.Now()}
	a.mu.Unlock()
	if !sameSet(old.topics, topics) {
		a.signal()
	}
}

func sameSet(x, y map[string]bool) bool {
	if len(x) != len(y) {
		return false
	}
	for k := range x {
		if !y[k] {
			return false
		}
	}
	return true
}

// sitesLocked computes a topic's audience now: this site, and every
// connected site that said recently it has live subscribers of it.
func (a *audience) sitesLocked(topic string, connected map[string]bool, now time.Time) []string {
	self := a.b.node.Site()
	var sites []string
	for _, s := range a.b.node.Schema().Sites {
		if s == self {
			sites = append(sites, s)
			continue
		}
		r, ok := a.mu.remote[s]
		if ok && r.topics[topic] && connected[s] && now.Sub(r.heard) <= 3*a.b.cfg.AudienceEvery {
			sites = append(sites, s)
		}
	}
	return sites
}

func audiencePredicate(sites []string) string {
	parts := make([]string, len(sites))
	for i, s := range sites {
		parts[i] = fmt.Sprintf("persisted(%q)", s)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "min(" + strings.Join(parts, ", ") + ")"
}

// current returns the topic's predicate, creating its first version.
func (a *audience) current(topic string) *audTopic {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.mu.topics[topic]; ok {
		return t
	}
	sites := a.sitesLocked(topic, a.b.node.Connected(), a.b.cfg.Now())
	t := &audTopic{version: 1, sites: sites, pred: audiencePredicate(sites), changed: make(chan struct{})}
	a.mu.topics[topic] = t
	return t
}

// refresh moves every audience topic whose set changed to a new version.
func (a *audience) refresh(ctx context.Context) {
	connected := a.b.node.Connected()
	now := a.b.cfg.Now()
	a.mu.Lock()
	var moved []*audTopic
	var next []*audTopic
	var names []string
	for name, t := range a.mu.topics {
		sites := a.sitesLocked(name, connected, now)
		if !slices.Equal(sites, t.sites) {
			moved = append(moved, t)
			next = append(next, &audTopic{version: t.version + 1, sites: sites, pred: audiencePredicate(sites), changed: make(chan struct{})})
			names = append(names, name)
		}
	}
	a.mu.Unlock()
	own := stabilizer.StreamID{Origin: a.b.node.Site(), Name: Stream}
	for i, t := range moved {
		// What the old version released stays released.
		released := t.released
		if f, err := a.b.node.Frontier(ctx, own, t.pred); err == nil {
			released = max(released, f.Seq)
		}
		next[i].released = released
		a.mu.Lock()
		a.mu.topics[names[i]] = next[i]
		a.mu.Unlock()
		close(t.changed)
		a.b.log.Debug("audience changed", "topic", names[i], "version", next[i].version, "sites", next[i].sites, "released", released)
	}
}

// wait waits until the topic's audience frontier on this site's stream
// covers seq, following the versions as they change.
func (a *audience) wait(ctx context.Context, topic string, seq uint64) (stabilizer.FrontierState, error) {
	own := stabilizer.StreamID{Origin: a.b.node.Site(), Name: Stream}
	for {
		t := a.current(topic)
		if seq <= t.released {
			return stabilizer.FrontierState{Stream: own, Predicate: "audience", Seq: t.released, Version: t.version - 1}, nil
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-t.changed:
				cancel()
			case <-wctx.Done():
			}
		}()
		err := a.b.node.WaitFor(wctx, own, t.pred, seq)
		cancel()
		if err == nil {
			return a.frontier(ctx, topic)
		}
		select {
		case <-t.changed:
			continue // a new version: wait for it instead
		default:
		}
		f, _ := a.frontier(context.WithoutCancel(ctx), topic)
		return f, err
	}
}

// frontier is the topic's audience frontier: max(released, current).
func (a *audience) frontier(ctx context.Context, topic string) (stabilizer.FrontierState, error) {
	t := a.current(topic)
	own := stabilizer.StreamID{Origin: a.b.node.Site(), Name: Stream}
	f, err := a.b.node.Frontier(ctx, own, t.pred)
	if err != nil {
		return f, err
	}
	out := stabilizer.FrontierState{Stream: own, Predicate: "audience", Seq: max(f.Seq, t.released), Version: t.version, HLC: f.HLC}
	return out, nil
}

// describe returns a topic's audience as this site knows it.
func (a *audience) describe(topic string) ([]string, uint64) {
	a.mu.Lock()
	t, ok := a.mu.topics[topic]
	a.mu.Unlock()
	if !ok {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.sitesLocked(topic, a.b.node.Connected(), a.b.cfg.Now()), 0
	}
	return t.sites, t.version
}
