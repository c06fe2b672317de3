package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient/pubsubclienttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakes starts a fake site per name, sharing one cluster.
func fakes(t *testing.T, names ...string) (*pubsubclienttest.Cluster, []*pubsubclienttest.Server) {
	t.Helper()
	cl := pubsubclienttest.NewCluster()
	var ss []*pubsubclienttest.Server
	for _, n := range names {
		ss = append(ss, cl.Start(t, n))
	}
	return cl, ss
}

// dial connects to the servers, in order; the test's cleanup closes the
// client.
func dial(t *testing.T, ss []*pubsubclienttest.Server, opts ...Option) *Client {
	t.Helper()
	var addrs []string
	for _, s := range ss {
		addrs = append(addrs, s.Addr)
	}
	c, err := Dial(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, c *Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.CreateTopic(testCtx(t), Topic{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func TestTopics(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	def := Topic{Name: "orders", PublishAck: "all", MaxMessageBytes: 1000,
		Retention: Retention{Policy: "interest", MaxMessages: 100, MaxBytes: 4096, MaxAge: time.Hour}}
	info, err := c.CreateTopic(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	if info.Topic != def || info.CreatedAt != "us-east-1" || info.Created.IsZero() {
		t.Fatalf("created %+v", info)
	}
	// The same definition again returns the topic; another one fails.
	if _, err := c.CreateTopic(ctx, def); err != nil {
		t.Fatalf("same definition again: %v", err)
	}
	_, err = c.CreateTopic(ctx, Topic{Name: "orders", PublishAck: "majority"})
	if !errors.Is(err, ErrTopicExists) || status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "exists with another definition") {
		t.Fatalf("another definition: %v", err)
	}
	mustCreate(t, c, "audit")
	list, err := c.ListTopics(ctx)
	if err != nil || len(list) != 2 || list[0].Topic.Name != "audit" || list[1].Topic.Name != "orders" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := c.Publish(ctx, "orders", []byte("x")); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTopic(ctx, "orders")
	if err != nil || len(got.Origins) != 1 || got.Origins[0] != (OriginStats{Origin: "us-east-1", Messages: 1, LastSeq: 1, DeliveryFrontier: 2, Bytes: 1, FirstSeq: 1}) {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTopic(ctx, "orders")
	if !errors.Is(err, ErrUnknownTopic) || err.Error() != `pubsub: get topic "orders": unknown topic orders` {
		t.Fatalf("get deleted: %v", err)
	}
	if err := c.DeleteTopic(ctx, "orders"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("delete deleted: %v", err)
	}
}

func TestPublish(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	if c.Site() != ss[0].Addr {
		t.Fatalf("Site() before any answer named it: %s, want the address", c.Site())
	}
	// Without a deadline, the client's timeout goes with the request.
	a, err := c.Publish(context.Background(), "orders", []byte("one"), MsgID("o-1"), Headers(map[string]string{"k": "v"}), Headers(map[string]string{"j": "w"}))
	if err != nil {
		t.Fatal(err)
	}
	if a.Origin != "us-east-1" || a.Seq != 1 || a.HLC.IsZero() || a.Duplicate || a.Frontier != (Frontier{Predicate: "majority", Seq: 1, Version: 1}) {
		t.Fatalf("ack %+v", a)
	}
	if c.Site() != "us-east-1" {
		t.Fatalf("Site() = %s after the site named itself", c.Site())
	}
	r := ss[0].PublishRequests()[0]
	if r.MsgId != "o-1" || r.Headers["k"] != "v" || r.Headers["j"] != "w" || r.TimeoutMs != DefaultTimeout.Milliseconds() {
		t.Fatalf("request %v", r)
	}
	// The same id again publishes nothing and answers with the original.
	d, err := c.Publish(ctx, "orders", []byte("one"), MsgID("o-1"))
	if err != nil || !d.Duplicate || d.Seq != 1 {
		t.Fatalf("duplicate: %+v, %v", d, err)
	}
	// A ctx with a deadline sends no timeout: the site reads the deadline.
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.Publish(dctx, "orders", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if r := ss[0].PublishRequests()[2]; r.TimeoutMs != 0 {
		t.Fatalf("timeout_ms %d sent with a deadline", r.TimeoutMs)
	}
}

// TestErrors: every code a site answers with maps to its sentinel, keeps
// its code for status.Code and the site's message unchanged.
func TestErrors(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	for _, tc := range []struct {
		code codes.Code
		msg  string
		want error
	}{
		{codes.NotFound, "unknown topic orders", ErrUnknownTopic},
		{codes.AlreadyExists, "exists", ErrTopicExists},
		{codes.ResourceExhausted, "message of 9 bytes is larger than max_message_bytes 8", ErrTooLarge},
		{codes.ResourceExhausted, "too many subscriptions", ErrLimit},
		{codes.InvalidArgument, "message too large", ErrTooLarge},
		{codes.InvalidArgument, "1:3: unknown name majorty", ErrInvalid},
		{codes.DeadlineExceeded, "publish-ack predicate majority: acks got to seq 3", ErrTimeout},
		{codes.FailedPrecondition, "durable d is in use with another ack wait", ErrConflict},
		{codes.Unimplemented, "not here", ErrUnsupported},
		{codes.OutOfRange, `pubsub: position dropped by retention: topic "orders", origin us-east-1: ...`, ErrTruncated},
		{codes.PermissionDenied, "no", ErrPermission},
		{codes.Unauthenticated, "no certificate", ErrPermission},
	} {
		ss[0].FailNext("Publish", status.Error(tc.code, tc.msg))
		_, err := c.Publish(ctx, "orders", []byte("x"))
		if !errors.Is(err, tc.want) || status.Code(err) != tc.code || err.Error() != `pubsub: publish to "orders": `+tc.msg {
			t.Errorf("%s %q: got %v (code %s), want %v", tc.code, tc.msg, err, status.Code(err), tc.want)
		}
		var e *Error
		if !errors.As(err, &e) || e.Site != ss[0].Addr || e.Msg != tc.msg {
			t.Errorf("%s: %#v", tc.code, e)
		}
	}
	// An error without a sentinel still keeps its code.
	ss[0].FailNext("GetTopic", status.Error(codes.Internal, "disk on fire"))
	if _, err := c.GetTopic(ctx, "orders"); status.Code(err) != codes.Internal || errors.Unwrap(err) != nil {
		t.Errorf("internal: %v", err)
	}
	// The fake's own size check: InvalidArgument about size.
	if _, err := c.CreateTopic(ctx, Topic{Name: "small", MaxMessageBytes: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "small", []byte("12345")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if _, err := c.Publish(ctx, "nope", nil); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown: %v", err)
	}
	// ctx's end is ctx's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Publish(cctx, "orders", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	// An unknown subscription is not an unknown topic.
	ss[0].FailNext("DeleteSubscription", status.Error(codes.NotFound, "no subscription d"))
	if err := c.DeleteSubscription(ctx, "orders", "d"); !errors.Is(err, ErrUnknownSubscription) {
		t.Errorf("delete subscription: %v", err)
	}
}

func TestDial(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	dead := deadAddr(t)
	// The first reachable address is used.
	c, err := Dial([]string{dead, ss[0].Addr})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr() != ss[0].Addr {
		t.Errorf("uses %s, want %s", c.Addr(), ss[0].Addr)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.GetTopic(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	_, err = Dial([]string{dead})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("no site: %v", err)
	}
	_, err = Dial(nil, WithWindow(0), WithTimeout(-1))
	if err == nil || err.Error() != "pubsub: dial: no address given; WithTimeout(-1ns): want > 0; WithWindow(0): want > 0" {
		t.Fatalf("bad options: %v", err)
	}
}

// TestPublishFailover: a publish with an id that meets a lost site is made
// at the next one; one without fails, and the client still moves on.
func TestPublishFailover(t *testing.T) {
	_, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	unavailable := status.Error(codes.Unavailable, "shutting down")

	ss[0].FailNext("Publish", unavailable)
	_, err := c.Publish(ctx, "orders", []byte("no id"))
	if !errors.Is(err, ErrUnavailable) || err.Error() != `pubsub: publish to "orders": shutting down` {
		t.Fatalf("without id: %v", err)
	}
	if n := len(ss[1].PublishRequests()); n != 0 {
		t.Fatalf("a publish without id was retried: %d at eu-west-1", n)
	}
	if c.Addr() != ss[1].Addr {
		t.Fatalf("client stayed at %s", c.Addr())
	}

	ss[1].FailNext("Publish", unavailable)
	a, err := c.Publish(ctx, "orders", []byte("with id"), MsgID("x-1"))
	if err != nil || a.Origin != "us-east-1" {
		t.Fatalf("with id: %+v, %v; want it published at us-east-1 after eu-west-1 failed", a, err)
	}

	// Every site lost: the last error.
	ss[0].Stop()
	ss[1].Stop()
	if _, err := c.Publish(ctx, "orders", nil, MsgID("x-2")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("all lost: %v", err)
	}
}

// TestPublishAsyncWindow: no more than the window's publishes are
// unanswered at once; PublishAsync waits for room, bounded by its ctx.
func TestPublishAsyncWindow(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss, WithWindow(3))
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	ss[0].HoldAcks(true)
	var fs []*Future
	for range 3 {
		f, err := c.PublishAsync(ctx, "orders", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ss[0].WaitFor(t, "3 publishes held", func() bool { return ss[0].Held() == 3 })
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.PublishAsync(short, "orders", []byte("x")); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "window of 3") {
		t.Fatalf("full window: %v", err)
	}
	// A publisher that keeps going gets room as answers come.
	done := make(chan error, 1)
	go func() {
		for range 7 {
			f, err := c.PublishAsync(ctx, "orders", []byte("y"))
			if err != nil {
				done <- err
				return
			}
			fs = append(fs, f)
		}
		done <- nil
	}()
	for released := 0; released < 10; {
		ss[0].WaitFor(t, "a publish to release", func() bool { return ss[0].Held() > 0 })
		if ss[0].ReleaseNewest() {
			released++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if a, err := f.Result(); err != nil || a.Seq == 0 {
			t.Fatalf("future %d: %+v, %v", i, a, err)
		}
	}
	if got := ss[0].MaxHeld(); got != 3 {
		t.Fatalf("at most %d publishes waited at once, want the window, 3", got)
	}
}

// TestPublishAsyncOutOfOrder: answers that come in another order than the
// requests reach the right futures.
func TestPublishAsyncOutOfOrder(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	ss[0].HoldAcks(true)
	var fs []*Future
	for i := range 5 {
		f, err := c.PublishAsync(ctx, "orders", []byte{byte('a' + i)})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ss[0].WaitFor(t, "5 publishes held", func() bool { return ss[0].Held() == 5 })
	for i := 4; i >= 0; i-- {
		ss[0].ReleaseNewest()
		<-fs[i].Done()
		for j := range i {
			select {
			case <-fs[j].Done():
				t.Fatalf("future %d done when only %d..4 were answered", j, i)
			default:
			}
		}
		a, err := fs[i].Result()
		// One stream sends in order: the i-th publish is seq i+1.
		if err != nil || a.Seq != uint64(i+1) || a.Origin != "us-east-1" {
			t.Fatalf("future %d: %+v, %v", i, a, err)
		}
	}
	// An error answer reaches its future only.
	ss[0].HoldAcks(false)
	ss[0].FailNext("Publishes", status.Error(codes.NotFound, "unknown topic orders"))
	f1, _ := c.PublishAsync(ctx, "orders", nil)
	f2, _ := c.PublishAsync(ctx, "orders", nil)
	if _, err := f1.Result(); !errors.Is(err, ErrUnknownTopic) || err.Error() != `pubsub: publish to "orders": unknown topic orders` {
		t.Fatalf("error answer: %v", err)
	}
	if _, err := f2.Result(); err != nil {
		t.Fatal(err)
	}
}

// TestPublishAsyncFailover: when the stream's site is lost, the publishes
// with an id are made at the next site (which knows their ids: duplicates
// of what the lost site made), those without fail.
func TestPublishAsyncFailover(t *testing.T) {
	_, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	ss[0].HoldAcks(true)
	withID, err := c.PublishAsync(ctx, "orders", []byte("a"), MsgID("a"))
	if err != nil {
		t.Fatal(err)
	}
	noID, err := c.PublishAsync(ctx, "orders", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	ss[0].WaitFor(t, "2 publishes held", func() bool { return ss[0].Held() == 2 })
	ss[0].Stop()
	a, err := withID.Result()
	if err != nil || !a.Duplicate || a.Origin != "us-east-1" || a.Seq != 1 {
		t.Fatalf("with id: %+v, %v; want the lost site's message, as a duplicate", a, err)
	}
	if _, err := noID.Result(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("without id: %v", err)
	}
	// The next ones go to the new site.
	f, err := c.PublishAsync(ctx, "orders", []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := f.Result(); err != nil || a.Origin != "eu-west-1" {
		t.Fatalf("after failover: %+v, %v", a, err)
	}
	if c.Site() != "eu-west-1" {
		t.Fatalf("Site() = %s", c.Site())
	}
}

// TestCloseFailsFutures: Close answers what the site has not.
func TestCloseFailsFutures(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	ss[0].HoldAcks(true)
	f, err := c.PublishAsync(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ss[0].WaitFor(t, "a publish held", func() bool { return ss[0].Held() == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Result(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := c.PublishAsync(ctx, "orders", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("PublishAsync after Close: %v", err)
	}
}

// TestPublishAsyncUnavailableAnswer: a publish the site answers with
// Unavailable moves the client: with an id it is made at the next site,
// without one it fails, and later publishes go to the next site.
func TestPublishAsyncUnavailableAnswer(t *testing.T) {
	_, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	unavailable := status.Error(codes.Unavailable, "shutting down")
	ss[0].FailNext("Publishes", unavailable)
	ss[1].FailNext("Publishes", unavailable)
	ss[0].FailNext("Publishes", unavailable)
	// Without id: fails at us-east-1, then at eu-west-1; with one: fails
	// at us-east-1, made at eu-west-1, where the client stays.
	for i, want := range []string{"unavailable", "unavailable", "eu-west-1", "eu-west-1"} {
		var opts []PublishOption
		if i >= 2 {
			opts = []PublishOption{MsgID(fmt.Sprint(i))}
		}
		f, err := c.PublishAsync(ctx, "orders", nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.Result()
		got := a.Origin
		if errors.Is(err, ErrUnavailable) {
			got = "unavailable"
		} else if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("publish %d: %s (%v), want %s", i, got, err, want)
		}
	}
}
