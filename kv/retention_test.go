package kv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// newRetCluster is newCluster with stores that keep ret; with start, each
// store's background work runs, from its node's start to its stop.
// Without, a test runs the steps itself (truncate, pruneStep).
func newRetCluster(t testing.TB, ret Retention, start bool, sites ...string) *cluster {
	c := &cluster{t: t, stores: map[string]*Store{}}
	var mu sync.Mutex
	byNode := map[*stabilizer.Node]*Store{} // c.stores forgets a site before it stops
	opts := stabilizertest.Options{Sites: sites, Setup: func(site string, n *stabilizer.Node) error {
		peers := map[string]Reader{}
		for _, o := range n.Schema().Sites {
			if o != site {
				peers[o] = peerReaders{c, o}
			}
		}
		s, err := New(Config{Node: n, Peers: peers, DefaultTimeout: 10 * time.Second, Retention: ret,
			Logger: stabilizertest.Logger(t, site+".kv")})
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.stores[site] = s
		c.mu.Unlock()
		mu.Lock()
		byNode[n] = s
		mu.Unlock()
		return nil
	}}
	if start {
		opts.Started = func(_ string, n *stabilizer.Node) error {
			mu.Lock()
			defer mu.Unlock()
			return byNode[n].Start()
		}
		opts.Stopping = func(_ string, n *stabilizer.Node) {
			mu.Lock()
			s := byNode[n]
			delete(byNode, n)
			mu.Unlock()
			_ = s.Close()
		}
	}
	c.Cluster = stabilizertest.NewCluster(t, opts)
	return c
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// waitAppliedEverywhere waits until every site knows that every site
// applied each write.
func waitAppliedEverywhere(t *testing.T, c *cluster, sites []string, ws ...WriteResult) {
	t.Helper()
	for _, site := range sites {
		for _, w := range ws {
			if err := c.Node(site).WaitFor(ctxT(t), streamOf(w), "min(applied(sites))", w.Seq); err != nil {
				t.Fatalf("%s: %v", site, err)
			}
		}
	}
}

// waitSettled waits until h is settled at every site.
func waitSettled(t *testing.T, c *cluster, sites []string, h stabilizer.HLC) {
	t.Helper()
	for _, site := range sites {
		stabilizertest.Eventually(t, 0, func() error {
			st, err := c.Node(site).StableTime(ctxT(t), settledPredicate)
			if err != nil {
				return err
			}
			if st.Less(h) {
				return fmt.Errorf("%s: settled up to %v, not yet %v", site, st, h)
			}
			return nil
		})
	}
}

// waitSnapshot waits until snapshot reads under "all" at site see h: a
// site that just started knows no stable time yet, and reads at 0.
func waitSnapshot(t *testing.T, c *cluster, site string, h stabilizer.HLC) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		st, err := c.store(site).snapshotTime(ctxT(t), "all")
		if err != nil {
			return err
		}
		if st.Less(h) {
			return fmt.Errorf("%s: snapshots at %v, not yet %v", site, st, h)
		}
		return nil
	})
}

// prunePass runs the pruner of a store that was not started over the
// whole namespace, and returns how many steps it took.
func prunePass(t *testing.T, s *Store) int {
	t.Helper()
	for steps := 1; steps <= 1000; steps++ {
		done, err := s.ret.pruneStep(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return steps
		}
	}
	t.Fatal("no pass in 1000 steps")
	return 0
}

