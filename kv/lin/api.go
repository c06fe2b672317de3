package lin

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/raft/v3"
)

// Put sets key to value and returns the write's version.
func (n *Node) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := n.checkKV(key, value); err != nil {
		return 0, fmt.Errorf("lin: put %q: %w", key, err)
	}
	res, err := n.do(ctx, &command{op: opPut, key: key, value: value})
	if err != nil {
		return 0, fmt.Errorf("lin: put %q: %w", key, err)
	}
	return res.version, nil
}

// Delete removes key (a no-op write if it does not exist) and returns the
// write's version.
func (n *Node) Delete(ctx context.Context, key string) (uint64, error) {
	if err := n.checkKV(key, nil); err != nil {
		return 0, fmt.Errorf("lin: delete %q: %w", key, err)
	}
	res, err := n.do(ctx, &command{op: opDelete, key: key})
	if err != nil {
		return 0, fmt.Errorf("lin: delete %q: %w", key, err)
	}
	return res.version, nil
}

// CompareAndSwap sets key to value if cond holds and returns the new
// version. When cond does not hold it writes nothing and returns a
// *CompareError (errors.Is ErrCompareFailed) with the key's current
// version and value.
func (n *Node) CompareAndSwap(ctx context.Context, key string, cond Condition, value []byte) (uint64, error) {
	if err := n.checkKV(key, value); err != nil {
		return 0, fmt.Errorf("lin: compare-and-swap %q: %w", key, err)
	}
	res, err := n.do(ctx, &command{op: opPut, key: key, value: value, cond: cond})
	if err != nil {
		return 0, wrapUnlessCompare("compare-and-swap", key, err)
	}
	return res.version, nil
}

// CompareAndDelete deletes key if cond holds, like CompareAndSwap.
func (n *Node) CompareAndDelete(ctx context.Context, key string, cond Condition) (uint64, error) {
	if err := n.checkKV(key, nil); err != nil {
		return 0, fmt.Errorf("lin: compare-and-delete %q: %w", key, err)
	}
	res, err := n.do(ctx, &command{op: opDelete, key: key, cond: cond})
	if err != nil {
		return 0, wrapUnlessCompare("compare-and-delete", key, err)
	}
	return res.version, nil
}

// wrapUnlessCompare leaves a *CompareError as is (it names the key already).
func wrapUnlessCompare(op, key string, err error) error {
	if _, ok := err.(*CompareError); ok {
		return err
	}
	return fmt.Errorf("lin: %s %q: %w", op, key, err)
}

// Get returns key's value and version, linearizably: the read sees every
// write that completed before it began, wherever it was made. It costs one
// round trip from the leader to a majority (raft's ReadIndex), plus one
// to the leader from other sites. A missing key returns ErrNotFound.
func (n *Node) Get(ctx context.Context, key string) (Item, error) {
	if err := n.readIndex(ctx); err != nil {
		return Item{}, fmt.Errorf("lin: get %q: %w", key, err)
	}
	n.mu.Lock()
	it, ok := n.mu.fsm.get(key)
	n.mu.Unlock()
	if !ok {
		return Item{}, fmt.Errorf("lin: get %q: %w", key, ErrNotFound)
	}
	return Item{Key: key, Value: it.value, Version: it.version}, nil
}

// Grant gives job's lease to holder for ttl, or renews it if holder already
// has it (keeping its token). If another holder has it, it returns a
// *LeaseError (errors.Is ErrLeaseHeld) naming the holder. See the package
// documentation for when a lease expires.
func (n *Node) Grant(ctx context.Context, job, holder string, ttl time.Duration) (Lease, error) {
	if err := n.checkLease(job, holder); err != nil {
		return Lease{}, fmt.Errorf("lin: grant lease %q: %w", job, err)
	}
	if ttl <= 0 || ttl > n.cfg.MaxLeaseTTL {
		return Lease{}, fmt.Errorf("lin: grant lease %q: ttl %v outside (0, %v]: %w", job, ttl, n.cfg.MaxLeaseTTL, ErrInvalid)
	}
	return n.leaseOp(ctx, &command{op: opGrant, key: job, holder: holder, ttl: ttl})
}

