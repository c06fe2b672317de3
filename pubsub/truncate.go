package pubsub

import (
	"context"
	"errors"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// The broker copies every message it applies into its namespace, so the
// log of a pub/sub stream is needed only until every site applied it: a
// site that has not yet is sent the entries from its origin's log (or a
// peer's), and one that restarts is delivered them again from its own. The
// truncation loop drops, at this site, the log of every origin's pub/sub
// stream up to the lowest `applied` of the stream's ack table, less
// TruncateLag entries; the node caps it further at what every other site
// persisted and what this site applied.

// truncateLoop truncates the pub/sub streams every TruncateEvery, and when
// a test asks (truncateNow).
func (b *Broker) truncateLoop() {
	b.passes(b.cfg.TruncateEvery, b.truncateReq, b.truncateStreams, "truncate the pub/sub streams")
}

// passes runs pass every interval, and at once when asked on req (whose
// caller gets its error), until the broker closes; a failed pass nobody
// asked for is logged as what.
func (b *Broker) passes(interval time.Duration, req chan chan error, pass func(context.Context) error, what string) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var done chan error
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case done = <-req:
		}
		err := pass(b.ctx)
		if done != nil {
			done <- err
		} else if err != nil && b.ctx.Err() == nil {
			b.log.Warn(what, "error", err)
		}
	}
}

// truncateNow runs a pass of the truncation loop and waits for it.
func (b *Broker) truncateNow(ctx context.Context) error { return b.ask(ctx, b.truncateReq) }

// ask hands a loop a request for a pass and waits for its answer.
func (b *Broker) ask(ctx context.Context, loop chan chan error) error {
	done := make(chan error, 1)
	select {
	case loop <- done:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return ErrClosed
	}
}

// truncateStreams truncates the log of every origin's pub/sub stream up to
// what every site applied, less the lag.
func (b *Broker) truncateStreams(ctx context.Context) error {
	sts, err := b.node.Streams(ctx)
	if err != nil {
		return err
	}
	n := len(b.node.Schema().Sites)
	var errs []error
	for _, st := range sts {
		if st.Stream.Name != Stream || len(st.Acks) < (frontier.Applied+1)*n {
			continue
		}
		upto := allApplied(st.Acks, n)
		upto -= min(upto, b.cfg.TruncateLag)
		floor := st.Truncated
		if upto > floor {
			f, err := b.node.Truncate(ctx, st.Stream, upto, stabilizer.TruncateOptions{})
			if err != nil {
				errs = append(errs, err)
			} else {
				floor = f
			}
		}
		b.metrics.truncated.WithLabelValues(st.Stream.Origin).Set(float64(floor))
	}
	return errors.Join(errs...)
}

// allApplied is the lowest `applied` of a flat ack table: every site
// applied the stream up to it.
func allApplied(acks []uint64, sites int) uint64 {
	row := acks[frontier.Applied*sites : (frontier.Applied+1)*sites]
	low := row[0]
	for _, a := range row[1:] {
		low = min(low, a)
	}
	return low
}
