// Package pubsubclient is the Go client of the sites' pub/sub API
// (pubsub/pubsubpb): topics, publishes that return once the topic's
// publish-ack predicate holds, and subscriptions with explicit acks, that
// go on at another site when theirs is lost. kvctl's topic, pub and sub
// commands are built on it.
//
// Like kvclient it links only what a client needs: the generated API,
// gRPC and protobuf, nothing of the site (no pebble, no Raft, no
// stabilizer); a repository test holds that rule.
//
// # Usage
//
//	c, err := pubsubclient.Dial([]string{"10.0.1.5:7003", "10.0.2.5:7003"})
//	defer c.Close()
//	_, err = c.CreateTopic(ctx, pubsubclient.Topic{Name: "jobs", PublishAck: "majority"})
//	ack, err := c.Publish(ctx, "jobs", rec, pubsubclient.MsgID("job-7"))
//	f, err := c.PublishAsync(ctx, "jobs", rec) // f.Done(), f.Result()
//
//	sub, err := c.Subscribe(ctx, "jobs", pubsubclient.Durable("workers"), pubsubclient.StartAll())
//	for {
//		m, err := sub.Next(ctx)
//		if err != nil {
//			break // ErrClosed after sub.Close, or why the subscription ended
//		}
//		handle(m.Data)
//		m.Ack() // or m.Nak(time.Second), m.InProgress(), m.Term()
//	}
//	sub.Close(ctx) // acks sent, durable position stored
//
// Dial uses the first of its addresses that answers. When the site in use
// is lost (a call or stream fails with Unavailable, or a stream ends
// without the site's answer to Close), the client moves to the next
// address, round the list, and:
//   - retries topic requests and Subscribe there, each address once;
//   - retries a Publish there only if it has a MsgID: without one the
//     first may have been published, and Publish returns ErrUnavailable.
//     A site that has seen a message id within the topic's duplicate
//     window, from any origin, answers with the original (PubAck.Duplicate):
//     that window is the scope of the guarantee. PublishAsync does the same
//     for the publishes it had sent, and sends again those it had not;
//   - resumes each Subscription there by itself: a durable one with the
//     same start (the site resumes from the replicated position, so
//     messages not yet acked come again), an ephemeral one after the last
//     message it received from each origin (see Subscribe).
//
// Errors carry the site's gRPC code and message unchanged (*Error; status.Code
// reads the code) and wrap a sentinel per code: ErrUnknownTopic,
// ErrTopicExists, ErrTooLarge, ErrInvalid, ErrTimeout, ErrUnavailable,
// ErrConflict, ErrLimit, ErrUnsupported, ErrPermission, ErrClosed. A call
// whose ctx ended returns ctx's error, wrapped.
//
// Acks are queued by Ack, Nak, InProgress and Term and sent in batches on
// the subscription's stream; the acks the site refuses (answered already,
// or delivered again since) come back through Subscription.AckErrors, not
// through Next, so that a consumer's loop does not stop for them.
//
// # Concurrency
//
// A Client, its Subscriptions and Futures are safe for concurrent use;
// several goroutines may call Next on one Subscription, each message
// going to one of them, and a Msg may be acked from any goroutine. Every
// goroutine belongs to the Client, which Close waits for: per Publishes
// stream (one per Client, opened by the first PublishAsync) one sends and
// one reads the answers; per Subscription stream one reads (and resubscribes
// after a failover) and one sends the acks and the Close. No goroutine is
// started by Dial. All mutexes (the Client's, a publish stream's, a
// Subscription's) are leaves: none is held while taking another, or across
// IO.
package pubsubclient
