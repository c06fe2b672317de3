package lin

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestCompactionAndSnapshot writes past several snapshots while a follower
// is down, so that it must catch up from a snapshot, then restarts every
// site from its compacted state.
func TestCompactionAndSnapshot(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 40
		cfg.CatchUpEntries = 10
	})
	leader := c.waitLeader(c.sites, 5*time.Second)
	var down string
	for _, s := range c.sites {
		if s != leader {
			down = s
			break
		}
	}
	ctx := stabilizertest.Context(t, 20*time.Second)
	// A lease held across the snapshot must survive it.
	l, err := c.node(leader).Grant(ctx, "job/lease", "us-east-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(down)
	want := map[string]string{}
	for i := range 200 {
		k, v := fmt.Sprintf("job/%d", i%17), fmt.Sprint(i)
		if _, err := c.node(leader).Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	entries := func(site string) int {
		n := 0
		_ = c.node(site).rlog.ns.ScanPrefix(entryPrefix, func(_, _ []byte) error { n++; return nil })
		return n
	}
	if n := entries(leader); n > 60 {
		t.Errorf("leader keeps %d log entries in pebble after compaction", n)
	}

	c.start(down)
	check := func(site string) error {
		n := c.node(site)
		n.mu.Lock()
		defer n.mu.Unlock()
		for k, v := range want {
			if it, ok := n.mu.fsm.get(k); !ok || string(it.value) != v {
				return fmt.Errorf("%s: %s = %q, want %q", site, k, it.value, v)
			}
		}
		if got := n.mu.fsm.lease("job/lease", time.Now()); got.Holder != "us-east-1" || got.Token != l.Token {
			return fmt.Errorf("%s: lease %+v", site, got)
		}
		return nil
	}
	eventually(t, 5*time.Second, func() error { return check(down) })
	if st := c.node(down).Status(); st.Snapshot < 100 {
		t.Errorf("%s caught up without installing a snapshot: %+v", down, st)
	}

	for _, s := range c.sites {
		c.stop(s)
	}
	for _, s := range c.sites {
		c.start(s)
	}
	for _, s := range c.sites {
		eventually(t, 5*time.Second, func() error { return check(s) })
	}
}

// TestWipedVoterComesBackThroughASnapshot: a voter loses its store while
// the others write past several snapshots (their logs compacted). It
// comes back empty and catches up from the leader's Raft snapshot, not
// from a log, and serves every key.
func TestWipedVoterComesBackThroughASnapshot(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 40
		cfg.CatchUpEntries = 10
	})
	leader := c.waitLeader(c.sites, 5*time.Second)
	var wiped string
	for _, s := range c.sites {
		if s != leader {
			wiped = s
			break
		}
	}
	ctx := stabilizertest.Context(t, 20*time.Second)
	want := map[string]string{}
	put := func(i int) {
		k, v := fmt.Sprintf("job/%d", i%17), fmt.Sprint(i)
		if _, err := c.node(leader).Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := range 50 {
		put(i)
	}
	c.stop(wiped)
	if err := os.RemoveAll(c.Dir(wiped)); err != nil {
		t.Fatal(err)
	}
	for i := 50; i < 200; i++ {
		put(i)
	}
	c.start(wiped)
	eventually(t, 10*time.Second, func() error {
		n := c.node(wiped)
		n.mu.Lock()
		defer n.mu.Unlock()
		for k, v := range want {
			if it, ok := n.mu.fsm.get(k); !ok || string(it.value) != v {
				return fmt.Errorf("%s: %s = %q, want %q", wiped, k, it.value, v)
			}
		}
		return nil
	})
	if st := c.node(wiped).Status(); st.Snapshot < 100 {
		t.Errorf("the wiped voter caught up without installing a snapshot: %+v", st)
	}
	// It votes and serves again: with the leader gone, the two left elect.
	c.stop(leader)
	rest := slices.DeleteFunc(slices.Clone(c.sites), func(s string) bool { return s == leader })
	nl := c.waitLeader(rest, 10*time.Second)
	if _, err := c.node(nl).Put(ctx, "job/after", []byte("x")); err != nil {
		t.Fatalf("after the wipe, the two remaining voters cannot commit: %v", err)
	}
}