// Renew extends holder's lease on job by its TTL. It fails with a
// *LeaseError (errors.Is ErrLeaseLost) if holder no longer holds it with
// token.
func (n *Node) Renew(ctx context.Context, job, holder string, token uint64) (Lease, error) {
	if err := n.checkLease(job, holder); err != nil {
		return Lease{}, fmt.Errorf("lin: renew lease %q: %w", job, err)
	}
	return n.leaseOp(ctx, &command{op: opRenew, key: job, holder: holder, token: token})
}

// Revoke gives up holder's lease on job, so that another holder may take
// it at once.
func (n *Node) Revoke(ctx context.Context, job, holder string, token uint64) error {
	if err := n.checkLease(job, holder); err != nil {
		return fmt.Errorf("lin: revoke lease %q: %w", job, err)
	}
	_, err := n.leaseOp(ctx, &command{op: opRevoke, key: job, holder: holder, token: token})
	return err
}

func (n *Node) leaseOp(ctx context.Context, c *command) (Lease, error) {
	start := n.cfg.Clock.Now()
	res, err := n.do(ctx, c)
	if err != nil {
		if _, ok := err.(*LeaseError); ok {
			return Lease{}, err
		}
		return Lease{}, fmt.Errorf("lin: %s lease %q: %w", c.op, c.key, err)
	}
	l := res.lease
	if l.Holder != "" {
		// The leader measures the TTL from when it applied the entry, after
		// start; 1% less covers clock rates differing by up to 1%.
		l.ValidUntil = start.Add(l.TTL - l.TTL/100)
	}
	return l, nil
}

// GetLease returns job's lease, linearizably. Holder is "" when nobody
// holds it.
func (n *Node) GetLease(ctx context.Context, job string) (Lease, error) {
	if err := n.readIndex(ctx); err != nil {
		return Lease{}, fmt.Errorf("lin: get lease %q: %w", job, err)
	}
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.fsm.lease(job, now), nil
}

func (n *Node) checkKV(key string, value []byte) error {
	switch {
	case key == "":
		return fmt.Errorf("empty key: %w", ErrInvalid)
	case len(key) > DefaultMaxKeyBytes:
		return fmt.Errorf("key of %d bytes, the limit is %d: %w", len(key), DefaultMaxKeyBytes, ErrInvalid)
	case !utf8.ValidString(key):
		return fmt.Errorf("key is not valid UTF-8: %w", ErrInvalid)
	case len(value) > n.cfg.MaxValueBytes:
		return fmt.Errorf("value of %d bytes, the limit is %d: %w", len(value), n.cfg.MaxValueBytes, ErrInvalid)
	}
	return nil
}

func (n *Node) checkLease(job, holder string) error {
	if err := n.checkKV(job, nil); err != nil {
		return err
	}
	if holder == "" || len(holder) > 255 {
		return fmt.Errorf("holder %q must have 1 to 255 bytes: %w", holder, ErrInvalid)
	}
	return nil
}

// do proposes c and waits for it to be applied.
func (n *Node) do(ctx context.Context, c *command) (result, error) {
	id := n.seq.Add(1)
	c.origin, c.id = n.cfg.Site, id
	w := &waiter{data: c.encode(), ch: make(chan result, 1)}
	n.mu.Lock()
	n.mu.waiters[id] = w
	n.mu.Unlock()
	if err := n.call(ctx, func() { n.propose(id) }); err != nil {
		n.mu.Lock()
		delete(n.mu.waiters, id)
		n.mu.Unlock()
		return result{}, n.explain(err, false)
	}
	select {
	case res := <-w.ch:
		return res, res.err
	case <-ctx.Done():
	case <-n.done:
	}
	n.mu.Lock()
	select {
	case res := <-w.ch: // applied after all
		n.mu.Unlock()
		return res, res.err
	default:
	}
	delete(n.mu.waiters, id)
	proposed := w.proposed
	n.mu.Unlock()
	err := ctx.Err()
	if err == nil {
		err = ErrStopped
	}
	return result{}, n.explain(err, proposed)
}

