package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster runs kv stores of several sites in this process, on the
// library's test cluster.
type cluster struct {
	*stabilizertest.Cluster
	t      testing.TB
	mu     sync.Mutex
	stores map[string]*Store // of the running sites
}

func newCluster(t testing.TB, sites ...string) *cluster {
	c := &cluster{t: t, stores: map[string]*Store{}}
	c.Cluster = stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites, Setup: c.setup})
	return c
}

// peerReaders lets quorum reads reach the other stores in process.
type peerReaders struct {
	c    *cluster
	site string
}

func (p peerReaders) LocalGet(ctx context.Context, key string) (Version, bool, error) {
	p.c.mu.Lock()
	s := p.c.stores[p.site]
	p.c.mu.Unlock()
	if s == nil {
		return Version{}, false, errors.New("site down")
	}
	return s.LocalGet(ctx, key)
}

// setup puts a store on each node the cluster starts.
func (c *cluster) setup(site string, n *stabilizer.Node) error {
	peers := map[string]Reader{}
	for _, o := range n.Schema().Sites {
		if o != site {
			peers[o] = peerReaders{c, o}
		}
	}
	s, err := New(Config{Node: n, Peers: peers, DefaultTimeout: 10 * time.Second, MaxValueBytes: 1 << 16})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.stores[site] = s
	c.mu.Unlock()
	return nil
}

// store returns a running site's store.
func (c *cluster) store(site string) *Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stores[site]
}

// stop closes a site; its store answers no quorum reads until Start.
func (c *cluster) stop(site string) {
	c.mu.Lock()
	delete(c.stores, site)
	c.mu.Unlock()
	c.Stop(site)
}

func ctxT(t testing.TB) context.Context { return stabilizertest.Context(t, 30*time.Second) }

func mustGet(t *testing.T, s *Store, key string, o ReadOptions) ReadResult {
	t.Helper()
	r, err := s.Get(ctxT(t), key, o)
	if err != nil {
		t.Fatalf("get %q at %s: %v", key, s.node.Site(), err)
	}
	return r
}

var sites3 = []string{"us-east-1", "eu-west-1", "ap-south-1"}

func TestPutAllReadEverywhere(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	w, err := c.store("us-east-1").Put(ctx, "jobs/7", []byte(`{"state":"running"}`), WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites3 {
		// `all` means persisted everywhere; applied follows, so wait for it.
		if err := c.Node(s).WaitFor(ctx, streamOf(w), "applied(self)", w.Seq); err != nil {
			t.Fatal(err)
		}
		r := mustGet(t, c.store(s), "jobs/7", ReadOptions{})
		if string(r.Value) != `{"state":"running"}` || r.Origin != "us-east-1" || r.Seq != w.Seq {
			t.Fatalf("%s read %+v", s, r)
		}
	}
}

func TestLocalWritesVisibleAtOnce(t *testing.T) {
	c := newCluster(t, sites3...)
	s := c.store("eu-west-1")
	c.Isolate("eu-west-1", true)
	if _, err := s.Put(ctxT(t), "k", []byte("v1"), WriteOptions{Wait: "none"}); err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, s, "k", ReadOptions{}); string(r.Value) != "v1" {
		t.Fatalf("read %q", r.Value)
	}
	vs, err := s.Scan(ctxT(t), "", 0, ReadOptions{})
	if err != nil || len(vs) != 1 || vs[0].Key != "k" {
		t.Fatalf("scan: %v %v", vs, err)
	}
}

