package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/kv/lin"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// served is a site's store behind a gRPC server on loopback, which a test
// can stop and start again at the same address.
type served struct {
	t     testing.TB
	store *Store
	lin   *Linear
	addr  string
	srv   *Server
	g     *grpc.Server
	wg    sync.WaitGroup // Serve

	mu      sync.Mutex
	seen    map[string]int // requests per method
	failed  map[string]int // requests per method that Observe was told failed
	streams int            // Writes streams open
	// wrap, if set, wraps each stream the server serves from then on.
	wrap func(grpc.ServerStream) grpc.ServerStream
}

// serve serves site's store (and lin's keys, if not nil) and returns a
// client of it.
func (c *cluster) serve(site string, l *Linear) (*kvclient.Client, *served) {
	s := &served{t: c.t, store: c.store(site), lin: l, seen: map[string]int{}, failed: map[string]int{}}
	s.start("127.0.0.1:0")
	cl, err := kvclient.Dial(s.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close(); s.stop() })
	return cl, s
}

func (s *served) start(addr string) {
	s.srv = NewServer(s.store)
	s.srv.Observe = func(method, _ string, _ time.Duration, err error) {
		s.mu.Lock()
		s.seen[method]++
		if err != nil {
			s.failed[method]++
		}
		s.mu.Unlock()
	}
	if s.lin != nil {
		s.srv.EnableLinear(s.lin)
	}
	count := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		s.mu.Lock()
		s.streams++
		if s.wrap != nil {
			ss = s.wrap(ss)
		}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.streams--
			s.mu.Unlock()
		}()
		return h(srv, ss)
	}
	s.g = grpc.NewServer(grpc.WaitForHandlers(true), grpc.StreamInterceptor(count))
	kvpb.RegisterKVServer(s.g, s.srv)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	g := s.g
	s.wg.Go(func() { _ = g.Serve(lis) })
}

// stop ends every request and waits for the handlers.
func (s *served) stop() {
	s.g.Stop()
	s.wg.Wait()
}

func (s *served) requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.seen)
}

func (s *served) openStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// head is how many writes site has appended to its kv stream.
func (c *cluster) head(site string) uint64 {
	streams, err := c.Node(site).Streams(ctxT(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, st := range streams {
		if st.Stream == streamOf(WriteResult{Origin: site}) {
			return st.Head
		}
	}
	return 0
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		if !cond() {
			return errors.New("condition not reached")
		}
		return nil
	})
}

// writeGoroutines counts the goroutines of write streams, at either end.
func writeGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "kv.(*writeStream)") || strings.Contains(g, "kvclient.(*streamWriter)") {
			count++
		}
	}
	return count
}

type result struct {
	r   *kvpb.WriteResponse
	err error
}

// TestStreamConcurrentWriters: many writers share the client's stream,
// under three waits at once; each gets its own write's answer.
func TestStreamConcurrentWriters(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, srv := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	const writers, each = 64, 16
	waits := []string{"majority", "none", "local"}
	results := make([]result, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%02d/%02d", w, i)
				r, err := cl.Put(ctx, key, []byte(key), waits[(w+i)%len(waits)], 10*time.Second)
				results[w*each+i] = result{r, err}
			}
		})
	}
	wg.Wait()
	seqs := map[uint64]bool{}
	var last uint64
	for i, r := range results {
		if r.err != nil || r.r == nil || r.r.Origin != "us-east-1" || r.r.Seq == 0 || r.r.Hlc == nil || seqs[r.r.Seq] {
			t.Fatalf("write %d: %v %v", i, r.r, r.err)
		}
		seqs[r.r.Seq] = true
		last = max(last, r.r.Seq)
	}
	del, err := cl.Delete(ctx, "w00/00", "majority", 0)
	if err != nil || del.Seq <= last {
		t.Fatalf("delete: %v %v", del, err)
	}
	// Each answer is its own write's: eu-west-1 applied the version it
	// names.
	eu := c.store("eu-west-1")
	if err := c.Node("eu-west-1").WaitFor(ctx, streamOf(WriteResult{Origin: "us-east-1"}), "applied(self)", del.Seq); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			key := fmt.Sprintf("w%02d/%02d", w, i)
			got, err := eu.Get(ctx, key, ReadOptions{})
			if key == "w00/00" {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s after its delete: %+v %v", key, got, err)
				}
				continue
			}
			if err != nil || string(got.Value) != key || got.Seq != results[w*each+i].r.Seq {
				t.Fatalf("%s: %+v %v, answered %v", key, got.Version, err, results[w*each+i].r)
			}
		}
	}
	if s := cl.Session()["us-east-1"]; s != del.Seq {
		t.Errorf("session at seq %d, want %d", s, del.Seq)
	}
	got := srv.requests()
	if got["write"] != writers*each+1 || got["put"]+got["delete"] != 0 {
		t.Errorf("requests %v: want %d writes and no unary ones", got, writers*each+1)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return writeGoroutines() == 0 })
}

