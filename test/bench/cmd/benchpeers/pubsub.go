package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/natsps"
	"github.com/stabilizer/stabilizer/test/bench/internal/peerapi"
	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
)

// natsPS runs one job of `wanbench pubsub` against NATS JetStream: set up
// the stream and its leader, run the job's load, print a PSResult.
func natsPS(args []string) error {
	var job peerapi.PSJob
	if err := readJSONFlag("nats-ps", "in", "PSJob (JSON)", args, &job); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sys, err := natsps.Dial(setup, natsps.Config{Servers: job.Servers, Stream: job.Stream, ConsumerLeaders: job.ConsumerLeaders, Logf: logf})
	if err != nil {
		return err
	}
	defer sys.Close()
	if job.Create {
		if err := sys.CreateStream(setup); err != nil {
			return err
		}
	}
	if job.Leader != "" {
		if err := sys.PlaceLeader(setup, job.Leader); err != nil {
			return err
		}
	}
	var res peerapi.PSResult
	if res.LeaderBefore, err = sys.StreamLeader(setup); err != nil {
		return err
	}
	var subs []psload.Sub
	switch {
	case job.Loop != nil:
		for _, t := range job.Loop.Topics {
			if err := sys.CreateTopic(setup, psload.Topic{Name: t}); err != nil {
				return err
			}
		}
		cfg := *job.Loop
		step := max(1, cfg.Count*len(cfg.Regions)*len(cfg.Topics)/10)
		cfg.Progress = func(done, total int) {
			if total > 0 && (done%step == 0 || done == total) {
				logf("nats: %d/%d publishes", done, total)
			}
		}
		if res.Loop, err = psload.Loop(ctx, sys, cfg); err != nil {
			return err
		}
		subs = cfg.Subscribers
	case job.Async != nil:
		if err := sys.CreateTopic(setup, psload.Topic{Name: job.Async.Topic}); err != nil {
			return err
		}
		if res.Async, err = psload.Async(ctx, sys, *job.Async); err != nil {
			return err
		}
		subs = job.Async.Subscribers
	}
	after, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	if res.LeaderAfter, err = sys.StreamLeader(after); err != nil {
		return err
	}
	for _, s := range subs {
		l, err := sys.ConsumerLeader(after, s.Durable)
		if err != nil {
			return err
		}
		if res.ConsumerLeaders == nil {
			res.ConsumerLeaders = map[string]string{}
		}
		res.ConsumerLeaders[s.Durable] = l
	}
	if job.Delete {
		if err := sys.DeleteStream(after); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
