package pubsub

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// serve serves a site's broker over gRPC on loopback, as stabilizerd does,
// until the test ends.
func serve(t *testing.T, b *Broker, opts ...grpc.ServerOption) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	pubsubpb.RegisterPubSubServer(srv, NewServer(b))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// The SDK against the real service: pipelined publishes (several to a
// gRPC message once both ends said they read batches) are each answered
// once, and a durable subscriber at another site gets each once, in order.
func TestSDKThroughTheService(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events"})
	var received atomic.Int64 // gRPC messages of Publishes streams
	count := grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod == pubsubpb.PubSub_Publishes_FullMethodName {
			ss = countingStream{ss, &received}
		}
		return h(srv, ss)
	})
	pub, err := pubsubclient.Dial([]string{serve(t, c.broker(us), count)})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	subc, err := pubsubclient.Dial([]string{serve(t, c.broker(eu))})
	if err != nil {
		t.Fatal(err)
	}
	defer subc.Close()
	sub, err := subc.Subscribe(ctx, "jobs.events", pubsubclient.Durable("dash"), pubsubclient.StartAll())
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	futures := make([]*pubsubclient.Future, n)
	for i := range futures {
		if futures[i], err = pub.PublishAsync(ctx, "jobs.events", fmt.Appendf(nil, "ev-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	last := uint64(0)
	for i, f := range futures {
		a, err := f.Result()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if a.Seq <= last {
			t.Fatalf("publish %d has seq %d after %d", i, a.Seq, last)
		}
		last = a.Seq
	}
	for i := range n {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("ev-%d", i); string(m.Data) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Data, want)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if m := received.Load(); m >= n {
		t.Fatalf("%d publishes took %d gRPC messages: not batched", n, m)
	}
	t.Logf("%d publishes in %d gRPC messages", n, received.Load())
}

type countingStream struct {
	grpc.ServerStream
	n *atomic.Int64
}

func (s countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.n.Add(1)
	}
	return err
}

// Over gRPC, a subscription behind what retention kept fails with
// OUT_OF_RANGE (pubsubclient.ErrTruncated) naming what it asked for, at
// Subscribe or, once a limit overtook it, at Next; OnTruncatedFirst
// starts at the first retained message.
func TestSDKBehindRetention(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", Retention: Retention{MaxMessages: 2}})
	cl, err := pubsubclient.Dial([]string{serve(t, c.broker(us))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	slow, err := cl.Subscribe(ctx, "jobs.events", pubsubclient.MaxAckPending(1))
	if err != nil {
		t.Fatal(err)
	}
	acks := publishN(t, c.broker(us), "jobs.events", 5, "ev")
	m0, err := slow.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.waitStored(t, "jobs.events", us, acks[4].Seq, us)
	c.retainAt(t, us)

	_, err = cl.Subscribe(ctx, "jobs.events", pubsubclient.StartSeq(map[string]uint64{us: acks[0].Seq}))
	if !errors.Is(err, pubsubclient.ErrTruncated) || status.Code(err) != codes.OutOfRange ||
		!strings.Contains(err.Error(), fmt.Sprintf(`topic "jobs.events", origin %s: messages from seq %d were dropped up to %d; the first retained is %d`,
			us, acks[0].Seq, acks[2].Seq, acks[3].Seq)) {
		t.Fatalf("subscribe behind retention: %v", err)
	}
	first, err := cl.Subscribe(ctx, "jobs.events", pubsubclient.StartSeq(map[string]uint64{us: acks[0].Seq}), pubsubclient.OnTruncatedFirst())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ev-3", "ev-4"} {
		m, err := first.Next(ctx)
		if err != nil || string(m.Data) != want {
			t.Fatalf("first retained: %v %v, want %s", m, err, want)
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// slow acks ev-0 and finds ev-1 gone.
	if err := m0.Ack(); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Next(ctx); !errors.Is(err, pubsubclient.ErrTruncated) || !strings.Contains(err.Error(), `topic "jobs.events"`) {
		t.Fatalf("overtaken subscription: %v", err)
	}
}