// TestScanHidesOwnWriteDeletedLater: a site's own write not yet applied
// is older than a delete of its key from another site that was applied.
// Scan must agree with Get that the key is gone. (The pending write is
// put in place by hand: a real one is applied within microseconds.)
func TestScanHidesOwnWriteDeletedLater(t *testing.T) {
	c := newCluster(t, "us-east-1", "eu-west-1")
	us, eu := c.store("us-east-1"), c.store("eu-west-1")
	if _, err := us.Put(ctxT(t), "job/7", []byte("v"), WriteOptions{Wait: "none"}); err != nil {
		t.Fatal(err)
	}
	del, err := us.Delete(ctxT(t), "job/7", WriteOptions{Wait: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node("eu-west-1").WaitFor(ctxT(t), streamOf(del), "applied(self)", del.Seq); err != nil {
		t.Fatal(err)
	}
	eu.mu.Lock()
	eu.mu.pending["job/7"] = Version{Key: "job/7", Value: []byte("older"), Origin: "eu-west-1", Seq: 1 << 40, HLC: stabilizer.HLC{Wall: 1}}
	eu.mu.Unlock()
	if v, found, err := eu.latest("job/7"); err != nil || !found || !v.Deleted {
		t.Fatalf("latest: %+v %v %v: want the delete", v, found, err)
	}
	vs, err := eu.Scan(ctxT(t), "job/", 0, ReadOptions{})
	if err != nil || len(vs) != 0 {
		t.Fatalf("scan: %+v %v: want nothing, the key was deleted after the pending write", vs, err)
	}
}

func TestStableReadHidesUnstable(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	s := c.store("us-east-1")
	if _, err := s.Put(ctx, "ckpt/latest", []byte("step-100"), WriteOptions{Wait: "all"}); err != nil {
		t.Fatal(err)
	}
	c.Isolate("us-east-1", true)
	w, err := s.Put(ctx, "ckpt/latest", []byte("step-200"), WriteOptions{Wait: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, s, "ckpt/latest", ReadOptions{}); string(r.Value) != "step-200" {
		t.Fatalf("latest: %q", r.Value)
	}
	if r := mustGet(t, s, "ckpt/latest", ReadOptions{Stable: "majority"}); string(r.Value) != "step-100" {
		t.Fatalf("stable under majority while cut off: %q", r.Value)
	}
	c.Net.Restore("us-east-1", "eu-west-1")
	if err := c.Node("us-east-1").WaitFor(ctx, streamOf(w), "majority", w.Seq); err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, s, "ckpt/latest", ReadOptions{Stable: "majority"}); string(r.Value) != "step-200" {
		t.Fatalf("stable under majority after healing: %q", r.Value)
	}
}

func TestConcurrentWritersConverge(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	last := map[string]WriteResult{}
	var mu sync.Mutex
	for _, site := range sites3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				key := fmt.Sprintf("jobs/%d", i%7)
				var err error
				var w WriteResult
				if i%11 == 10 {
					w, err = c.store(site).Delete(ctx, key, WriteOptions{Wait: "none"})
				} else {
					w, err = c.store(site).Put(ctx, key, []byte(fmt.Sprintf("%s-%d", site, i)), WriteOptions{Wait: "none"})
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last[site] = w
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, site := range sites3 {
		for origin, w := range last {
			if err := c.Node(site).WaitFor(ctx, streamOf(w), "applied(self)", w.Seq); err != nil {
				t.Fatalf("%s applying %s: %v", site, origin, err)
			}
		}
	}
	for i := range 7 {
		key := fmt.Sprintf("jobs/%d", i)
		var first string
		for j, site := range sites3 {
			r, err := c.store(site).Get(ctx, key, ReadOptions{})
			got := fmt.Sprintf("%s@%s/%d", r.Value, r.Origin, r.Seq)
			if errors.Is(err, ErrNotFound) {
				got = "deleted"
			} else if err != nil {
				t.Fatal(err)
			}
			if j == 0 {
				first = got
			} else if got != first {
				t.Fatalf("%s: %s has %s, %s has %s", key, sites3[0], first, site, got)
			}
		}
	}
}

func TestQuorumReadSeesAcknowledgedWhileSiteDown(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	c.stop("ap-south-1")
	if _, err := c.store("us-east-1").Put(ctx, "lineage/m1", []byte("v2"), WriteOptions{Wait: "majority"}); err != nil {
		t.Fatal(err)
	}
	r := mustGet(t, c.store("eu-west-1"), "lineage/m1", ReadOptions{Quorum: "majority"})
	if string(r.Value) != "v2" {
		t.Fatalf("quorum read: %q", r.Value)
	}
	if len(r.Answered) < 2 {
		t.Fatalf("answered by %v", r.Answered)
	}
	// `all` needs every site for the write, so one answer suffices to read.
	if _, err := c.store("eu-west-1").Get(ctx, "lineage/m1", ReadOptions{Quorum: "all"}); err != nil {
		t.Fatal(err)
	}
	// The dual of one_remote is every site but the origin: with
	// ap-south-1 down it cannot be reached.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.store("eu-west-1").Get(short, "lineage/m1", ReadOptions{Quorum: "one_remote"})
	if !errors.Is(err, ErrQuorum) {
		t.Fatalf("quorum read under one_remote with a site down: %v", err)
	}
	t.Log(err)
}

func TestWatchSeesEveryChangeOnce(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	got := make(chan Version, 100)
	started := make(chan struct{})
	go func() {
		close(started)
		_ = c.store("eu-west-1").Watch(ctx, "events/", "majority", func(v Version) error {
			got <- v
			return nil
		})
	}()
	<-started
	// The watch registers asynchronously: write only after a probe write
	// shows it is active.
	for {
		if _, err := c.store("eu-west-1").Put(ctx, "events/probe", []byte("p"), WriteOptions{Wait: "majority"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	for len(got) > 0 {
		<-got
	}
	for i := range 20 {
		if _, err := c.store(sites3[i%3]).Put(ctx, fmt.Sprintf("events/%02d", i), []byte("x"), WriteOptions{Wait: "none"}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for range 20 {
		select {
		case v := <-got:
			seen[v.Key]++
		case <-ctx.Done():
			t.Fatalf("watch saw %d of 20 events", len(seen))
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s seen %d times", k, n)
		}
	}
	if len(seen) != 20 {
		t.Fatalf("saw %d distinct keys", len(seen))
	}
}

func TestSessionReadYourWritesElsewhere(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	w, err := c.store("us-east-1").Put(ctx, "jobs/9", []byte("queued"), WriteOptions{Wait: "none"})
	if err != nil {
		t.Fatal(err)
	}
	r := mustGet(t, c.store("ap-south-1"), "jobs/9", ReadOptions{Session: map[string]uint64{w.Origin: w.Seq}})
	if string(r.Value) != "queued" {
		t.Fatalf("session read: %q", r.Value)
	}
}

func TestSnapshotRead(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	w, err := c.store("us-east-1").Put(ctx, "lineage/a", []byte("1"), WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	s := c.store("eu-west-1")
	// The snapshot time passes the write once it is applied here and all
	// sites heartbeat past it, within the test's deadline.
	deadline, _ := ctx.Deadline()
	stabilizertest.Eventually(t, time.Until(deadline), func() error {
		r, err := s.Get(ctx, "lineage/a", ReadOptions{Snapshot: "all"})
		if err == nil {
			if string(r.Value) != "1" || r.Snapshot.Less(w.HLC) {
				t.Fatalf("snapshot read %+v", r)
			}
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("snapshot time never passed the write")
		}
		return err
	})
}

func TestLimitsAndErrors(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	s := c.store("us-east-1")
	cases := []struct {
		err  error
		want string
		do   func() error
	}{
		{ErrBadKey, "empty key", func() error { _, err := s.Put(ctx, "", nil, WriteOptions{}); return err }},
		{ErrKeyTooLarge, "limit is 4096", func() error { _, err := s.Put(ctx, strings.Repeat("k", 5000), nil, WriteOptions{}); return err }},
		{ErrValueTooLarge, "limit is 65536", func() error { _, err := s.Put(ctx, "k", make([]byte, 70000), WriteOptions{}); return err }},
		{stabilizer.ErrUnknownPredicate, "unknown predicate", func() error {
			_, err := s.Put(ctx, "k", nil, WriteOptions{Wait: "majorty"})
			return err
		}},
		{ErrUnsatisfiable, "can never hold", func() error {
			_, err := s.Put(ctx, "k", nil, WriteOptions{Wait: `quorum(2, persisted(except(["us-east-1", "eu-west-1"], origin)))`})
			return err
		}},
		{ErrNotFound, `"nope"`, func() error { _, err := s.Get(ctx, "nope", ReadOptions{}); return err }},
		{ErrBadRead, "choose one", func() error { _, err := s.Get(ctx, "k", ReadOptions{Stable: "all", Quorum: "all"}); return err }},
	}
	for _, tc := range cases {
		err := tc.do()
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %v containing %q", err, tc.err, tc.want)
		}
	}
	c.Isolate("us-east-1", true)
	_, err := s.Put(ctx, "k", []byte("v"), WriteOptions{Wait: "majority", Timeout: 100 * time.Millisecond})
	var we *stabilizer.WaitError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), `waiting for "majority" on us-east-1/kv seq`) ||
		!strings.Contains(err.Error(), "persisted: us-east-1=") {
		t.Fatalf("timeout: %v", err)
	}
	t.Log(err)
}

// TestAppendThenWait: Append returns as soon as the writes have their
// seqs, visible locally; a failed Wait fails each written op with the
// error its own Put would have got, its own seq included.
func TestAppendThenWait(t *testing.T) {
	c := newCluster(t, sites3...)
	ctx := ctxT(t)
	s := c.store("us-east-1")
	c.Isolate("us-east-1", true)
	b, err := s.Append(ctx, []Op{{Key: "a", Value: []byte("1")}, {Key: ""}, {Key: "b", Delete: true}}, WriteOptions{Wait: "majority", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Results
	if r[0].Err != nil || r[2].Err != nil || r[0].Seq == 0 || r[2].Seq != r[0].Seq+1 || !errors.Is(r[1].Err, ErrBadKey) {
		t.Fatalf("results %+v", r)
	}
	if got := mustGet(t, s, "a", ReadOptions{}); got.Seq != r[0].Seq {
		t.Fatalf("a before the wait: %+v", got)
	}
	if err := b.Wait(ctx); err != r[0].Err {
		t.Errorf("Wait returned %v, want the first op's error", err)
	}
	for _, i := range []int{0, 2} {
		var we *stabilizer.WaitError
		want := fmt.Sprintf(`kv: write %q: timeout after`, []string{"a", "", "b"}[i])
		if !errors.As(r[i].Err, &we) || we.Seq != r[i].Seq || !strings.HasPrefix(r[i].Err.Error(), want) ||
			!strings.Contains(r[i].Err.Error(), fmt.Sprintf("seq %d:", r[i].Seq)) {
			t.Errorf("op %d: %v", i, r[i].Err)
		}
	}
	if !errors.Is(r[1].Err, ErrBadKey) {
		t.Errorf("the refused op's error changed: %v", r[1].Err)
	}
	// A bad predicate fails every op and writes nothing.
	b, err = s.Append(ctx, []Op{{Key: "c", Value: []byte("1")}}, WriteOptions{Wait: "majorty"})
	if !errors.Is(err, stabilizer.ErrUnknownPredicate) || b.Results[0].Err != err || b.Results[0].Seq != 0 {
		t.Fatalf("bad wait: %+v %v", b.Results, err)
	}
}

// TestConfigValidate: every bad field is reported on a line of its own,
// with its value; a configured named predicate is a valid DefaultWait
// before the node starts.
func TestConfigValidate(t *testing.T) {
	n, _ := stabilizertest.OpenNode(t, "us-east-1", "")
	err := (&Config{Node: n, DefaultWait: "majorty", DefaultTimeout: -time.Second, MaxKeyBytes: -1, MaxValueBytes: -2,
		Peers: map[string]Reader{"us-east-1": peerReaders{}, "eu-wst-1": peerReaders{}}}).Validate()
	want := []string{`DefaultWait: "majorty"`, `Peers["eu-wst-1"]: not one of the sites`, `Peers["us-east-1"]: this site itself`,
		"DefaultTimeout: -1s is negative", "MaxKeyBytes: -1 is negative", "MaxValueBytes: -2 is negative"}
	if err == nil || len(strings.Split(err.Error(), "\n")) != len(want) {
		t.Fatalf("Validate: %v; want %d lines", err, len(want))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), "kv: config: "+w) {
			t.Errorf("Validate does not say %q:\n%v", w, err)
		}
	}
	if err := (&Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Node: missing") {
		t.Errorf("Validate of the zero config: %v", err)
	}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites3, Stopped: sites3,
		Predicates: map[string]string{"two_continents": "kth_max(2, persisted(sites))"}})
	node, err := stabilizer.New(c.Config("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := New(Config{Node: node, DefaultWait: "two_continents"}); err != nil {
		t.Errorf("a configured predicate as DefaultWait: %v", err)
	}
}

// TestManyInlineWaitsStayBounded: a client that sends a new inline wait
// predicate with every write leaves the store's cache of compiled
// predicates and the site's evaluated predicates bounded.
func TestManyInlineWaitsStayBounded(t *testing.T) {
	c := newCluster(t, "us-east-1")
	s, n := c.store("us-east-1"), c.Node("us-east-1")
	ctx := ctxT(t)
	base, err := n.PredicateStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 2000 // past maxCachedPredicates
	for i := range writes {
		wait := fmt.Sprintf("min(persisted(sites)) /* client request %d */", i)
		if _, err := s.Put(ctx, fmt.Sprintf("jobs/%d", i%10), []byte("running"), WriteOptions{Wait: wait}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	st, err := n.PredicateStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if idle := stabilizer.DefaultIdleInlinePredicates; st.Evaluated > base.Evaluated+idle+1 {
		t.Errorf("after %d writes with distinct inline waits the site evaluates %d predicates (%d before)", writes, st.Evaluated, base.Evaluated)
	}
	s.compiled.mu.Lock()
	cached := len(s.compiled.m)
	s.compiled.mu.Unlock()
	if cached > maxCachedPredicates {
		t.Errorf("the store caches %d compiled predicates, more than %d", cached, maxCachedPredicates)
	}
}