// TestStreamOpErrorsAsPut: refused writes on the stream fail alone, each
// with the code and message a unary Put gives the same write; the writes
// around them are made.
func TestStreamOpErrorsAsPut(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, _ := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	bad := []*kvpb.WriteRequest{
		{Key: "", Value: []byte("v")},
		{Key: strings.Repeat("k", 5000)},
		{Key: "big", Value: make([]byte, 1<<16+1)},
		{Key: "k", Wait: "majorty"},
		{Key: "k", Wait: "majority("},
		{Key: "k", Wait: `quorum(2, persisted(except(["us-east-1", "eu-west-1"], origin)))`},
		{Key: "", Delete: true},
	}
	stream, err := cl.KV.Writes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*kvpb.WriteRequest
	for i, b := range bad {
		reqs = append(reqs, &kvpb.WriteRequest{Key: fmt.Sprintf("ok/%d", i), Value: []byte("v"), Wait: "majority"}, b)
	}
	reqs = append(reqs, &kvpb.WriteRequest{Key: "ok/last", Delete: true, Wait: "none"})
	for i, r := range reqs {
		r.Id = uint64(i + 1)
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	replies := map[uint64]*kvpb.WriteReply{}
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if replies[r.Id] != nil {
			t.Fatalf("write %d answered twice", r.Id)
		}
		replies[r.Id] = r
	}
	if len(replies) != len(reqs) {
		t.Fatalf("%d answers to %d writes", len(replies), len(reqs))
	}
	for i, req := range reqs {
		got := replies[req.Id]
		if i%2 == 0 {
			if got.Code != 0 || got.Write == nil || got.Write.Seq == 0 {
				t.Errorf("write %q: %v", req.Key, got)
			}
			continue
		}
		var want error
		if req.Delete {
			_, want = cl.KV.Delete(ctx, &kvpb.DeleteRequest{Key: req.Key, Wait: req.Wait})
		} else {
			_, want = cl.KV.Put(ctx, &kvpb.PutRequest{Key: req.Key, Value: req.Value, Wait: req.Wait})
		}
		st := status.Convert(want)
		if want == nil || codes.Code(got.Code) != st.Code() || got.Error != st.Message() || got.Write != nil {
			t.Errorf("write %.20q: stream answered %v %q, Put %v", req.Key, codes.Code(got.Code), got.Error, want)
		}
	}
	// Through Client.Put: a key that is not UTF-8 cannot be encoded, and
	// must not end the stream for everybody; it fails as Put fails.
	_, err = cl.Put(ctx, "k\xff", []byte("v"), "", 0)
	_, want := cl.KV.Put(ctx, &kvpb.PutRequest{Key: "k\xff"})
	if status.Code(err) != status.Code(want) || want == nil {
		t.Errorf("a key not UTF-8: %v, Put: %v", err, want)
	}
	if _, err := cl.Put(ctx, "", []byte("v"), "", 0); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "empty key") {
		t.Errorf("empty key through the client: %v", err)
	}
	if _, err := cl.Put(ctx, "after", []byte("v"), "", 0); err != nil {
		t.Errorf("a write after the refused ones: %v", err)
	}
}

