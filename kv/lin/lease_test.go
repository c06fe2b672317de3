package lin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestLeaseBasics(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitLeader(c.sites, 5*time.Second)
	ctx := stabilizertest.Context(t, 10*time.Second)
	eu, ap := c.node("eu-west-1"), c.node("ap-south-1")

	l, err := eu.Grant(ctx, "job/7", "eu-west-1", time.Minute)
	if err != nil || l.Holder != "eu-west-1" || l.Token != 1 || l.ValidUntil.IsZero() {
		t.Fatalf("grant: %+v, %v", l, err)
	}
	// The same holder asking again renews and keeps the token.
	if l2, err := eu.Grant(ctx, "job/7", "eu-west-1", time.Minute); err != nil || l2.Token != 1 {
		t.Fatalf("re-grant: %+v, %v", l2, err)
	}
	_, err = ap.Grant(ctx, "job/7", "ap-south-1", time.Minute)
	var le *LeaseError
	if !errors.Is(err, ErrLeaseHeld) || !errors.As(err, &le) || le.Current.Holder != "eu-west-1" || le.Current.Token != 1 {
		t.Fatalf("competing grant: %v", err)
	}
	t.Logf("%v", err)
	if _, err := ap.Renew(ctx, "job/7", "ap-south-1", 1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew by non-holder: %v", err)
	}
	if _, err := eu.Renew(ctx, "job/7", "eu-west-1", 1); err != nil {
		t.Fatalf("renew: %v", err)
	}
	// Fenced writes: accepted with the current token only.
	if _, err := eu.CompareAndSwap(ctx, "job/7/record", IfLeaseHeld("job/7", 1), []byte("running")); err != nil {
		t.Fatalf("fenced write: %v", err)
	}
	if err := eu.Revoke(ctx, "job/7", "eu-west-1", 1); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if g, err := ap.GetLease(ctx, "job/7"); err != nil || g.Holder != "" || g.Token != 1 {
		t.Fatalf("get after revoke: %+v, %v", g, err)
	}
	l, err = ap.Grant(ctx, "job/7", "ap-south-1", time.Minute)
	if err != nil || l.Token != 2 {
		t.Fatalf("grant after revoke: %+v, %v", l, err)
	}
	_, err = eu.CompareAndSwap(ctx, "job/7/record", IfLeaseHeld("job/7", 1), []byte("zombie"))
	if !errors.Is(err, ErrCompareFailed) {
		t.Fatalf("fenced write with an old token: %v", err)
	}
	t.Logf("%v", err)
	if g, err := eu.GetLease(ctx, "job/7"); err != nil || g.Holder != "ap-south-1" || g.Token != 2 || g.Remaining <= 0 {
		t.Fatalf("get: %+v, %v", g, err)
	}
	if _, err := eu.Grant(ctx, "job/7", "eu-west-1", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero ttl: %v", err)
	}
}

func TestLeaseExpires(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitLeader(c.sites, 5*time.Second)
	ctx := stabilizertest.Context(t, 10*time.Second)
	n := c.node("eu-west-1")
	l, err := n.Grant(ctx, "job/1", "eu-west-1", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		g, err := n.GetLease(ctx, "job/1")
		if err == nil && g.Holder != "" {
			err = fmt.Errorf("still held: %+v", g)
		}
		return err
	})
	if _, err := n.Renew(ctx, "job/1", "eu-west-1", l.Token); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v", err)
	}
}

// tenure is one holder's stretch of believed ownership: from when its
// grant returned to the end of its last ValidUntil (or when it learned it
// lost the lease, or revoked it).
type tenure struct {
	holder     string
	token      uint64
	start, end time.Time
}

// fencedWrite is a write made under a lease with IfLeaseHeld.
type fencedWrite struct {
	version, token uint64
}

