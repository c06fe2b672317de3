package stabilizer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is an Applier that checks per-stream order and keeps what it got.
type recorder struct {
	mu   sync.Mutex
	got  map[stabilizer.StreamID][]string
	last map[stabilizer.StreamID]uint64
	err  error
}

func newRecorder() *recorder {
	return &recorder{got: map[stabilizer.StreamID][]string{}, last: map[stabilizer.StreamID]uint64{}}
}

func (r *recorder) Apply(_ context.Context, es []stabilizer.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		// A restarted site resumes after its applied position, so the
		// first seq may be any; after it there must be no gap.
		if last, seen := r.last[e.Stream]; seen && e.Seq != last+1 && r.err == nil {
			r.err = fmt.Errorf("%s: got seq %d after %d", e.Stream, e.Seq, r.last[e.Stream])
		}
		r.last[e.Stream] = e.Seq
		r.got[e.Stream] = append(r.got[e.Stream], string(e.Payload))
	}
	return nil
}

func (r *recorder) count(id stabilizer.StreamID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got[id])
}

// cluster is the library's test cluster with a recorder applying stream
// "log" at every site, the group first (the first site) and the predicate
// two.
type cluster struct {
	*stabilizertest.Cluster
	mu   sync.Mutex
	apps map[string]*recorder // of each site's latest start
}

// newCluster starts sites; configure, when not nil, adjusts every node's
// configuration at each start (Core, SyncDelay).
func newCluster(t testing.TB, configure func(*stabilizer.Config), sites ...string) *cluster {
	c := &cluster{apps: map[string]*recorder{}}
	o := stabilizertest.Options{Sites: sites, Groups: map[string][]string{"first": sites[:1]},
		Predicates: map[string]string{"two": "kth_max(2, persisted(sites))"}, Setup: c.setup}
	if configure != nil {
		o.Configure = func(_ string, cfg *stabilizer.Config) { configure(cfg) }
	}
	c.Cluster = stabilizertest.NewCluster(t, o)
	return c
}

// setup gives each node the cluster starts a new recorder.
func (c *cluster) setup(site string, n *stabilizer.Node) error {
	r := newRecorder()
	c.mu.Lock()
	c.apps[site] = r
	c.mu.Unlock()
	return n.Handle("log", r)
}

// app returns the recorder of a site's latest start.
func (c *cluster) app(site string) *recorder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apps[site]
}

func TestThreeSitesAllPredicates(t *testing.T) {
	c := newCluster(t, nil, "us-east-1", "eu-west-1", "ap-south-1")
	ctx := stabilizertest.Context(t, 20*time.Second)
	var last map[string]stabilizer.Appended = map[string]stabilizer.Appended{}
	for i := range 50 {
		for _, s := range c.Sites() {
			a, err := c.Node(s).Append(ctx, "log", []byte(fmt.Sprintf("%s-%d", s, i)))
			if err != nil {
				t.Fatal(err)
			}
			last[s] = a
		}
	}
	for _, s := range c.Sites() {
		a := last[s]
		for _, p := range []string{"none", "local", "one_remote", "majority", "all", "two", "min(applied(sites))"} {
			if err := c.Node(s).WaitFor(ctx, a.Stream, p, a.Seq); err != nil {
				t.Fatalf("%s waiting for %s: %v", s, p, err)
			}
		}
		// Every other site sees the same frontier eventually.
		for _, o := range c.Sites() {
			if err := c.Node(o).WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
				t.Fatalf("%s waiting on %s's stream: %v", o, s, err)
			}
		}
	}
	for _, s := range c.Sites() {
		r := c.app(s)
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, o := range c.Sites() {
			id := stabilizer.StreamID{Origin: o, Name: "log"}
			if n := r.count(id); n != 50 {
				t.Fatalf("%s applied %d of %s's 50 messages", s, n, o)
			}
		}
	}
}

func TestRestartContinuesNumbering(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) {
			testRestartContinuesNumbering(t, lazy)
		})
	}
}