// readIndex waits until this site has applied everything committed before
// the call: then its state is at least as new as any completed write.
func (n *Node) readIndex(ctx context.Context) error {
	id := n.seq.Add(1)
	rctx := binary.BigEndian.AppendUint64(nil, id)
	ch := make(chan uint64, 1)
	n.mu.Lock()
	n.mu.readWaiters[id] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.mu.readWaiters, id)
		n.mu.Unlock()
	}()
	err := n.call(ctx, func() {
		n.loop.reads[id] = rctx
		n.rn.ReadIndex(rctx)
	})
	if err != nil {
		return n.explain(err, false)
	}
	var index uint64
	select {
	case index = <-ch:
	case <-ctx.Done():
		return n.explain(ctx.Err(), false)
	case <-n.done:
		return ErrStopped
	}
	for {
		n.mu.Lock()
		applied, wait := n.mu.applied, n.mu.appliedCh
		n.mu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("lin: applied %d, waiting for %d: %w", applied, index, ctx.Err())
		case <-n.done:
			return ErrStopped
		}
	}
}

// explain turns a deadline into an error a person can act on: no leader,
// no quorum, or (if the request was proposed) an unknown outcome.
func (n *Node) explain(cause error, proposed bool) error {
	if cause == ErrStopped || cause == ErrNotStarted {
		if proposed {
			return fmt.Errorf("%w: %w", ErrUnknownOutcome, cause)
		}
		return cause
	}
	n.mu.Lock()
	leader, last, term, state := n.mu.leader, n.mu.lastLeader, n.mu.term, n.mu.state
	reachable := slices.Clone(n.mu.reachable)
	transferring := n.mu.transferring
	n.mu.Unlock()
	name := func(id uint64) string {
		if id == raft.None || id > uint64(len(n.names)) {
			return ""
		}
		return n.names[id-1]
	}
	var err error
	switch {
	case leader == raft.None:
		err = &NoLeaderError{Site: n.cfg.Site, LastLeader: name(last), Term: term, Cause: cause}
	case state == raft.StateLeader && len(reachable) < len(n.names)/2+1:
		var unreachable []string
		for _, s := range n.names {
			if !slices.Contains(reachable, s) {
				unreachable = append(unreachable, s)
			}
		}
		err = &NoQuorumError{Leader: n.cfg.Site, Term: term, Reachable: reachable, Unreachable: unreachable, Need: len(n.names)/2 + 1, Cause: cause}
	case transferring:
		err = fmt.Errorf("leader %s (term %d) is handing leadership over: %w", name(leader), term, cause)
	default:
		err = fmt.Errorf("leader %s (term %d) did not answer in time: %w", name(leader), term, cause)
	}
	if proposed {
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
	return err
}

// Status is a site's view of the group.
type Status struct {
	Site    string
	Leader  string // "" when none is known
	Term    uint64
	State   string // Leader, Follower, Candidate, PreCandidate
	Applied uint64
	// Snapshot is the index of the latest snapshot this site made or
	// installed (1: the initial state).
	Snapshot uint64
	// Reachable lists the voters the leader heard from recently; empty on
	// other sites.
	Reachable []string
}

// Status returns this site's view of the group.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{Site: n.cfg.Site, Term: n.mu.term, State: n.mu.state.String(), Applied: n.mu.applied, Snapshot: n.mu.snapIndex, Reachable: slices.Clone(n.mu.reachable)}
	if n.mu.leader != raft.None {
		s.Leader = n.names[n.mu.leader-1]
	}
	return s
}

// raftLogger adapts hclog to raft's logger; raft's chatty info goes to
// debug.
type raftLogger struct{ l hclog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Trace(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Trace(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any)              { s := fmt.Sprint(v...); r.l.Error(s); panic(s) }
func (r raftLogger) Panicf(f string, v ...any)   { s := fmt.Sprintf(f, v...); r.l.Error(s); panic(s) }