// TestLeaseSafety has two regions compete for one job's lease, each
// renewing what it holds and writing the job record fenced by its token,
// while the holder is partitioned away, leaders are killed and a leader is
// cut off with a minority. No two tenures of different holders may
// overlap in time, a token belongs to one holder, and fenced writes apply
// in token order.
func TestLeaseSafety(t *testing.T) {
	c := newCluster(t, 5, nil)
	for i, a := range c.sites {
		for _, b := range c.sites[i+1:] {
			c.net.SetDelay(a, b, time.Duration(1+i)*time.Millisecond)
		}
	}
	c.waitLeader(c.sites, 5*time.Second)
	const job, ttl = "job/42", 150 * time.Millisecond
	regions := []string{"eu-west-1", "ap-south-1"}

	var mu sync.Mutex
	var tenures []tenure
	var writes []fencedWrite
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ri, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cur *tenure
			closeTenure := func(end time.Time) {
				if end.Before(cur.end) {
					cur.end = end
				}
				mu.Lock()
				tenures = append(tenures, *cur)
				mu.Unlock()
				cur = nil
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					if cur != nil {
						closeTenure(time.Now())
					}
					return
				default:
				}
				n := c.node(region)
				if n == nil {
					time.Sleep(5 * time.Millisecond) // site down: back off
					continue
				}
				if cur != nil && !time.Now().Before(cur.end) {
					closeTenure(cur.end) // could not renew in time
				}
				if cur == nil {
					ctx, cancel := context.WithTimeout(context.Background(), ttl)
					l, err := n.Grant(ctx, job, region, ttl)
					cancel()
					if err == nil {
						cur = &tenure{holder: region, token: l.Token, start: time.Now(), end: l.ValidUntil}
					} else {
						time.Sleep(time.Duration(5+5*ri) * time.Millisecond) // pacing retries
					}
					continue
				}
				if i%37 == 0 {
					// Hand the job over voluntarily: stop acting, then revoke.
					tok := cur.token
					closeTenure(time.Now())
					ctx, cancel := context.WithTimeout(context.Background(), ttl)
					_ = n.Revoke(ctx, job, region, tok)
					cancel()
					continue
				}
				ctx, cancel := context.WithDeadline(context.Background(), cur.end)
				v, err := n.CompareAndSwap(ctx, job+"/record", IfLeaseHeld(job, cur.token), []byte(fmt.Sprintf("%s:%d", region, cur.token)))
				if err == nil {
					mu.Lock()
					writes = append(writes, fencedWrite{version: v, token: cur.token})
					mu.Unlock()
				}
				l, err := n.Renew(ctx, job, region, cur.token)
				cancel()
				switch {
				case err == nil:
					cur.end = l.ValidUntil
					time.Sleep(ttl / 4) // pacing renewals
				case errors.Is(err, ErrLeaseLost):
					closeTenure(time.Now())
				}
			}
		}()
	}

	holder := func() string {
		var h string
		_ = retry(t, 3*time.Second, func(ctx context.Context) error {
			l, err := c.node("us-east-1").GetLease(ctx, job)
			h = l.Holder
			return err
		})
		return h
	}
	wait := func(d time.Duration) { time.Sleep(d) } // let the competition run
	wait(300 * time.Millisecond)
	for round := range 3 {
		// Cut the holder's site off: it cannot renew, the lease expires,
		// the other region takes it.
		if h := holder(); h != "" {
			t.Logf("round %d: partitioning holder %s", round, h)
			c.net.Partition([]string{h}, c.sites)
			wait(3 * ttl)
			c.net.Heal()
		}
		leader := c.waitLeader(c.sites, 5*time.Second)
		t.Logf("round %d: killing leader %s", round, leader)
		c.stop(leader)
		wait(2 * ttl)
		c.start(leader)
		leader = c.waitLeader(c.sites, 5*time.Second)
		other := c.sites[(slices.Index(c.sites, leader)+1)%len(c.sites)]
		t.Logf("round %d: partitioning leader %s with %s", round, leader, other)
		c.net.Partition([]string{leader, other}, c.sites)
		wait(3 * ttl)
		c.net.Heal()
		wait(ttl)
	}
	close(stop)
	wg.Wait()

	slices.SortFunc(tenures, func(a, b tenure) int { return a.start.Compare(b.start) })
	owner := map[uint64]string{}
	changes := 0
	for i, a := range tenures {
		if h, ok := owner[a.token]; ok && h != a.holder {
			t.Errorf("token %d held by %s and by %s", a.token, h, a.holder)
		}
		owner[a.token] = a.holder
		if i > 0 && tenures[i-1].holder != a.holder {
			changes++
			if a.token <= tenures[i-1].token {
				t.Errorf("lease passed from %s (token %d) to %s with token %d", tenures[i-1].holder, tenures[i-1].token, a.holder, a.token)
			}
		}
		for _, b := range tenures[:i] {
			if b.holder != a.holder && a.start.Before(b.end) {
				t.Errorf("%s (token %d) held from %v while %s (token %d) held until %v",
					a.holder, a.token, a.start.Sub(c.t0()), b.holder, b.token, b.end.Sub(c.t0()))
			}
		}
	}
	slices.SortFunc(writes, func(a, b fencedWrite) int { return int(a.version) - int(b.version) })
	for i := 1; i < len(writes); i++ {
		if writes[i].token < writes[i-1].token {
			t.Errorf("fenced write at version %d with token %d after one with token %d", writes[i].version, writes[i].token, writes[i-1].token)
		}
	}
	t.Logf("%d tenures, %d changes of holder, %d fenced writes, last token %d", len(tenures), changes, len(writes), tenures[len(tenures)-1].token)
	if changes < 2 {
		t.Errorf("only %d changes of holder: the test did not exercise the lease", changes)
	}
}
