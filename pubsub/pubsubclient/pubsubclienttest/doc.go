// Package pubsubclienttest runs fake pub/sub sites in a test's process: gRPC
// servers of pubsubpb.PubSubServer on 127.0.0.1 port 0 that share one
// in-memory Cluster, so that a client can lose one and go on at another.
// They implement what pubsub.proto says well enough to test a client with
// (topics, publishes with message ids, pipelined publishes answered out of
// order, subscriptions with acks, naks, max deliveries and dead letters,
// durable positions that every fake site sees), not the protocol of a
// site: nothing is replicated, persisted or waited for, and ack waits never
// run out.
//
// # Usage
//
//	cl := pubsubclienttest.NewCluster()
//	a, b := cl.Start(t, "us-east-1"), cl.Start(t, "eu-west-1")
//	c, err := pubsubclient.Dial([]string{a.Addr, b.Addr})
//	a.HoldAcks(true)   // publishes wait until the test releases them
//	a.ReleaseNewest()  // answers the last one first
//	a.Stop()           // the client moves to b
//	b.WaitFor(t, "two acks", func() bool { return len(b.Acks()) == 2 })
//
// # Concurrency
//
// A Server and its Cluster are safe for concurrent use. Cluster.mu guards
// the shared state; a subscription's mu is taken before it, never after;
// a Server's mu is a leaf.
// Every wait in a test goes through WaitFor, which wakes on each change of
// the server's or the cluster's state and fails the test after 10 s.
package pubsubclienttest