// TestStreamWaitTimeout: a wait that times out fails with the WaitError
// of the write's own seq, and the session still holds the write, which
// was made.
func TestStreamWaitTimeout(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, _ := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	c.Isolate("us-east-1", true)
	const n = 8
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := cl.Put(ctx, fmt.Sprintf("t/%d", i), []byte("v"), "majority", 100*time.Millisecond)
			results[i] = result{r, err}
		})
	}
	wg.Wait()
	var last uint64
	for i, r := range results {
		msg := status.Convert(r.err).Message()
		if status.Code(r.err) != codes.DeadlineExceeded || r.r == nil || r.r.Seq == 0 ||
			!strings.HasPrefix(msg, fmt.Sprintf(`kv: write "t/%d": timeout after`, i)) ||
			!strings.Contains(msg, fmt.Sprintf(`waiting for "majority" on us-east-1/kv seq %d: frontier`, r.r.Seq)) ||
			!strings.Contains(msg, "persisted: us-east-1=") {
			t.Errorf("write %d: %v %v", i, r.r, r.err)
			continue
		}
		last = max(last, r.r.Seq)
	}
	if s := cl.Session()["us-east-1"]; s != last {
		t.Errorf("session at seq %d, want %d", s, last)
	}
}

// TestStreamCancel: a write whose ctx ends returns at once; one not sent
// yet is never made, one sent still is, and its answer still reaches the
// session.
func TestStreamCancel(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, _ := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	s := c.store("us-east-1")
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cl.Put(gone, "never", []byte("v"), "none", 0); status.Code(err) != codes.Canceled {
		t.Errorf("write with an ended ctx: %v", err)
	}
	c.Isolate("us-east-1", true)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan result, 1)
	go func() {
		r, err := cl.Put(wctx, "slow", []byte("v"), "majority", 20*time.Second)
		done <- result{r, err}
	}()
	var seq uint64
	waitUntil(t, func() bool {
		r, err := s.Get(ctx, "slow", ReadOptions{})
		seq = r.Seq
		return err == nil
	})
	cancel()
	if r := <-done; status.Code(r.err) != codes.Canceled || r.r != nil {
		t.Fatalf("canceled write: %v %v", r.r, r.err)
	}
	if cl.Session()["us-east-1"] != 0 {
		t.Fatalf("session %v before the write's answer", cl.Session())
	}
	// The stream goes on.
	if _, err := cl.Put(ctx, "other", []byte("v"), "none", 0); err != nil {
		t.Fatal(err)
	}
	c.Isolate("us-east-1", false)
	waitUntil(t, func() bool { return cl.Session()["us-east-1"] > seq })
	if _, err := s.Get(ctx, "never", ReadOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a write canceled before it was sent was made: %v", err)
	}
}

type noTransport struct{}

func (noTransport) Send(string, []byte) error { return nil }

