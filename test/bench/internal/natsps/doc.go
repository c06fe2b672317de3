// Package natsps is NATS JetStream as a psload.System: one R3 stream for
// every topic of the pub/sub bench (a topic is the subject
// "<stream>.<topic>"), a client connection per region to that region's
// server, durable pull consumers for subscriptions, and the placement the
// bench needs: the stream's leader moved to a chosen region, each durable
// consumer's leader to its subscriber's region or to the stream's leader,
// both by a leader step-down
// that names the preferred server ($JS.API.STREAM.LEADER.STEPDOWN and
// $JS.API.CONSUMER.LEADER.STEPDOWN with placement.preferred, nats-server
// v2.11 and later; server/jetstream_api.go), checked with the stream or
// consumer info.
//
// A publish is acknowledged once the stream's leader has the message in a
// quorum of replicas; with the servers' sync_interval: always every
// replica fsyncs its Raft log before it counts, the durability of our
// majority predicate. NATS has no other publish-ack or delivery predicate,
// so CreateTopic accepts only the defaults.
//
// # Usage
//
//	sys, err := natsps.Dial(ctx, natsps.Config{Servers: map[string]string{"us-east-1": "10.78.0.2:4222", ...}})
//	err = sys.CreateStream(ctx)
//	err = sys.PlaceLeader(ctx, "eu-west-1")
//	res, err := psload.Loop(ctx, sys, cfg)
//
// It is imported by benchpeers only: wanbench links no peer's code.
//
// # Concurrency
//
// A System is safe for concurrent use; nats.go's connections are.
package natsps