// historyOf lists the values of key's versions at s, newest first ("-"
// for a deletion).
func historyOf(t *testing.T, s *Store, key string) []string {
	t.Helper()
	var out []string
	err := s.state.history(key, func(v Version) (bool, error) {
		if v.Deleted {
			out = append(out, "-")
		} else {
			out = append(out, string(v.Value))
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReads reads key in every mode at s and wants value.
func checkReads(t *testing.T, s *Store, key, value string) {
	t.Helper()
	for _, o := range []ReadOptions{{}, {Stable: "all"}, {Stable: "majority"}, {Quorum: "majority"}, {Snapshot: "all"}} {
		r, err := s.Get(ctxT(t), key, o)
		if err != nil || string(r.Value) != value {
			t.Errorf("%s: get %q %+v: %q %v, want %q", s.node.Site(), key, o, r.Value, err, value)
		}
	}
}

// checkGone wants key not found at s in every read mode.
func checkGone(t *testing.T, s *Store, key string) {
	t.Helper()
	for _, o := range []ReadOptions{{}, {Stable: "all"}, {Stable: "majority"}, {Quorum: "majority"}, {Snapshot: "all"}} {
		if r, err := s.Get(ctxT(t), key, o); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: get %q %+v: %+v %v, want ErrNotFound", s.node.Site(), key, o, r, err)
		}
	}
}

func TestTruncationPoints(t *testing.T) {
	acks := func(applied ...uint64) []uint64 {
		out := make([]uint64, 3*len(applied))
		for i, a := range applied {
			out[i] = a + 5            // received
			out[len(applied)+i] = a   // persisted
			out[2*len(applied)+i] = a // applied
		}
		return out
	}
	none := []bool{false, false, false}
	for _, c := range []struct {
		name        string
		acks        []uint64
		lag         uint64
		lagging     []bool
		all, others uint64
	}{
		{"least applied", acks(10, 7, 9), 0, none, 7, 7},
		{"lag", acks(10, 7, 9), 5, none, 2, 2},
		{"lag past everything", acks(10, 7, 9), 8, none, 0, 0},
		{"a lagging peer does not count for others", acks(10, 7, 9), 0, []bool{false, true, false}, 7, 9},
		{"every peer lagging", acks(10, 7, 9), 1, []bool{false, true, true}, 6, 9},
		{"short table", []uint64{1, 2, 3}, 0, none, 0, 0},
	} {
		all, others := truncationPoints(c.acks, 3, c.lag, c.lagging)
		if all != c.all || others != c.others {
			t.Errorf("%s: %d, %d; want %d, %d", c.name, all, others, c.all, c.others)
		}
	}
}

func TestKeyPlan(t *testing.T) {
	h := func(wall int64) stabilizer.HLC { return stabilizer.HLC{Wall: wall * int64(time.Second)} }
	now := time.Unix(100, 0)
	for _, c := range []struct {
		name         string
		versions     []int64 // walls in seconds, newest first; equal ones are ties
		settled      int64
		keepVersions int
		keepAge      time.Duration
		want         string // k: kept, d: deleted
		lone         bool
	}{
		{name: "nothing settled", versions: []int64{5, 4, 3}, settled: 2, keepVersions: 1, want: "kkk"},
		{name: "newer and settled kept", versions: []int64{5, 4, 3, 2}, settled: 4, keepVersions: 1, want: "kkdd", lone: true},
		{name: "settled newest", versions: []int64{5, 4, 3}, settled: 9, keepVersions: 1, want: "kdd", lone: true},
		{name: "only version", versions: []int64{3}, settled: 9, keepVersions: 1, want: "k", lone: true},
		{name: "keep versions counts the newer ones", versions: []int64{6, 5, 4, 3, 2}, settled: 5, keepVersions: 3, want: "kkkdd"},
		{name: "keep versions within the newer ones", versions: []int64{6, 5, 4, 3}, settled: 5, keepVersions: 1, want: "kkdd", lone: true},
		{name: "ties at the settled version stay", versions: []int64{5, 5, 4, 3}, settled: 5, keepVersions: 1, want: "kkdd"},
		{name: "ties at the boundary stay", versions: []int64{5, 4, 4, 3}, settled: 5, keepVersions: 2, want: "kkkd"},
		{name: "keep age", versions: []int64{90, 50, 45, 10}, settled: 90, keepVersions: 1, keepAge: 60 * time.Second, want: "kkkd"},
		{name: "keep age large", versions: []int64{90, 50, 10}, settled: 90, keepVersions: 1, keepAge: time.Hour, want: "kkk"},
	} {
		p := keyPlan{settled: h(c.settled), keepVersions: c.keepVersions, keepAge: c.keepAge, now: now}
		var got []byte
		for _, w := range c.versions {
			if p.next(h(w)) {
				got = append(got, 'd')
			} else {
				got = append(got, 'k')
			}
		}
		if string(got) != c.want || p.loneSettled() != c.lone || p.dropped != strings.Count(c.want, "d") {
			t.Errorf("%s: %s lone %v dropped %d; want %s lone %v", c.name, got, p.loneSettled(), p.dropped, c.want, c.lone)
		}
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	h := stabilizer.HLC{Wall: -7, Logical: 3}
	for _, tomb := range []*Version{nil, {Origin: "eu-west-1", Seq: 1 << 40, Deleted: true}} {
		m, err := decodeMarker("k", appendMarker(nil, h, tomb))
		want := marker{horizon: h}
		if tomb != nil {
			want = marker{horizon: h, tomb: true, origin: tomb.Origin, seq: tomb.Seq}
		}
		if err != nil || m != want {
			t.Errorf("tomb %v: %+v %v, want %+v", tomb, m, err, want)
		}
	}
	if _, err := decodeMarker("k", []byte{1, 2}); err == nil {
		t.Error("a short marker decodes")
	}
	if got := invertedHLC(appendInvertedHLC(nil, h)); got != h {
		t.Errorf("inverted HLC %v back as %v", h, got)
	}
	if _, err := frontier.Compile(settledPredicate, &frontier.Schema{Sites: sites3}); err != nil {
		t.Errorf("%s: %v", settledPredicate, err)
	}
}

func TestRetentionConfigValidate(t *testing.T) {
	n, _ := stabilizertest.OpenNode(t, "us-east-1", "")
	err := (&Config{Node: n, Retention: Retention{LogLag: -1, TruncateInterval: -time.Second, MaxLagTime: -1,
		KeepVersions: -2, KeepAge: -time.Minute, PruneInterval: -time.Millisecond}}).Validate()
	for _, w := range []string{"LogLag: -1 is negative", "TruncateInterval: -1s is negative", "KeepVersions: -2 is negative",
		"KeepAge: -1m0s is negative", "PruneInterval: -1ms is negative"} {
		if err == nil || !strings.Contains(err.Error(), "kv: config: "+w) {
			t.Errorf("Validate does not say %q:\n%v", w, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "MaxLagTime") {
		t.Errorf("MaxLagTime -1 (never) refused: %v", err)
	}
}

// TestLogTruncatedOnceAppliedEverywhere: with the stores running, every
// origin's kv stream is truncated at every site up to what all applied;
// every read mode still finds every key; a site restarted afterwards
// serves the same values and writes flow both ways.
func TestLogTruncatedOnceAppliedEverywhere(t *testing.T) {
	c := newRetCluster(t, Retention{TruncateInterval: 5 * time.Millisecond, PruneInterval: 5 * time.Millisecond}, true, sites3...)
	ctx := ctxT(t)
	want := map[string]string{}
	last := map[string]WriteResult{}
	for i := range 30 {
		site := sites3[i%3]
		key, val := fmt.Sprintf("jobs/%d", i%10), fmt.Sprintf("%s-%d", site, i)
		w, err := c.store(site).Put(ctx, key, []byte(val), WriteOptions{Wait: "all"})
		if err != nil {
			t.Fatal(err)
		}
		want[key], last[site] = val, w
	}
	waitAppliedEverywhere(t, c, sites3, slices.Collect(maps.Values(last))...)
	stabilizertest.Eventually(t, 0, func() error {
		for _, site := range sites3 {
			streams, err := c.Node(site).Streams(ctx)
			if err != nil {
				return err
			}
			for _, st := range streams {
				if w, ok := last[st.Stream.Origin]; ok && st.Stream.Name == Stream && st.Truncated != w.Seq {
					return fmt.Errorf("%s: %s truncated up to %d of %d", site, st.Stream, st.Truncated, w.Seq)
				}
			}
		}
		return nil
	})
	for _, origin := range sites3 {
		m := c.store("eu-west-1").ret.m
		stabilizertest.Eventually(t, 0, func() error {
			tr, kept := testutil.ToFloat64(m.truncated.WithLabelValues(origin)), testutil.ToFloat64(m.retained.WithLabelValues(origin))
			if tr != float64(last[origin].Seq) || kept != 0 {
				return fmt.Errorf("%s: kv_log_truncated_seq %v, kv_log_retained_entries %v", origin, tr, kept)
			}
			return nil
		})
	}
	checkAll := func(site string) {
		t.Helper()
		for _, w := range last {
			waitSnapshot(t, c, site, w.HLC)
		}
		for key, val := range want {
			checkReads(t, c.store(site), key, val)
		}
		vs, err := c.store(site).Scan(ctx, "jobs/", 0, ReadOptions{})
		if err != nil || len(vs) != len(want) {
			t.Fatalf("%s: scan: %d keys, %v", site, len(vs), err)
		}
		for _, v := range vs {
			if string(v.Value) != want[v.Key] {
				t.Errorf("%s: scan: %s = %q, want %q", site, v.Key, v.Value, want[v.Key])
			}
		}
	}
	// The pruners ran meanwhile: each key keeps its newest version only.
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			for key := range want {
				if h := historyOf(t, c.store(site), key); len(h) != 1 {
					return fmt.Errorf("%s: %s has %d versions", site, key, len(h))
				}
			}
			return nil
		})
	}
	for _, site := range sites3 {
		checkAll(site)
	}
	c.stop("eu-west-1")
	c.Start("eu-west-1")
	checkAll("eu-west-1")
	for _, w := range []struct{ from, to string }{{"eu-west-1", "us-east-1"}, {"ap-south-1", "eu-west-1"}} {
		res, err := c.store(w.from).Put(ctx, "jobs/new", []byte(w.from), WriteOptions{Wait: "all"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Node(w.to).WaitFor(ctx, streamOf(res), "applied(self)", res.Seq); err != nil {
			t.Fatal(err)
		}
		if r := mustGet(t, c.store(w.to), "jobs/new", ReadOptions{}); string(r.Value) != w.from {
			t.Fatalf("%s reads %q, want %s's write", w.to, r.Value, w.from)
		}
	}
}

// TestTruncationWaitsForStoppedSite: with a site stopped, the others
// truncate up to what it applied and no further, also once it has been
// down for longer than MaxLagTime while its state cannot be transferred;
// it then catches up from the log.
func TestTruncationWaitsForStoppedSite(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	c := newRetCluster(t, Retention{MaxLagTime: time.Minute, Now: clock.Now}, false, sites3...)
	ctx := ctxT(t)
	us := c.store("us-east-1")
	var first, second WriteResult
	for i := range 10 {
		if i == 5 {
			c.stop("ap-south-1")
		}
		wait := "all"
		if i >= 5 {
			wait = "majority"
		}
		w, err := us.Put(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i)), WriteOptions{Wait: wait})
		if err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			first = w
			waitAppliedEverywhere(t, c, sites3, first)
		}
		second = w
	}
	up := []string{"us-east-1", "eu-west-1"}
	for _, site := range up {
		if err := c.Node(site).WaitFor(ctx, streamOf(second), `min(applied("us-east-1"), applied("eu-west-1"))`, second.Seq); err != nil {
			t.Fatal(err)
		}
	}
	id := streamOf(first)
	apIndex, _ := c.Schema.SiteIndex("ap-south-1")
	floorAt := func(site string) (floor, apApplied uint64) {
		t.Helper()
		if err := c.store(site).ret.truncate(ctx); err != nil {
			t.Fatal(err)
		}
		streams, err := c.Node(site).Streams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(streams, func(st stabilizer.StreamStatus) bool { return st.Stream == id })
		return streams[i].Truncated, streams[i].Acks[frontier.Applied*len(sites3)+apIndex]
	}
	for _, site := range up {
		floor, apApplied := floorAt(site)
		if apApplied != first.Seq || floor != apApplied {
			t.Fatalf("%s: %s truncated up to %d; ap-south-1 applied %d, want both %d", site, id, floor, apApplied, first.Seq)
		}
	}
	// Down for longer than MaxLagTime (the first truncate saw it down).
	clock.Advance(2 * time.Minute)
	_, beyondErr := c.Node("us-east-1").Truncate(ctx, id, first.Seq, stabilizer.TruncateOptions{BeyondPeers: true})
	for _, site := range up {
		floor, apApplied := floorAt(site)
		switch {
		case beyondErr != nil && floor != apApplied:
			t.Fatalf("%s: truncated up to %d, past what ap-south-1 applied (%d), while its state cannot be transferred", site, floor, apApplied)
		case beyondErr != nil && !c.store(site).ret.refused[id]:
			t.Fatalf("%s: the refusal of a truncation beyond ap-south-1 went unnoticed", site)
		case beyondErr == nil && floor != second.Seq:
			t.Fatalf("%s: truncated up to %d, want %d: ap-south-1 has been down for longer than MaxLagTime", site, floor, second.Seq)
		}
	}
	if beyondErr == nil {
		t.Log("state transfer is enabled: the log was truncated beyond the stopped site")
		return
	}
	if !strings.Contains(beyondErr.Error(), "EnableStateTransfer") {
		t.Fatalf("the refusal does not say why: %v", beyondErr)
	}
	t.Logf("truncation beyond a stopped site refused, as it should be without state transfer: %v", beyondErr)
	// It catches up from what the log kept.
	c.Start("ap-south-1")
	if err := c.Node("ap-south-1").WaitFor(ctx, id, "applied(self)", second.Seq); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, c, "ap-south-1", second.HLC)
	for i := range 10 {
		checkReads(t, c.store("ap-south-1"), fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
}

// TestPruneHistory: a key written ten times keeps, once settled, what
// KeepVersions and KeepAge say; every read mode reads the newest value,
// and a read at a time before the oldest kept version fails with
// ErrHistoryPruned.
func TestPruneHistory(t *testing.T) {
	sites := []string{"us-east-1", "eu-west-1"}
	for _, c := range []struct {
		name string
		ret  Retention
		keep int
	}{
		{"default", Retention{}, 1},
		{"keep versions", Retention{KeepVersions: 3}, 3},
		{"keep age", Retention{KeepAge: time.Hour}, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newRetCluster(t, c.ret, false, sites...)
			ctx := ctxT(t)
			var ws []WriteResult
			for i := range 10 {
				w, err := cl.store(sites[i%2]).Put(ctx, "ckpt/latest", []byte(fmt.Sprintf("step-%d", i)), WriteOptions{Wait: "all"})
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			waitSettled(t, cl, sites, ws[9].HLC)
			var want []string
			for i := 9; i >= 10-c.keep; i-- {
				want = append(want, fmt.Sprintf("step-%d", i))
			}
			for _, site := range sites {
				s := cl.store(site)
				if steps := prunePass(t, s); steps != 1 {
					t.Errorf("%s: a pass over one key took %d steps", site, steps)
				}
				if got := historyOf(t, s, "ckpt/latest"); !slices.Equal(got, want) {
					t.Fatalf("%s: history %q, want %q", site, got, want)
				}
				if n := testutil.ToFloat64(s.ret.m.pruned); n != float64(10-c.keep) {
					t.Errorf("%s: kv_versions_pruned_total %v, want %d", site, n, 10-c.keep)
				}
				if n := testutil.ToFloat64(s.ret.m.passes); n != 1 {
					t.Errorf("%s: kv_prune_passes_total %v", site, n)
				}
			}
			for _, site := range sites {
				checkReads(t, cl.store(site), "ckpt/latest", "step-9")
			}
			s := cl.store("eu-west-1")
			oldest := ws[10-c.keep]
			if v, found, err := s.state.at("ckpt/latest", oldest.HLC); err != nil || !found || v.HLC != oldest.HLC {
				t.Errorf("at the oldest kept version: %+v %v %v", v, found, err)
			}
			if c.keep == 10 {
				return
			}
			before := ws[9-c.keep].HLC
			_, _, err := s.state.at("ckpt/latest", before)
			if !errors.Is(err, ErrHistoryPruned) || !strings.Contains(err.Error(), `"ckpt/latest"`) ||
				!strings.Contains(err.Error(), before.String()) || !strings.Contains(err.Error(), oldest.HLC.String()) {
				t.Fatalf("at %v, before the oldest kept version %v: %v; want ErrHistoryPruned naming key, time and horizon", before, oldest.HLC, err)
			}
			t.Log(err)
			if st := status.Convert(toStatus(err)); st.Code() != codes.OutOfRange || st.Message() != err.Error() {
				t.Errorf("toStatus: %v %q", st.Code(), st.Message())
			}
			// A second pass finds nothing more to prune.
			prunePass(t, s)
			if n := testutil.ToFloat64(s.ret.m.pruned); n != float64(10-c.keep) {
				t.Errorf("second pass: kv_versions_pruned_total %v", n)
			}
		})
	}
}

// TestPruneDropsSettledDeletion: a deleted key whose deletion is settled
// leaves no version behind, only its marker: it reads as absent in every
// mode, at or after the deletion too, and a read before it fails. Written
// again, it reads again.
func TestPruneDropsSettledDeletion(t *testing.T) {
	sites := []string{"us-east-1", "eu-west-1"}
	c := newRetCluster(t, Retention{}, false, sites...)
	ctx := ctxT(t)
	us, eu := c.store("us-east-1"), c.store("eu-west-1")
	var puts []WriteResult
	for i := range 3 {
		w, err := us.Put(ctx, "job/7", []byte(fmt.Sprint(i)), WriteOptions{Wait: "all"})
		if err != nil {
			t.Fatal(err)
		}
		puts = append(puts, w)
	}
	del, err := eu.Delete(ctx, "job/7", WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := us.Put(ctx, "job/8", []byte("kept"), WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, sites, keep.HLC)
	for _, site := range sites {
		s := c.store(site)
		prunePass(t, s)
		if h := historyOf(t, s, "job/7"); len(h) != 0 {
			t.Fatalf("%s: history of the deleted key %q, want none", site, h)
		}
		if h := historyOf(t, s, "job/8"); !slices.Equal(h, []string{"kept"}) {
			t.Fatalf("%s: history of the other key %q", site, h)
		}
		if n := testutil.ToFloat64(s.ret.m.pruned); n != 4 {
			t.Errorf("%s: kv_versions_pruned_total %v, want 4", site, n)
		}
		checkGone(t, s, "job/7")
		checkReads(t, s, "job/8", "kept")
		if _, found, err := s.state.at("job/7", del.HLC); found || err != nil {
			t.Errorf("%s: at the deletion: found %v, %v; want nothing", site, found, err)
		}
		if _, _, err := s.state.at("job/7", puts[2].HLC); !errors.Is(err, ErrHistoryPruned) {
			t.Errorf("%s: at the last put before the deletion: %v, want ErrHistoryPruned", site, err)
		}
		if vs, err := s.Scan(ctx, "job/", 0, ReadOptions{}); err != nil || len(vs) != 1 || vs[0].Key != "job/8" {
			t.Errorf("%s: scan %+v %v", site, vs, err)
		}
	}
	again, err := us.Put(ctx, "job/7", []byte("again"), WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, sites, again.HLC)
	for _, site := range sites {
		s := c.store(site)
		checkReads(t, s, "job/7", "again")
		prunePass(t, s)
		if h := historyOf(t, s, "job/7"); !slices.Equal(h, []string{"again"}) {
			t.Fatalf("%s: history %q after writing the key again", site, h)
		}
		if _, found, err := s.state.at("job/7", del.HLC); found || err != nil {
			t.Errorf("%s: at the deletion, after writing again: found %v, %v; want nothing", site, found, err)
		}
	}
}

// TestPruneStepsAreBounded: a step stops at the first key after
// pruneStepKeys versions, or before deleting more than that many versions
// of one key, and the steps of a pass prune everything.
func TestPruneStepsAreBounded(t *testing.T) {
	const hot, keys = pruneStepKeys + 500, pruneStepKeys * 3 / 4
	c := newRetCluster(t, Retention{}, false, "solo")
	s := c.store("solo")
	ctx := ctxT(t)
	var last WriteResult
	write := func(ops []Op) {
		for len(ops) > 0 {
			n := min(len(ops), 500)
			res, err := s.WriteBatch(ctx, ops[:n], WriteOptions{Wait: "local"})
			if err != nil {
				t.Fatal(err)
			}
			last = res[n-1].WriteResult
			ops = ops[n:]
		}
	}
	var ops []Op
	for i := range hot {
		ops = append(ops, Op{Key: "a/hot", Value: []byte(fmt.Sprint(i))})
	}
	for v := range 2 {
		for i := range keys {
			ops = append(ops, Op{Key: fmt.Sprintf("k/%04d", i), Value: []byte(fmt.Sprint(v))})
		}
	}
	write(ops)
	waitSettled(t, c, []string{"solo"}, last.HLC)
	done, err := s.ret.pruneStep(ctx)
	if err != nil || done {
		t.Fatalf("first step: done %v, %v", done, err)
	}
	if n := testutil.ToFloat64(s.ret.m.pruned); n != pruneStepKeys {
		t.Fatalf("the first step pruned %v versions, want %d (then it stops inside the hot key)", n, pruneStepKeys)
	}
	steps := 1 + prunePass(t, s)
	if steps < 3 {
		t.Errorf("a pass over %d versions took %d steps", hot+2*keys, steps)
	}
	if n := testutil.ToFloat64(s.ret.m.pruned); n != hot-1+keys {
		t.Errorf("pruned %v versions, want %d", n, hot-1+keys)
	}
	if h := historyOf(t, s, "a/hot"); !slices.Equal(h, []string{fmt.Sprint(hot - 1)}) {
		t.Errorf("hot key: %d versions left, newest %q", len(h), h[:min(1, len(h))])
	}
	for i := range keys {
		if h := historyOf(t, s, fmt.Sprintf("k/%04d", i)); !slices.Equal(h, []string{"1"}) {
			t.Fatalf("k/%04d: %q", i, h)
		}
	}
}
