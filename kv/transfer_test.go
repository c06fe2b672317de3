package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestWipedSiteCatchesUpFromSnapshots: every site's kv log is truncated
// once applied everywhere, then a site loses its store. It comes back
// empty, learns from its peers that they hold its own stream and that
// they dropped what it lacks of theirs, copies each origin's state from a
// peer, and then serves every key, and continues its own stream after the
// seqs it had given out.
func TestWipedSiteCatchesUpFromSnapshots(t *testing.T) {
	sites := []string{"a", "b", "c"}
	c := &cluster{t: t, stores: map[string]*Store{}}
	c.Cluster = stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites, Setup: c.setup, Join: true})
	ctx := stabilizertest.Context(t, 60*time.Second)
	want := map[string]string{}
	var lastC WriteResult
	for i := range 60 {
		site := sites[i%3]
		k := fmt.Sprintf("jobs/%s/%03d", site, i)
		v := fmt.Sprintf(`{"job":"%s","state":"running","step":%d}`, k, i)
		res, err := c.store(site).Put(ctx, k, []byte(v), WriteOptions{Wait: "all"})
		if err != nil {
			t.Fatal(err)
		}
		if site == "c" {
			lastC = res
		}
		want[k] = v
	}
	for _, site := range sites {
		waitApplied(t, ctx, c, site)
	}
	for _, site := range sites {
		for _, o := range sites {
			id := stabilizer.StreamID{Origin: o, Name: Stream}
			floor, err := c.Node(site).Truncate(ctx, id, ^uint64(0), stabilizer.TruncateOptions{})
			if err != nil || floor == 0 {
				t.Fatalf("%s: truncate %s: floor %d, %v", site, id, floor, err)
			}
		}
	}
	c.stop("c")
	if err := os.RemoveAll(c.Dir("c")); err != nil {
		t.Fatal(err)
	}
	c.Start("c")
	// The wiped site's first write waits until it has its own stream
	// back: its seq must follow the ones it gave out before.
	res, err := c.store("c").Put(ctx, "jobs/c/after", []byte(`{"state":"queued"}`), WriteOptions{Wait: "all"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq <= lastC.Seq {
		t.Fatalf("c wrote seq %d after the wipe, at or below the %d it wrote before: a seq would name two writes", res.Seq, lastC.Seq)
	}
	want["jobs/c/after"] = `{"state":"queued"}`
	for k, v := range want {
		got, err := getRetrying(ctx, c.store("c"), k)
		if err != nil || string(got.Value) != v {
			t.Fatalf("c after the wipe: %s = %q, %v; want %q", k, got.Value, err, v)
		}
	}
	// a applies it in its own time: a session read waits for that.
	got, err := c.store("a").Get(ctx, "jobs/c/after", ReadOptions{Stable: "all", Session: map[string]uint64{"c": res.Seq}})
	if err != nil || string(got.Value) != want["jobs/c/after"] {
		t.Fatalf("a: c's write after the wipe: %q, %v", got.Value, err)
	}
	if n := len(c.Node("c").Transfers()); n != 0 {
		t.Fatalf("c still lists %d transfers", n)
	}
}

// getRetrying reads stable=all, waiting out the restore.
func getRetrying(ctx context.Context, s *Store, key string) (ReadResult, error) {
	for {
		res, err := s.Get(ctx, key, ReadOptions{Stable: "all"})
		if err == nil || ctx.Err() != nil || !isRestoring(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func isRestoring(err error) bool { return errors.Is(err, ErrRestoring) }

// waitApplied waits until site applied every kv stream it persisted.
func waitApplied(t *testing.T, ctx context.Context, c *cluster, site string) {
	t.Helper()
	n := c.Node(site)
	streams, err := n.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range streams {
		if st.Stream.Name != Stream {
			continue
		}
		for _, o := range c.Sites() {
			if err := c.Node(o).WaitFor(ctx, st.Stream, "min(applied(sites))", st.Persisted); err != nil {
				t.Fatal(err)
			}
		}
	}
}
