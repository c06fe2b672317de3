package pubsub

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

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
