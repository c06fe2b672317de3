package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
)

// serve serves site's store over gRPC on loopback and returns a client of
// it and the requests the server saw per method.
func (c *cluster) serve(site string) (*Client, func() map[string]int) {
	t := c.t
	srv := NewServer(c.stores[site])
	var mu sync.Mutex
	seen := map[string]int{}
	srv.Observe = func(method, _ string, _ time.Duration, _ error) {
		mu.Lock()
		seen[method]++
		mu.Unlock()
	}
	g := grpc.NewServer()
	kvpb.RegisterKVServer(g, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	cl, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cl.Batching = true
	t.Cleanup(func() { _ = cl.Close(); g.Stop() })
	return cl, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

// queued returns how many writes wait in the client's batcher.
func (b *batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, g := range b.groups {
		n += len(g.queue)
	}
	return n
}

// TestClientCoalescesConcurrentWrites holds the first writes' wait (the
// writer is cut off from both peers, so majority cannot hold), queues more
// behind them, and checks that they leave together, each with its own seq,
// while a write with another wait does not queue behind them.
func TestClientCoalescesConcurrentWrites(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, seen := c.serve("us-east-1")
	c.isolate("us-east-1", true)
	ctx := ctxT(t)
	const n = 40
	type result struct {
		r   *kvpb.WriteResponse
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := cl.Put(ctx, fmt.Sprintf("job/%02d", i), []byte("running"), "majority", 20*time.Second)
			results[i] = result{r, err}
		})
	}
	waitUntil(t, func() bool { return cl.batch.queued() == n-batchInFlight })
	// Another wait is another group: it goes out at once.
	if _, err := cl.Put(ctx, "job/solo", []byte("x"), "none", 0); err != nil {
		t.Fatal(err)
	}
	c.isolate("us-east-1", false)
	wg.Wait()
	seqs := map[uint64]bool{}
	for i, r := range results {
		if r.err != nil || r.r == nil || r.r.Seq == 0 || seqs[r.r.Seq] {
			t.Fatalf("write %d: %v %v (seqs so far %v)", i, r.r, r.err, seqs)
		}
		seqs[r.r.Seq] = true
	}
	got := seen()
	if got["put"] != batchInFlight+1 || got["write_batch"] == 0 || got["write_batch"] > n-batchInFlight {
		t.Errorf("requests %v: want %d puts and the %d queued writes in fewer requests", got, batchInFlight+1, n-batchInFlight)
	}
	for i := range n {
		r := mustGet(t, c.stores["eu-west-1"], fmt.Sprintf("job/%02d", i), ReadOptions{Quorum: "majority"})
		if !r.Found || string(r.Version.Value) != "running" {
			t.Fatalf("job/%02d: %+v", i, r)
		}
	}
	if s := cl.Session()["us-east-1"]; s < uint64(n) {
		t.Errorf("session holds seq %d, want at least %d", s, n)
	}
}

// TestBatchedWriteFailsAlone: an invalid write in a batch gets the error a
// Put would have got; the others are written.
func TestBatchedWriteFailsAlone(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, _ := c.serve("us-east-1")
	ctx := ctxT(t)
	resp, err := cl.KV.WriteBatch(ctx, &kvpb.WriteBatchRequest{Wait: "majority", Ops: []*kvpb.WriteOp{
		{Key: "ckpt/1", Value: []byte("a")},
		{Key: "ckpt/2", Value: make([]byte, 1<<16+1)},
		{Key: "", Value: []byte("c")},
		{Key: "ckpt/1", Delete: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Results
	if len(r) != 4 || r[0].Code != 0 || r[3].Code != 0 || r[3].Write.Seq != r[0].Write.Seq+1 {
		t.Fatalf("results %v", r)
	}
	if codes.Code(r[1].Code) != codes.InvalidArgument || !strings.Contains(r[1].Error, `"ckpt/2"`) || r[1].Write != nil {
		t.Errorf("too large: %v", r[1])
	}
	if codes.Code(r[2].Code) != codes.InvalidArgument || !strings.Contains(r[2].Error, "empty key") {
		t.Errorf("empty key: %v", r[2])
	}
	if v, err := c.stores["us-east-1"].Get(ctx, "ckpt/1", ReadOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("ckpt/1 after put then delete in one batch: %+v %v", v, err)
	}
	// A wait that cannot be parsed fails every op and writes nothing.
	resp, err = cl.KV.WriteBatch(ctx, &kvpb.WriteBatchRequest{Wait: "majority(", Ops: []*kvpb.WriteOp{{Key: "k", Value: []byte("v")}}})
	if err != nil || codes.Code(resp.Results[0].Code) != codes.InvalidArgument || resp.Results[0].Write != nil {
		t.Errorf("bad wait: %v %v", resp, err)
	}
	_, err = cl.Put(ctx, "k2", []byte("v"), "majority(", 0)
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Put with a bad wait: %v", err)
	}
}

// TestQueuedWriteCanceledIsNotWritten: a write whose context ends while it
// waits in the queue returns the context's error and is never sent.
func TestQueuedWriteCanceledIsNotWritten(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, seen := c.serve("us-east-1")
	c.isolate("us-east-1", true)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for i := range batchInFlight {
		wg.Go(func() { _, _ = cl.Put(ctx, fmt.Sprintf("hold/%d", i), []byte("v"), "majority", 20*time.Second) })
	}
	waitUntil(t, func() bool {
		return seen()["put"] == 0 && cl.batch.groupInFlight("majority", 20*time.Second) == batchInFlight
	})
	qctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cl.Put(qctx, "never", []byte("v"), "majority", 20*time.Second)
		done <- err
	}()
	waitUntil(t, func() bool { return cl.batch.queued() == 1 })
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("canceled queued write: %v", err)
	}
	c.isolate("us-east-1", false)
	wg.Wait()
	if r, err := c.stores["us-east-1"].Get(ctx, "never", ReadOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a canceled queued write was written: %+v %v", r.Version, err)
	}
	if got := seen()["write_batch"]; got != 0 {
		t.Errorf("%d batch requests sent, want none", got)
	}
}

// groupInFlight returns the requests in flight for one wait and timeout.
func (b *batcher) groupInFlight(wait string, timeout time.Duration) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groups[batchKey{wait, timeout}]; g != nil {
		return g.inFlight
	}
	return 0
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 20s")
		}
		time.Sleep(time.Millisecond)
	}
}
