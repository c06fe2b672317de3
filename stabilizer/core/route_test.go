package core_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// routeNet is three cores with routed bulk streams s0 and s1 (stripes 0
// and 1), a network that delivers everything at once, bulk stores that
// sync at once, and a count of each entry's copies received per site.
type routeNet struct {
	t      *testing.T
	cores  map[string]*core.Core
	stores map[string]*simStore
	// got counts the data entries each site received, per (stream, seq);
	// sent, per (from, to, stream) the entries sent.
	got  map[string]map[string]int
	sent map[[3]string]int
	down map[string]bool
	// cut drops messages from one site to another, both still connected.
	cut  map[[2]string]bool
	tick int64
}

func newRouteNet(t *testing.T) *routeNet {
	schema := &frontier.Schema{Sites: []string{"a", "b", "c"}}
	n := &routeNet{t: t, cores: map[string]*core.Core{}, stores: map[string]*simStore{},
		got: map[string]map[string]int{}, sent: map[[3]string]int{}, down: map[string]bool{}, cut: map[[2]string]bool{}}
	for _, site := range schema.Sites {
		n.stores[site] = newStore()
		c, err := core.New(core.Config{Site: site, Schema: schema, Storage: n.stores[site],
			BulkStreams: []string{"s0", "s1"}, BulkStripes: map[string]int{"s0": 0, "s1": 1},
			RelayDelay: 20, MaxBulkInflightBytes: 64 << 10}, core.State{})
		if err != nil {
			t.Fatal(err)
		}
		n.cores[site] = c
		n.got[site] = map[string]int{}
	}
	for _, x := range schema.Sites {
		for _, y := range schema.Sites {
			if x != y {
				if err := n.cores[x].Connected(y); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	n.pump()
	return n
}

// pump runs every core's Readies and delivers their messages until
// nothing moves, but to and from sites that are down.
func (n *routeNet) pump() {
	for moved := true; moved; {
		moved = false
		for _, name := range []string{"a", "b", "c"} {
			c := n.cores[name]
			for !n.down[name] && c.HasReady() {
				rd := c.Ready()
				for _, e := range rd.Entries {
					n.stores[name].log[e.Stream] = append(n.stores[name].log[e.Stream], e)
				}
				persistBulk(n.t, c, n.stores[name], rd.BulkEntries)
				for _, m := range rd.Messages {
					if n.down[m.To] || n.cut[[2]string{m.From, m.To}] {
						continue
					}
					if m.Type == core.MsgData {
						for _, e := range m.Entries {
							n.sent[[3]string{m.From, m.To, e.Stream.Name}]++
							n.got[m.To][fmt.Sprintf("%s/%d", e.Stream.Name, e.Seq)]++
						}
					}
					if err := n.cores[m.To].Step(m); err != nil {
						n.t.Fatalf("%s: step %v: %v", m.To, m, err)
					}
					moved = true
				}
				c.Advance()
			}
		}
	}
}

func (n *routeNet) ticks(k int) {
	for range k {
		n.tick += 1e6
		for name, c := range n.cores {
			if !n.down[name] {
				c.Tick(n.tick)
			}
		}
		n.pump()
	}
}

// TestRoutesFillEveryLink: an origin's two stripes go out on different
// links and each first hop relays its stripe to the other receiver, so
// every link into a receiver carries part of the transfer, and every
// entry reaches every site once.
func TestRoutesFillEveryLink(t *testing.T) {
	n := newRouteNet(t)
	a := n.cores["a"]
	chunk := bytes.Repeat([]byte("c"), 20<<10)
	const k = 12
	for range k {
		for _, s := range []string{"s0", "s1"} {
			if _, _, err := a.Append(s, chunk); err != nil {
				t.Fatal(err)
			}
		}
		n.pump()
	}
	n.ticks(5)
	want := map[[3]string]int{
		{"a", "b", "s0"}: k, {"b", "c", "s0"}: k, // stripe 0: first hop b
		{"a", "c", "s1"}: k, {"c", "b", "s1"}: k, // stripe 1: first hop c
	}
	for key, v := range n.sent {
		if want[key] != v {
			t.Errorf("%s sent %s %d entries of %s, want %d", key[0], key[1], v, key[2], want[key])
		}
	}
	for _, site := range []string{"b", "c"} {
		for key, v := range n.got[site] {
			if v != 1 {
				t.Errorf("%s received %s %d times", site, key, v)
			}
		}
		if len(n.got[site]) != 2*k {
			t.Errorf("%s received %d entries, want %d", site, len(n.got[site]), 2*k)
		}
	}
	for _, s := range []string{"s0", "s1"} {
		if f, _ := a.Frontier(core.StreamID{Origin: "a", Name: s}, "all"); f.Seq != k {
			t.Errorf("%s frontier under all = %d, want %d", s, f.Seq, k)
		}
	}
}

// TestRoutesFallBack: with the first hop of s0 down, its origin sends s0
// to the other receiver itself once that one went RelayDelay ticks
// without progress, and routes it again once the first hop is back and
// the receiver lacks nothing.
func TestRoutesFallBack(t *testing.T) {
	n := newRouteNet(t)
	a, c := n.cores["a"], n.cores["c"]
	n.down["b"] = true
	for _, x := range []string{"a", "c"} {
		if err := n.cores[x].Disconnected("b"); err != nil {
			t.Fatal(err)
		}
	}
	chunk := bytes.Repeat([]byte("c"), 1000)
	for range 3 {
		if _, _, err := a.Append("s0", chunk); err != nil {
			t.Fatal(err)
		}
	}
	n.pump()
	if got := n.sent[[3]string{"a", "c", "s0"}]; got != 0 {
		t.Fatalf("a sent c %d entries of s0 at once, before its first hop b had a chance", got)
	}
	n.ticks(25)
	if _, p, _ := c.Head(core.StreamID{Origin: "a", Name: "s0"}); p != 3 {
		t.Fatalf("c persisted s0 up to %d with its first hop down, want 3 (sent directly)", p)
	}
	if n.got["c"]["s0/1"] != 1 {
		t.Fatalf("c received s0/1 %d times", n.got["c"]["s0/1"])
	}

	// b is back: c lacks nothing, so s0 goes through b again.
	n.down["b"] = false
	for _, x := range []string{"a", "c"} {
		for _, err := range []error{n.cores[x].Connected("b"), n.cores["b"].Connected(x)} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	n.ticks(5)
	direct := n.sent[[3]string{"a", "c", "s0"}]
	for range 3 {
		if _, _, err := a.Append("s0", chunk); err != nil {
			t.Fatal(err)
		}
	}
	n.ticks(5)
	if got := n.sent[[3]string{"a", "c", "s0"}]; got != direct {
		t.Errorf("a sent c %d more entries of s0 with its first hop back", got-direct)
	}
	if _, p, _ := c.Head(core.StreamID{Origin: "a", Name: "s0"}); p != 6 {
		t.Errorf("c persisted s0 up to %d, want 6 (through b)", p)
	}
}

// TestRoutesSlowHopWaitsLonger: a first hop still connected to the origin
// but not feeding a peer (here: cut off from it) is given four times
// RelayDelay before the origin sends the stream itself, so that a hop
// that merely stalls on a busy host is not doubled by the origin.
func TestRoutesSlowHopWaitsLonger(t *testing.T) {
	n := newRouteNet(t)
	c := n.cores["c"]
	n.cut[[2]string{"b", "c"}], n.cut[[2]string{"c", "b"}] = true, true
	chunk := bytes.Repeat([]byte("c"), 1000)
	for range 3 {
		if _, _, err := n.cores["a"].Append("s0", chunk); err != nil {
			t.Fatal(err)
		}
	}
	n.pump()
	n.ticks(25) // past RelayDelay (20), short of 4 x
	if got := n.sent[[3]string{"a", "c", "s0"}]; got != 0 {
		t.Fatalf("a sent c %d entries of s0 while its connected first hop had %d ticks", got, 25)
	}
	n.ticks(60)
	if _, p, _ := c.Head(core.StreamID{Origin: "a", Name: "s0"}); p != 3 {
		t.Fatalf("c persisted s0 up to %d after 4 x RelayDelay unfed, want 3 (sent directly)", p)
	}
}
