package lin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestPutGetCAS(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitLeader(c.sites, 5*time.Second)
	t.Logf("leader %s", leader)
	ctx := stabilizertest.Context(t, 10*time.Second)
	for _, s := range c.sites {
		n := c.node(s)
		key := "job/" + s
		v1, err := n.Put(ctx, key, []byte("queued"))
		if err != nil {
			t.Fatalf("put at %s: %v", s, err)
		}
		for _, r := range c.sites {
			it, err := c.node(r).Get(ctx, key)
			if err != nil || string(it.Value) != "queued" || it.Version != v1 {
				t.Fatalf("get %s at %s = %+v, %v; want queued version %d", key, r, it, err, v1)
			}
		}
		v2, err := n.CompareAndSwap(ctx, key, IfVersion(v1), []byte("running"))
		if err != nil || v2 <= v1 {
			t.Fatalf("cas version: %d, %v", v2, err)
		}
		_, err = n.CompareAndSwap(ctx, key, IfVersion(v1), []byte("failed"))
		var ce *CompareError
		if !errors.As(err, &ce) || ce.Version != v2 || string(ce.Value) != "running" || !errors.Is(err, ErrCompareFailed) {
			t.Fatalf("stale cas: %v", err)
		}
		t.Logf("stale cas: %v", err)
		if _, err := n.CompareAndSwap(ctx, key, IfValue([]byte("running")), []byte("done")); err != nil {
			t.Fatalf("cas value: %v", err)
		}
		if _, err := n.CompareAndSwap(ctx, key, IfAbsent(), []byte("x")); !errors.Is(err, ErrCompareFailed) {
			t.Fatalf("cas absent on existing key: %v", err)
		}
		if _, err := n.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if _, err := n.CompareAndSwap(ctx, key, IfAbsent(), []byte("again")); err != nil {
			t.Fatalf("cas absent: %v", err)
		}
	}
}

func TestNoLeaderError(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitLeader(c.sites, 5*time.Second)
	var other string
	for _, s := range c.sites {
		if s != leader {
			other = s
			break
		}
	}
	// Isolate a follower: it loses its leader and cannot elect one.
	c.net.Partition([]string{other}, c.sites)
	eventually(t, 5*time.Second, func() error {
		if l := c.node(other).Status().Leader; l != "" {
			return fmt.Errorf("%s still follows %s", other, l)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.node(other).Put(ctx, "k", []byte("v"))
	var nl *NoLeaderError
	if !errors.As(err, &nl) || nl.LastLeader != leader || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("put on isolated follower: %v", err)
	}
	t.Logf("%v", err)

	// A leader cut off from both followers reports the missing quorum
	// (until CheckQuorum makes it step down).
	c.net.Heal()
	leader = c.waitLeader(c.sites, 5*time.Second)
	c.net.Partition([]string{leader}, c.sites)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	_, err = c.node(leader).Put(ctx2, "k", []byte("v"))
	if !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("put on isolated leader: %v", err)
	}
	t.Logf("%v", err)
}

func TestRestartRecovers(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitLeader(c.sites, 5*time.Second)
	ctx := stabilizertest.Context(t, 20*time.Second)
	want := map[string]uint64{}
	for i := range 50 {
		k := fmt.Sprintf("job/%d", i%10)
		v, err := c.node(c.sites[i%3]).Put(ctx, k, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	// Restart every site at once: all state comes back from pebble.
	for _, s := range c.sites {
		c.stop(s)
	}
	for _, s := range c.sites {
		c.start(s)
	}
	c.waitLeader(c.sites, 5*time.Second)
	for _, s := range c.sites {
		for k, v := range want {
			it, err := c.node(s).Get(ctx, k)
			if err != nil || it.Version != v {
				t.Fatalf("after restart, get %s at %s = %+v, %v; want version %d", k, s, it, err, v)
			}
		}
	}
}
