// Package pubsub is the pub/sub service of a site: topics whose messages
// travel on the library's streams, a publish-ack predicate that says when
// Publish returns, a delivery predicate that says when a subscriber's site
// may hand a message out, and subscriptions (ephemeral or durable) with
// explicit acks whose positions are replicated, so that a consumer can
// leave one region and resume in another.
//
// The one idea: a topic is not a stream. Every site publishes all of its
// topics on one stream of its own (Stream, "pubsub"), so the ack table and
// the core's work stay the same however many topics there are, and a
// topic's frontier is read off its origin's stream: a message at seq s is
// published under P once P's frontier on that stream covers s, since the
// stream's acks cover prefixes. A message's seq is its seq on that stream:
// increasing per origin, not contiguous per topic.
//
// What travels where:
//   - Topic definitions and durable positions live in the KV (package kv),
//     so they are replicated like any key. Each site stores its own
//     position key of a subscription; resuming merges every site's with
//     quorum reads under the position predicate (default majority), so a
//     resumed subscription sees every position stored under it.
//   - Messages are stored at every site, by (topic, origin, seq), in the
//     broker's namespace, together with the stream position (exactly once
//     across crashes), and with an index of message ids for idempotent
//     retries (see Broker.Publish for its scope and window).
//   - Which topics have live subscribers at a site travels on an
//     application channel (Channel), for the `audience` publish-ack
//     predicate (see audience.go).
//
// The subscription semantics (acks, naks, redelivery, max deliveries, dead
// letters, shared consumers, the bound on unacked messages, the position)
// are the pure state machine of package pubsub/internal/consumer; this
// package feeds it from storage, gated by the delivery predicate, and
// hands out its deliveries.
//
// # Usage
//
//	b, err := pubsub.New(pubsub.Config{Node: node, KV: store}) // before node.Start
//	err = node.Start(); err = b.Start()
//	_, err = b.CreateTopic(ctx, pubsub.Topic{Name: "jobs.events", PublishAck: "majority"})
//	ack, err := b.Publish(ctx, pubsub.Message{Topic: "jobs.events", Data: ev, ID: "job-7/started"}, 0)
//	c, err := b.Subscribe(ctx, pubsub.SubOptions{Topic: "jobs.events", Durable: "dash"})
//	ds, err := c.Next(ctx) // then c.Ack(...) each
//	srv := pubsub.NewServer(b) // the gRPC API of pubsubpb
//
// The Go SDK is package pubsub/pubsubclient; it links only the API.
//
// # Durability of positions and what a move costs
//
// A durable subscription stores its position every PositionInterval while
// acks change it, and when its last consumer at the site leaves (Close
// waits for that store). A consumer that closes at site A and subscribes
// at site B is redelivered at most the messages it had not acked when it
// left. If A dies instead, B may also redeliver what was acked at A in the
// last PositionInterval plus the time the position predicate takes to
// hold (a round trip to a majority); nothing unacked is ever marked acked,
// so nothing is lost.
//
// # Concurrency
//
// A Broker is safe for concurrent use. Each subscription at a site has one
// pump goroutine, owned by the broker, that reads storage and hands out
// deliveries; consumers' acks take the subscription's mutex. Lock order:
// Broker.mu before subscription.mu before Consumer.mu; audience.mu and
// store.mu are leaves. No mutex is held across a wait or the network;
// storage reads hold none of the broker's.
package pubsub