// TestStreamLinearKeys: writes of linearizable keys on the stream go to the
// Raft group, beside the others.
func TestStreamLinearKeys(t *testing.T) {
	c := newCluster(t, sites3...)
	site := "us-east-1"
	ns, err := c.Node(site).Namespace(lin.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := lin.New(lin.Config{Site: site, Voters: []string{site}, Namespace: ns, Transport: noTransport{},
		TickInterval: 10 * time.Millisecond, HeartbeatTicks: 1, ElectionTicks: 10, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	cl, srv := c.serve(site, &Linear{Prefix: "/lin/", Node: ln, Voters: []string{site}})
	ctx := ctxT(t)
	const n = 20
	results := make([]result, n)
	var wg sync.WaitGroup
	key := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("/lin/job/%d", i)
		}
		return fmt.Sprintf("job/%d", i)
	}
	for i := range n {
		wg.Go(func() {
			r, err := cl.Put(ctx, key(i), []byte("owner"), "", 0)
			results[i] = result{r, err}
		})
	}
	wg.Wait()
	seqs := map[string]bool{}
	for i, r := range results {
		want := site
		if i%2 == 0 {
			want = LinOrigin
		}
		if r.err != nil || r.r.Origin != want || r.r.Seq == 0 || seqs[fmt.Sprint(r.r.Origin, r.r.Seq)] {
			t.Fatalf("%s: %v %v", key(i), r.r, r.err)
		}
		seqs[fmt.Sprint(r.r.Origin, r.r.Seq)] = true
	}
	r, err := cl.Put(ctx, key(0), []byte("next"), "", 0)
	if err != nil || r.Origin != LinOrigin || r.Seq <= results[0].r.Seq {
		t.Fatalf("second write of %s: %v %v", key(0), r, err)
	}
	if _, err := cl.Delete(ctx, key(2), "", 0); err != nil {
		t.Fatal(err)
	}
	if g, err := cl.Get(ctx, &kvpb.GetRequest{Key: key(0)}); err != nil || string(g.Version.Value) != "next" {
		t.Fatalf("get %s: %v %v", key(0), g, err)
	}
	if g, err := cl.Get(ctx, &kvpb.GetRequest{Key: key(2)}); status.Code(err) != codes.NotFound {
		t.Fatalf("get %s after its delete: %v %v", key(2), g, err)
	}
	if got := srv.requests(); got["write"] != n+2 {
		t.Errorf("requests %v, want %d writes", got, n+2)
	}
}

// TestStreamBreaks: when the site stops, every write waiting on the stream
// fails with codes.Unavailable naming the cause, and a later write opens a
// new stream.
func TestStreamBreaks(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, srv := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	c.Isolate("us-east-1", true)
	const n = 10
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := cl.Put(ctx, fmt.Sprintf("held/%d", i), []byte("v"), "majority", 20*time.Second)
			results[i] = result{r, err}
		})
	}
	waitUntil(t, func() bool { return c.head("us-east-1") == n })
	srv.stop()
	wg.Wait()
	for i, r := range results {
		if status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "kv: write stream broke: ") || r.r != nil {
			t.Errorf("write %d: %v %v", i, r.r, r.err)
		}
	}
	t.Log(results[0].err)
	waitUntil(t, func() bool { return writeGoroutines() == 0 })
	srv.start(srv.addr)
	c.Isolate("us-east-1", false)
	// The connection comes back on its own time; until then writes fail
	// fast.
	waitUntil(t, func() bool {
		_, err := cl.Put(ctx, "again", []byte("v"), "majority", 0)
		return err == nil
	})
	if got := srv.requests()["write"]; got < 1 {
		t.Errorf("the restarted server saw %d writes", got)
	}
}

// TestStreamDrain: after Server.Drain the client closes its stream once
// told, the site answers what it read, and GracefulStop does not wait for
// the client to go away.
func TestStreamDrain(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, srv := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	c.Isolate("us-east-1", true)
	done := make(chan result, 1)
	go func() {
		r, err := cl.Put(ctx, "held", []byte("v"), "majority", 20*time.Second)
		done <- result{r, err}
	}()
	waitUntil(t, func() bool { return c.head("us-east-1") == 1 })
	srv.srv.Drain()
	c.Isolate("us-east-1", false)
	if r := <-done; r.err != nil {
		t.Fatalf("write read before the drain: %v", r.err)
	}
	// A new stream is asked to close at once, and still answers.
	if _, err := cl.Put(ctx, "later", []byte("v"), "majority", 0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return srv.openStreams() == 0 })
	stopped := make(chan struct{})
	go func() {
		srv.g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("GracefulStop waited for the client")
	}
}

