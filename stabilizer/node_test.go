package stabilizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// recorder is an Applier that checks per-stream order and keeps what it got.
type recorder struct {
	mu   sync.Mutex
	got  map[StreamID][]string
	last map[StreamID]uint64
	err  error
}

func newRecorder() *recorder {
	return &recorder{got: map[StreamID][]string{}, last: map[StreamID]uint64{}}
}

func (r *recorder) Apply(_ context.Context, es []Entry) error {
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

func (r *recorder) count(id StreamID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got[id])
}

// testLogger sends a node's logs to t.Log, so they show only on failure.
func testLogger(t *testing.T, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: tWriter{t}})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type cluster struct {
	t      *testing.T
	core   core.Config
	net    *MemNetwork
	schema *frontier.Schema
	dirs   map[string]string
	nodes  map[string]*Node
	apps   map[string]*recorder
	// syncDelay, if set, is every node's Config.SyncDelay.
	syncDelay time.Duration
}

func newCluster(t *testing.T, sites ...string) *cluster {
	return newClusterWith(t, core.Config{}, sites...)
}

func newClusterWith(t *testing.T, cc core.Config, sites ...string) *cluster {
	return newClusterDelay(t, cc, 0, sites...)
}

func newClusterDelay(t *testing.T, cc core.Config, syncDelay time.Duration, sites ...string) *cluster {
	c := &cluster{t: t, core: cc, net: NewMemNetwork(), dirs: map[string]string{}, nodes: map[string]*Node{}, apps: map[string]*recorder{},
		schema: &frontier.Schema{Sites: sites, Groups: map[string][]string{"first": sites[:1]}}, syncDelay: syncDelay}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
		c.net.Close()
	})
	for _, s := range sites {
		c.dirs[s] = t.TempDir()
		c.start(s)
	}
	return c
}