// testRestartContinuesNumbering closes and reopens sites; with lazy
// frontiers the frontier records written without an fsync must survive the
// clean close as well.
func testRestartContinuesNumbering(t *testing.T, lazy bool) {
	c := newCluster(t, func(cfg *stabilizer.Config) { cfg.Core.LazyFrontiers = lazy }, "a", "b", "c")
	ctx := stabilizertest.Context(t, 20*time.Second)
	var a stabilizer.Appended
	var err error
	for i := range 20 {
		if a, err = c.Node("a").Append(ctx, "log", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Node("a").WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
	if err := c.Node("b").WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
	// Persisted everywhere is not applied at b: wait for b's application,
	// or what it had not applied yet is rightly delivered again after the
	// restart.
	if err := c.Node("b").WaitFor(ctx, a.Stream, "applied(self)", a.Seq); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Node("b").Frontier(ctx, a.Stream, "all")
	c.Stop("a")
	c.Stop("b")
	c.Start("b")
	// Right after the restart, before any peer's acks came back, the
	// frontier is what was published before.
	if f, _ := c.Node("b").Frontier(ctx, a.Stream, "all"); f.Seq < before.Seq {
		t.Fatalf("frontier at b went back across restart: %d -> %d", before.Seq, f.Seq)
	}
	c.Start("a")
	a2, err := c.Node("a").Append(ctx, "log", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if a2.Seq != a.Seq+1 {
		t.Fatalf("after restart seq %d, want %d", a2.Seq, a.Seq+1)
	}
	if !a.HLC.Less(a2.HLC) {
		t.Fatalf("HLC went back across restart: %v then %v", a.HLC, a2.HLC)
	}
	after, _ := c.Node("b").Frontier(ctx, a.Stream, "all")
	if after.Seq < before.Seq {
		t.Fatalf("frontier at b went back across restart: %d -> %d", before.Seq, after.Seq)
	}
	if err := c.Node("b").WaitFor(ctx, a2.Stream, "applied(self)", a2.Seq); err != nil {
		t.Fatal(err)
	}
	// The new b resumes delivery after its applied position: only the new
	// message reaches its new application, in order.
	if err := c.app("b").err; err != nil {
		t.Fatal(err)
	}
	r := c.app("b")
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got[a2.Stream]
	if len(got) != 1 || got[0] != "after" || r.last[a2.Stream] != a2.Seq {
		t.Fatalf("restarted b applied %q of a's stream, want only %q", got, "after")
	}
}

func TestPartitionStallsAllButNotMajority(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	ctx := stabilizertest.Context(t, 20*time.Second)
	c.Net.Cut("a", "c")
	a, err := c.Node("a").Append(ctx, "log", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node("a").WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = c.Node("a").WaitFor(short, a.Stream, "all", a.Seq)
	var we *stabilizer.WaitError
	if !errors.As(err, &we) || we.Frontier != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("all under partition: %v", err)
	}
	t.Log(err)
	// Change a predicate while the partition holds: writes flow again.
	if _, err := c.Node("a").SetPredicate(ctx, "two", "kth_max(2, persisted(sites))"); err != nil {
		t.Fatal(err)
	}
	if err := c.Node("a").WaitFor(ctx, a.Stream, "two", a.Seq); err != nil {
		t.Fatal(err)
	}
	if src, ok := c.Node("a").PredicateSource("two"); !ok || src != "kth_max(2, persisted(sites))" {
		t.Errorf("source of two: %q %v", src, ok)
	}
	if src, ok := c.Node("a").PredicateSource("majority"); !ok || src != frontier.Builtins["majority"] {
		t.Errorf("source of majority: %q %v", src, ok)
	}
	if _, ok := c.Node("a").PredicateSource("=persisted(origin)"); ok {
		t.Error("an inline predicate's internal name counts as named")
	}
	c.Net.Restore("a", "c")
	if err := c.Node("a").WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	ctx := stabilizertest.Context(t, 20*time.Second)
	n := c.Node("a")
	if _, err := n.Predicate(ctx, "majorty"); !errors.Is(err, stabilizer.ErrUnknownPredicate) {
		t.Fatalf("unknown predicate: %v", err)
	}
	if _, err := n.Predicate(ctx, "persisted(origin) + 1"); err == nil {
		t.Fatal("bad inline predicate accepted")
	}
	if _, err := n.Append(ctx, "", nil); err == nil {
		t.Fatal("empty stream name accepted")
	}
	c.Stop("a")
	if _, err := n.Append(ctx, "log", nil); !errors.Is(err, stabilizer.ErrStopped) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := stabilizer.New(stabilizer.Config{Site: "zz", Schema: c.Schema, Dir: t.TempDir()}); err == nil {
		t.Fatal("unknown site accepted")
	}
}

func TestAppendBatch(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	ctx := stabilizertest.Context(t, 20*time.Second)
	n := c.Node("a")
	first, err := n.Append(ctx, "log", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	as, err := n.AppendBatch(ctx, "log", [][]byte{[]byte("1"), []byte("2"), []byte("3")})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 3 {
		t.Fatalf("got %d results, want 3", len(as))
	}
	prev := first
	for i, a := range as {
		if a.Stream != first.Stream || a.Seq != first.Seq+uint64(i)+1 || !prev.HLC.Less(a.HLC) {
			t.Fatalf("result %d: %+v after %+v", i, a, prev)
		}
		prev = a
	}
	if as, err := n.AppendBatch(ctx, "log", nil); err != nil || len(as) != 0 {
		t.Fatalf("empty batch: %v %v", as, err)
	}
	if _, err := n.AppendBatch(ctx, "", [][]byte{[]byte("x")}); !errors.Is(err, stabilizer.ErrBadStreamName) {
		t.Fatalf("bad stream name: %v", err)
	}
	// Nothing of the refused batch was appended: the next seq follows.
	next, err := n.Append(ctx, "log", []byte("4"))
	if err != nil || next.Seq != prev.Seq+1 {
		t.Fatalf("after a refused batch: %+v %v, want seq %d", next, err, prev.Seq+1)
	}
	if err := c.Node("b").WaitFor(ctx, next.Stream, "applied(self)", next.Seq); err != nil {
		t.Fatal(err)
	}
	r := c.app("b")
	r.mu.Lock()
	got := strings.Join(r.got[next.Stream], ",")
	r.mu.Unlock()
	if got != "0,1,2,3,4" {
		t.Fatalf("b applied %s, want 0,1,2,3,4", got)
	}
	c.Stop("a")
	if _, err := n.AppendBatch(ctx, "log", [][]byte{nil}); !errors.Is(err, stabilizer.ErrStopped) {
		t.Fatalf("after close: %v", err)
	}
}
