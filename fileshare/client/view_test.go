package client

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

var viewSeed = flag.Uint64("view.seed", 0, "seed of TestDeltaListsKeepTheFullView (0: from the clock)")

// sameAsFullList fails the test unless what c holds of the share is what a
// full List at its site says now, record for record (marks included), and
// plan.Resolve makes the same of both.
func sameAsFullList(t *testing.T, c *tclient, what string) {
	t.Helper()
	pbs, _, err := c.r.list(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	c.runMu.Lock()
	defer c.runMu.Unlock()
	byID := map[string]*filesharepb.Version{}
	for _, v := range pbs {
		byID[v.Id] = v
	}
	var diff []string
	for id, v := range byID {
		if h, ok := c.list.byID[id]; !ok {
			diff = append(diff, "missing "+id+" "+v.Path)
		} else if !proto.Equal(h, v) {
			diff = append(diff, fmt.Sprintf("%s %s: held stable %v persisted %v, listed %v %v", id, v.Path, h.Stable, h.PersistedAt, v.Stable, v.PersistedAt))
		}
	}
	for id, h := range c.list.byID {
		if byID[id] == nil {
			diff = append(diff, "extra "+id+" "+h.Path)
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Fatalf("%s: the list held differs from a full List:\n%s", what, strings.Join(diff, "\n"))
	}
	got, want := c.resolve(c.listed()), plan.Resolve(toPlanAll(pbs))
	if !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Heads, want.Heads) ||
		!reflect.DeepEqual(got.Conflicts, want.Conflicts) || !reflect.DeepEqual(got.Pending, want.Pending) {
		t.Fatalf("%s: plan.Resolve differs on the list held", what)
	}
}

// TestDeltaListsKeepTheFullView drives random histories (uploads from
// another client, versions injected with parents known or not, stability
// held and released, chunks held back at the client's site, versions
// forgotten, sites restarting their cursors, a site answering as an older
// one) and checks after every step that what the client holds, kept by
// deltas, is what a full List says, and that the planner sees the same. A
// failure prints the seed; -view.seed replays it.
func TestDeltaListsKeepTheFullView(t *testing.T) {
	seed := *viewSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test -run TestDeltaListsKeepTheFullView -view.seed %d ./fileshare/client)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	w := e.client("w", "us-east-1", Options{})
	o := e.client("o", "eu-west-1", Options{})
	site := e.sites["eu-west-1"]
	paths := []string{"a.txt", "b.txt", "d/c.txt", "d/e/f.txt"}
	var held []plan.VersionID
	holding, chunksHeld := false, false
	forgot, resets := 0, 0
	for i := range 200 {
		switch op := rng.IntN(20); {
		case op < 5:
			w.write(paths[rng.IntN(len(paths))], fmt.Sprintf("edit %d %d", i, rng.Uint64()))
			w.round()
			if vs := e.cl.Versions(); holding && len(vs) > 0 {
				held = append(held, vs[len(vs)-1].ID)
			}
		case op < 7:
			holding = !holding
			e.cl.HoldStability(holding)
		case op < 9 && len(held) > 0:
			k := rng.IntN(len(held))
			e.cl.Release(held[k])
			held = slices.Delete(held, k, k+1)
		case op < 10:
			chunksHeld = !chunksHeld
			site.HoldChunks(chunksHeld)
		case op < 11:
			if vs := e.cl.Versions(); len(vs) > 0 {
				e.cl.Forget(vs[rng.IntN(len(vs))].ID)
				forgot++
			}
		case op < 12:
			e.cl.ResetCursors()
			resets++
		case op < 13: // a round against a site of an older release
			e.cl.NoCursors(true)
			o.round()
			e.cl.NoCursors(false)
		case op < 15: // a version whose parent may be unknown
			v := plan.Version{Path: paths[rng.IntN(len(paths))], Size: 1, Content: plan.Hash{byte(i)}}
			if vs := e.cl.Versions(); len(vs) > 0 && rng.IntN(2) == 0 {
				v.Parents = []plan.VersionID{vs[rng.IntN(len(vs))].ID}
			} else if rng.IntN(2) == 0 {
				v.Parents = []plan.VersionID{plan.VersionID(fmt.Sprintf("unknown-%d", i))}
			}
			e.cl.Inject(t, "docs", v)
		default:
			o.round()
		}
		if _, err := o.SyncOnce(context.Background()); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, i, err)
		}
		sameAsFullList(t, o, fmt.Sprintf("seed %d step %d", seed, i))
	}
	t.Logf("answers: %d full, %d deltas; %d forgotten, %d cursor resets", o.list.fulls, o.list.deltas, forgot, resets)
	if o.list.deltas < 100 || o.list.fulls < 3 || forgot == 0 || resets == 0 {
		t.Fatalf("seed %d: the run did not exercise deltas and their fallbacks enough", seed)
	}
}