func (c *cluster) start(site string) {
	n, err := New(Config{Site: site, Schema: c.schema, Dir: c.dirs[site], Transport: c.net.Transport(site),
		Predicates: map[string]string{"two": "kth_max(2, persisted(sites))"}, Logger: testLogger(c.t, site), Core: c.core,
		SyncDelay: c.syncDelay})
	if err != nil {
		c.t.Fatal(err)
	}
	c.apps[site] = newRecorder()
	if err := n.Handle("log", c.apps[site]); err != nil {
		c.t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[site] = n
}

func (c *cluster) stop(site string) {
	if err := c.nodes[site].Close(); err != nil {
		c.t.Fatal(err)
	}
	delete(c.nodes, site)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestThreeSitesAllPredicates(t *testing.T) {
	c := newCluster(t, "us-east-1", "eu-west-1", "ap-south-1")
	ctx := ctxT(t)
	var last map[string]Appended = map[string]Appended{}
	for i := range 50 {
		for _, s := range c.schema.Sites {
			a, err := c.nodes[s].Append(ctx, "log", []byte(fmt.Sprintf("%s-%d", s, i)))
			if err != nil {
				t.Fatal(err)
			}
			last[s] = a
		}
	}
	for _, s := range c.schema.Sites {
		a := last[s]
		for _, p := range []string{"none", "local", "one_remote", "majority", "all", "two", "min(applied(sites))"} {
			if err := c.nodes[s].WaitFor(ctx, a.Stream, p, a.Seq); err != nil {
				t.Fatalf("%s waiting for %s: %v", s, p, err)
			}
		}
		// Every other site sees the same frontier eventually.
		for _, o := range c.schema.Sites {
			if err := c.nodes[o].WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
				t.Fatalf("%s waiting on %s's stream: %v", o, s, err)
			}
		}
	}
	for _, s := range c.schema.Sites {
		r := c.apps[s]
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, o := range c.schema.Sites {
			id := StreamID{Origin: o, Name: "log"}
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
	c := newClusterWith(t, core.Config{LazyFrontiers: lazy}, "a", "b", "c")
	ctx := ctxT(t)
	var a Appended
	var err error
	for i := range 20 {
		if a, err = c.nodes["a"].Append(ctx, "log", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.nodes["a"].WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["b"].WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
	before, _ := c.nodes["b"].Frontier(ctx, a.Stream, "all")
	c.stop("a")
	c.stop("b")
	c.start("b")
	// Right after the restart, before any peer's acks came back, the
	// frontier is what was published before.
	if f, _ := c.nodes["b"].Frontier(ctx, a.Stream, "all"); f.Seq < before.Seq {
		t.Fatalf("frontier at b went back across restart: %d -> %d", before.Seq, f.Seq)
	}
	c.start("a")
	a2, err := c.nodes["a"].Append(ctx, "log", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if a2.Seq != a.Seq+1 {
		t.Fatalf("after restart seq %d, want %d", a2.Seq, a.Seq+1)
	}
	if !a.HLC.Less(a2.HLC) {
		t.Fatalf("HLC went back across restart: %v then %v", a.HLC, a2.HLC)
	}
	after, _ := c.nodes["b"].Frontier(ctx, a.Stream, "all")
	if after.Seq < before.Seq {
		t.Fatalf("frontier at b went back across restart: %d -> %d", before.Seq, after.Seq)
	}
	if err := c.nodes["b"].WaitFor(ctx, a2.Stream, "applied(self)", a2.Seq); err != nil {
		t.Fatal(err)
	}
	// The new b resumes delivery after its applied position: only the new
	// message reaches its new application, in order.
	if err := c.apps["b"].err; err != nil {
		t.Fatal(err)
	}
	r := c.apps["b"]
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got[a2.Stream]
	if len(got) != 1 || got[0] != "after" || r.last[a2.Stream] != a2.Seq {
		t.Fatalf("restarted b applied %q of a's stream, want only %q", got, "after")
	}
}

func TestPartitionStallsAllButNotMajority(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	ctx := ctxT(t)
	c.net.Cut("a", "c")
	a, err := c.nodes["a"].Append(ctx, "log", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["a"].WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = c.nodes["a"].WaitFor(short, a.Stream, "all", a.Seq)
	var we *WaitError
	if !errors.As(err, &we) || we.Frontier != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("all under partition: %v", err)
	}
	t.Log(err)
	// Change a predicate while the partition holds: writes flow again.
	if _, err := c.nodes["a"].SetPredicate(ctx, "two", "kth_max(2, persisted(sites))"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["a"].WaitFor(ctx, a.Stream, "two", a.Seq); err != nil {
		t.Fatal(err)
	}
	if src, ok := c.nodes["a"].PredicateSource("two"); !ok || src != "kth_max(2, persisted(sites))" {
		t.Errorf("source of two: %q %v", src, ok)
	}
	if src, ok := c.nodes["a"].PredicateSource("majority"); !ok || src != frontier.Builtins["majority"] {
		t.Errorf("source of majority: %q %v", src, ok)
	}
	if _, ok := c.nodes["a"].PredicateSource("=persisted(origin)"); ok {
		t.Error("an inline predicate's internal name counts as named")
	}
	c.net.Restore("a", "c")
	if err := c.nodes["a"].WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	c := newCluster(t, "a", "b")
	ctx := ctxT(t)
	n := c.nodes["a"]
	if _, err := n.Predicate(ctx, "majorty"); !errors.Is(err, ErrUnknownPredicate) {
		t.Fatalf("unknown predicate: %v", err)
	}
	if _, err := n.Predicate(ctx, "persisted(origin) + 1"); err == nil {
		t.Fatal("bad inline predicate accepted")
	}
	if _, err := n.Append(ctx, "", nil); err == nil {
		t.Fatal("empty stream name accepted")
	}
	c.stop("a")
	if _, err := n.Append(ctx, "log", nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := New(Config{Site: "zz", Schema: c.schema, Dir: t.TempDir()}); err == nil {
		t.Fatal("unknown site accepted")
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestAppendBatch(t *testing.T) {
	c := newCluster(t, "a", "b")
	ctx := ctxT(t)
	n := c.nodes["a"]
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
	if _, err := n.AppendBatch(ctx, "", [][]byte{[]byte("x")}); !errors.Is(err, core.ErrBadStreamName) {
		t.Fatalf("bad stream name: %v", err)
	}
	// Nothing of the refused batch was appended: the next seq follows.
	next, err := n.Append(ctx, "log", []byte("4"))
	if err != nil || next.Seq != prev.Seq+1 {
		t.Fatalf("after a refused batch: %+v %v, want seq %d", next, err, prev.Seq+1)
	}
	if err := c.nodes["b"].WaitFor(ctx, next.Stream, "applied(self)", next.Seq); err != nil {
		t.Fatal(err)
	}
	r := c.apps["b"]
	r.mu.Lock()
	got := strings.Join(r.got[next.Stream], ",")
	r.mu.Unlock()
	if got != "0,1,2,3,4" {
		t.Fatalf("b applied %s, want 0,1,2,3,4", got)
	}
	c.stop("a")
	if _, err := n.AppendBatch(ctx, "log", [][]byte{nil}); !errors.Is(err, ErrStopped) {
		t.Fatalf("after close: %v", err)
	}
}
