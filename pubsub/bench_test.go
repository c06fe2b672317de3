package pubsub

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTopics publishes at one site of three (in process) across n
// topics, each with its own audience publish-ack predicate and its own
// subscriber at another site (ephemeral, or durable: then its position is
// stored too), acking everything. It reports
// messages per second and CPU per message (all three sites: one process);
// with topics sharing their origin's stream and audience predicates shared
// by source, both should stay flat as topics grow:
//
//	go test ./pubsub -run '^$' -bench Topics -benchtime 3000x
func BenchmarkTopics(b *testing.B) {
	for _, durable := range []bool{false, true} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("durable=%v/topics=%d", durable, n), func(b *testing.B) { benchTopics(b, n, durable) })
		}
	}
}

func benchTopics(b *testing.B, n int, durable bool) {
	c := newCluster(b, nil, sites3...)
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("jobs.%04d.events", i)
		if _, err := c.broker(us).CreateTopic(ctx, Topic{Name: names[i], PublishAck: "audience"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range names {
		for {
			if _, ok := c.broker(eu).topic(name); ok {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range names {
		o := SubOptions{Topic: name}
		if durable {
			o.Durable = "dash"
		}
		cn, err := c.broker(eu).Subscribe(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cn.Close(context.Background())
			for {
				ds, err := cn.Next(sctx)
				if err != nil {
					return
				}
				for _, d := range ds {
					_ = cn.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt})
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	pub := c.broker(us)
	const batch = 64
	msgs := make([]Message, batch)
	data := make([]byte, 256)
	publish := func(k int) {
		for i := range msgs {
			msgs[i] = Message{Topic: names[(k*batch+i)%n], Data: data}
		}
		for _, r := range pub.PublishBatch(ctx, msgs, 0) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	publish(0) // warm: audiences built, predicates defined
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	rounds := max(b.N/batch, 1)
	for k := range rounds {
		publish(k + 1)
	}
	b.StopTimer()
	el := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	msgsDone := float64(rounds * batch)
	b.ReportMetric(msgsDone/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/msgsDone, "cpu-µs/msg")
}