// TestStreamBoundsUnanswered: the site reads at most MaxUnanswered writes
// of a stream that it has not answered; the rest wait in the client.
func TestStreamBoundsUnanswered(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, _ := c.serve("us-east-1", nil)
	ctx := ctxT(t)
	c.Isolate("us-east-1", true)
	const n = MaxUnanswered + 100
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = cl.Put(ctx, fmt.Sprintf("b/%05d", i), nil, "majority", 25*time.Second)
		})
	}
	waitUntil(t, func() bool { return c.head("us-east-1") >= MaxUnanswered })
	if got := c.head("us-east-1"); got != MaxUnanswered {
		t.Fatalf("the site took %d unanswered writes, want at most %d", got, MaxUnanswered)
	}
	c.Isolate("us-east-1", false)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// TestWriteBatchOpFailsAlone: an invalid write in a WriteBatch gets the
// error a Put would have got; the others are written. The request counts as
// failed in the metrics.
func TestWriteBatchOpFailsAlone(t *testing.T) {
	c := newCluster(t, sites3...)
	cl, srv := c.serve("us-east-1", nil)
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
	if v, err := c.store("us-east-1").Get(ctx, "ckpt/1", ReadOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("ckpt/1 after put then delete in one batch: %+v %v", v, err)
	}
	// A wait that cannot be parsed fails every op and writes nothing.
	resp, err = cl.KV.WriteBatch(ctx, &kvpb.WriteBatchRequest{Wait: "majority(", Ops: []*kvpb.WriteOp{{Key: "k", Value: []byte("v")}}})
	if err != nil || codes.Code(resp.Results[0].Code) != codes.InvalidArgument || resp.Results[0].Write != nil {
		t.Errorf("bad wait: %v %v", resp, err)
	}
	if _, err := cl.KV.WriteBatch(ctx, &kvpb.WriteBatchRequest{Wait: "majority", Ops: []*kvpb.WriteOp{{Key: "k", Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.seen["write_batch"] != 3 || srv.failed["write_batch"] != 2 {
		t.Errorf("observed %d write_batch requests, %d failed; want 3, 2 (the two with a failed op)", srv.seen["write_batch"], srv.failed["write_batch"])
	}
}

// countingStream counts the messages of a Writes stream that carried
// several writes. With old set, the site does not see the client's
// metadata, as a site from before batches would not read it.
type countingStream struct {
	grpc.ServerStream
	old     bool
	batches *atomic.Int64
}

func (o countingStream) Context() context.Context {
	if !o.old {
		return o.ServerStream.Context()
	}
	return metadata.NewIncomingContext(o.ServerStream.Context(), metadata.MD{})
}

func (o countingStream) RecvMsg(m any) error {
	err := o.ServerStream.RecvMsg(m)
	if r, ok := m.(*kvpb.WriteRequest); ok && err == nil && len(r.More) > 0 {
		o.batches.Add(1)
	}
	return err
}

// gatedStream holds the client's second message until gate closes, so
// that writes queue behind it.
type gatedStream struct {
	grpc.ClientStream
	gate chan struct{}
	sent *atomic.Int64
}

func (g gatedStream) SendMsg(m any) error {
	if g.sent.Add(1) == 2 {
		<-g.gate
	}
	return g.ClientStream.SendMsg(m)
}

// TestStreamBatchesOnlyForSitesThatReadThem: writes queue in the client
// while its second message is held; then, to a site that announced
// batches, they go in one message, and to one that did not, each alone.
func TestStreamBatchesOnlyForSitesThatReadThem(t *testing.T) {
	for _, old := range []bool{true, false} {
		t.Run(map[bool]string{true: "old site", false: "site"}[old], func(t *testing.T) {
			c := newCluster(t, "us-east-1")
			_, srv := c.serve("us-east-1", nil)
			var batches atomic.Int64
			srv.wrap = func(ss grpc.ServerStream) grpc.ServerStream {
				return countingStream{ss, old, &batches}
			}
			gate := make(chan struct{})
			var sent atomic.Int64
			gated := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				return gatedStream{cs, gate, &sent}, err
			}
			cl, err := kvclient.Dial(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStreamInterceptor(gated))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx := ctxT(t)
			// The answer to the first write comes after the site's header.
			if _, err := cl.Put(ctx, "first", nil, "local", 0); err != nil {
				t.Fatal(err)
			}
			const n = 65
			errs := make([]error, n)
			var wg sync.WaitGroup
			wg.Go(func() { _, errs[0] = cl.Put(ctx, "held", nil, "local", 0) })
			waitUntil(t, func() bool { return sent.Load() == 2 })
			for i := 1; i < n; i++ {
				wg.Go(func() { _, errs[i] = cl.Put(ctx, fmt.Sprintf("k/%d", i), []byte("v"), "local", 0) })
			}
			waitUntil(t, func() bool { return cl.Queued() == n-1 })
			close(gate)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			switch got := batches.Load(); {
			case old && got != 0:
				t.Fatalf("the client sent %d batches to a site that did not announce them", got)
			case !old && got != 1:
				t.Fatalf("%d writes queued behind a held message went in %d batches, want 1", n-1, got)
			}
			if got := c.head("us-east-1"); got != n+1 {
				t.Fatalf("the site appended %d writes, want %d", got, n+1)
			}
		})
	}
}

// TestStreamBatchMessages: the wire contract of batches, from a raw client:
// the site announces them only to a client that asks; a batch's writes are
// answered each by its id; a malformed batch ends the stream with
// InvalidArgument.
func TestStreamBatchMessages(t *testing.T) {
	c := newCluster(t, "us-east-1")
	cl, _ := c.serve("us-east-1", nil)
	open := func(ask bool) kvpb.KV_WritesClient {
		ctx := ctxT(t)
		if ask {
			ctx = metadata.AppendToOutgoingContext(ctx, kvpb.WritesBatchHeader, "1")
		}
		st, err := cl.KV.Writes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, ask := range []bool{false, true} {
		st := open(ask)
		if err := st.Send(&kvpb.WriteRequest{Id: 1, Key: "solo", Wait: "local"}); err != nil {
			t.Fatal(err)
		}
		md, err := st.Header()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(md.Get(kvpb.WritesBatchHeader)) > 0; got != ask {
			t.Fatalf("client asked for batches: %v; site announced them: %v", ask, got)
		}
		if r, err := st.Recv(); err != nil || r.Id != 1 || r.Code != 0 || len(r.More) != 0 {
			t.Fatalf("answer to a lone write: %v %v", r, err)
		}
		_ = st.CloseSend()
	}

	st := open(true)
	env := &kvpb.WriteRequest{}
	for id := uint64(10); id < 13; id++ {
		env.More = append(env.More, &kvpb.WriteRequest{Id: id, Key: fmt.Sprintf("b/%d", id), Value: []byte("v"), Wait: "local"})
	}
	if err := st.Send(env); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]uint32{}
	for len(got) < 3 {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answers := []*kvpb.WriteReply{r}
		if r.Id == 0 {
			answers = r.More
		}
		for _, a := range answers {
			got[a.Id] = a.Code
		}
	}
	if want := map[uint64]uint32{10: 0, 11: 0, 12: 0}; !maps.Equal(got, want) {
		t.Fatalf("answers (id: code) %v, want %v", got, want)
	}
	_ = st.CloseSend()

	for _, bad := range []*kvpb.WriteRequest{
		{More: []*kvpb.WriteRequest{{Id: 1, Key: "a"}, {Id: 0, Key: "b"}}},
		{More: []*kvpb.WriteRequest{{Id: 1, Key: "a", More: []*kvpb.WriteRequest{{Id: 2, Key: "b"}}}}},
		{Key: "own", More: []*kvpb.WriteRequest{{Id: 1, Key: "a"}}},
	} {
		st := open(true)
		if err := st.Send(bad); err != nil {
			t.Fatal(err)
		}
		_, err := st.Recv()
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("malformed batch %v: %v, want InvalidArgument", bad, err)
		}
	}
}