// TestRoundsListWhatChanged: a client in step lists its share in full
// once, then asks only for what changed; after the site restarts (its
// cursors void) it gets the full list once more, and every
// FullListInterval it asks for it anyway.
func TestRoundsListWhatChanged(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{Now: clk.now, SettleTime: time.Nanosecond})
	site := e.sites["eu-west-1"]
	for i := range 5 {
		a.write(fmt.Sprintf("f%d", i), "x")
		quiesce(t, a, b)
	}
	full, delta := site.Lists()
	if full != 1 || delta < 5 || b.list.fulls != 1 {
		t.Fatalf("site answered %d full and %d delta lists (client counts %d full), want 1 full then deltas", full, delta, b.list.fulls)
	}
	if got := b.files(); len(got) != 5 {
		t.Fatalf("b has %v", got)
	}
	e.cl.ResetCursors()
	a.write("after-restart", "y")
	quiesce(t, a, b)
	if full, _ := site.Lists(); full != 2 {
		t.Fatalf("%d full lists after the site's cursors were voided, want 2", full)
	}
	if _, ok := b.read("after-restart"); !ok {
		t.Fatal("b misses after-restart")
	}
	clk.advance(DefaultFullListInterval)
	b.round()
	if full, _ := site.Lists(); full != 3 {
		t.Fatalf("%d full lists after FullListInterval, want 3", full)
	}
}

// TestListsFromAnOlderSite: a site that gives no cursors answers every
// List in full, and the client syncs as before.
func TestListsFromAnOlderSite(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	e.cl.NoCursors(true)
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	a.write("x", "from a")
	quiesce(t, a, b)
	if got, _ := b.read("x"); got != "from a" {
		t.Fatalf("b has x = %q", got)
	}
	if _, delta := e.sites["eu-west-1"].Lists(); delta != 0 || b.list.deltas != 0 {
		t.Fatalf("an older site answered %d deltas", delta)
	}
}

// TestListAfterFailover: a client whose site fails moves to the next one,
// which answers its cursor (the failed site's) with the full list.
func TestListAfterFailover(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"}, "us-east-1", "eu-west-1", "ap-northeast-1")
	a := e.client("a", "us-east-1", Options{})
	dir := t.TempDir()
	cfg := Config{Sites: []string{e.sites["eu-west-1"].Addr, e.sites["ap-northeast-1"].Addr}, Share: "docs",
		SettleTime: Duration(time.Nanosecond), RetryInterval: Duration(20 * time.Millisecond)}
	if _, err := Init(context.Background(), dir, cfg, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.open("b", dir, Options{})
	a.write("one", "1")
	quiesce(t, a, b)
	e.sites["eu-west-1"].Stop()
	a.write("two", "2")
	quiesce(t, a)
	for range 3 { // the first round may fail on the lost site
		_, _ = b.SyncOnce(context.Background())
	}
	quiesce(t, b)
	if got := b.files(); got["two"] != "2" {
		t.Fatalf("b after the failover: %v", got)
	}
	if full, _ := e.sites["ap-northeast-1"].Lists(); full != 1 {
		t.Fatalf("the site failed over to answered %d full lists, want 1", full)
	}
	sameAsFullList(t, b, "after the failover")
}
