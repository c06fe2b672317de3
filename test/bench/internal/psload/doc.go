// Package psload drives a pub/sub system the same way whichever system it
// is: the bench's view of a system is the System interface, and the loads
// are closed loops of synchronous publishes with subscribers measuring
// cross-region delivery (Loop), and windows of asynchronous publishing with
// durable subscribers keeping up, or one of them stopping to ack (Async).
//
// wanbench runs these loads against our pub/sub in its own process and
// benchpeers runs them against NATS JetStream (package natsps), so that both
// systems are measured by one piece of code.
//
// # Usage
//
//	res, err := psload.Loop(ctx, sys, psload.LoopConfig{Regions: sites, Topics: []string{"t"}, Count: 50,
//		Subscribers: []psload.Sub{{Region: "eu-west-1", Topic: "t", Durable: "d-eu"}}})
//
// Every message carries a stamp (Stamp): the run, the publisher's region
// and topic, its number and the wall-clock time it was sent, so that a
// subscriber in another process on the same host can tell how long the
// message took and ignore messages of earlier runs that a durable
// subscription still holds.
//
// # Concurrency
//
// Loop and Async start their goroutines (one per publisher, subscriber and
// collector) and wait for all of them before returning. A System must be
// safe for concurrent use by them.
package psload
