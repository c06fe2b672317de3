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
//     retries (see Broker.Publish for its scope and window); each site
//     drops them by the topic's retention (see Retention below).
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
//	_, err = b.CreateTopic(ctx, pubsub.Topic{Name: "jobs.events", PublishAck: "majority",
//		Retention: pubsub.Retention{MaxAge: 24 * time.Hour, MaxMessages: 1_000_000}})
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
// # Retention
//
// Two things are bounded, each by its own background loop.
//
// The log of every origin's pub/sub stream: the broker copies each
// message into its namespace as it applies it, so once every site applied
// a stream (the `applied` row of its ack table), every TruncateEvery
// (default 5s) each site truncates its log of that stream up to there,
// less TruncateLag entries (default 0); the node caps that at what every
// other site persisted. Subscribers read the namespace, never the log, so
// they see no difference; pubsub_stream_truncated_seq{origin} says where
// each log starts.
//
// The stored messages, by the topic's Retention, every RetentionEvery
// (default 1s): policy "limits" (the default) drops only by the limits;
// "interest" also drops a message once every durable subscription of the
// topic acked it (their replicated positions, every site's merged) and
// every subscription live at the site did, and with no subscription at
// all at once, as NATS JetStream does; "workqueue" drops it once its
// durable subscription acked it, keeps everything while there is none,
// refuses a second durable subscription and ephemeral ones. Only a
// position's floor counts (the contiguous acked prefix per origin), not
// the seqs acked above it. The limits apply under every policy, per topic
// across origins (as a JetStream stream's): past max_messages or
// max_bytes the topic's oldest messages by HLC go, whichever origin
// published them; max_age compares a message's HLC with the site's clock
// (Config.Now). A topic may pass a limit by what arrives within one
// RetentionEvery.
//
// Each site applies retention to what it stores, when its loop runs and
// with the positions it has seen, so sites drop at slightly different
// times, and a site that has not yet seen a new durable subscription may
// drop what an interest policy would have kept for it. Drops are a prefix
// per (topic, origin): one range deletion, and a floor record under seq 0
// of the origin's messages in the same batch; pubsub_retention_dropped_*
// count them. Not pruned yet: the index of message ids (one small key per
// message published with an id) and the messages of a deleted topic.
//
// A subscription that would read next what was dropped (a durable one
// resuming behind what the site retains, a start at a seq that is gone, a
// slow one overtaken by a limit) fails with a *TruncatedError
// (ErrTruncated; OUT_OF_RANGE over gRPC) naming the topic, the origin, the
// seq asked and the first retained one, or with OnTruncatedFirst goes on
// from the first retained message, its position passing the dropped ones.
// A start that names no seq (all, new, last, a time) begins at what is
// retained and is not failed for what goes before it read anything of an
// origin. A reader knows exactly whether what it wanted next was dropped:
// it reads the floor record and the messages from one snapshot. A message
// that was delivered, not acked, and then dropped is not delivered again
// (consumer.State.Drop).
//
// # Concurrency
//
// A Broker is safe for concurrent use. Each subscription at a site has one
// pump goroutine, owned by the broker, that reads storage and hands out
// deliveries; consumers' acks take the subscription's mutex. The
// retention and truncation loops are the broker's too; only the retention
// loop deletes messages, only the applier adds them (above what it added
// before), and each writes its own keys, so neither waits for the other.
// Lock order: Broker.mu before subscription.mu before Consumer.mu;
// audience.mu and store.mu are leaves. No mutex is held across a wait or
// the network; storage reads hold none of the broker's.
package pubsub
