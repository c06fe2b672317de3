package lin

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Match them with errors.Is; the errors returned wrap them
// with what a person needs to act: the key, the leader, the current version.
var (
	// ErrStopped is returned by every call after Close.
	ErrStopped = errors.New("lin: node stopped")
	// ErrNotStarted is returned by calls before Start.
	ErrNotStarted = errors.New("lin: node not started")
	// ErrNotFound is returned by Get of a key that does not exist.
	ErrNotFound = errors.New("lin: key not found")
	// ErrInvalid reports a bad argument: an empty key, a value too large, a
	// TTL out of range.
	ErrInvalid = errors.New("lin: invalid argument")
	// ErrNoLeader is wrapped by *NoLeaderError: no leader was known before
	// the deadline. Unless the error also matches ErrUnknownOutcome, the
	// request was never proposed and did not happen.
	ErrNoLeader = errors.New("lin: no leader")
	// ErrNoQuorum is wrapped by *NoQuorumError: the leader cannot reach a
	// majority of the voters.
	ErrNoQuorum = errors.New("lin: not enough voters reachable")
	// ErrUnknownOutcome is returned when the deadline passed after a write
	// was proposed but before it was applied: it may still take effect.
	// Read the key to learn what happened.
	ErrUnknownOutcome = errors.New("lin: outcome unknown")
	// ErrCompareFailed is wrapped by *CompareError: a compare-and-swap's
	// condition did not hold; nothing was written.
	ErrCompareFailed = errors.New("lin: compare failed")
	// ErrLeaseHeld is wrapped by *LeaseError when a grant asks for a lease
	// another holder has.
	ErrLeaseHeld = errors.New("lin: lease held by another holder")
	// ErrLeaseLost is wrapped by *LeaseError when a renew or revoke names a
	// holder and token that no longer hold the lease (it expired, was
	// revoked, or passed to another holder).
	ErrLeaseLost = errors.New("lin: lease not held")
)

// NoLeaderError says that no leader was known: LastLeader is the last one
// this site saw ("" if none) and Term the newest term it knows.
type NoLeaderError struct {
	Site       string
	LastLeader string
	Term       uint64
	Cause      error // usually the context's error
}

func (e *NoLeaderError) Error() string {
	last := "none seen"
	if e.LastLeader != "" {
		last = fmt.Sprintf("last known leader %s", e.LastLeader)
	}
	s := fmt.Sprintf("lin: no leader at %s (%s, term %d); are a majority of the voters up and reachable?", e.Site, last, e.Term)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrNoLeader) hold.
func (e *NoLeaderError) Is(target error) bool { return target == ErrNoLeader }

// Unwrap returns the cause.
func (e *NoLeaderError) Unwrap() error { return e.Cause }

// NoQuorumError says that the leader hears from too few voters to commit:
// Need voters are needed, only Reachable answer.
type NoQuorumError struct {
	Leader      string
	Term        uint64
	Reachable   []string
	Unreachable []string
	Need        int
	Cause       error
}

func (e *NoQuorumError) Error() string {
	s := fmt.Sprintf("lin: leader %s (term %d) reaches %d of %d voters, needs %d: reachable %s, unreachable %s",
		e.Leader, e.Term, len(e.Reachable), len(e.Reachable)+len(e.Unreachable), e.Need,
		strings.Join(e.Reachable, ", "), strings.Join(e.Unreachable, ", "))
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrNoQuorum) hold.
func (e *NoQuorumError) Is(target error) bool { return target == ErrNoQuorum }

// Unwrap returns the cause.
func (e *NoQuorumError) Unwrap() error { return e.Cause }

// CompareError reports a failed compare-and-swap with the key's current
// state, so the caller can decide whether to retry.
type CompareError struct {
	Key  string
	Cond Condition
	// Exists, Version and Value are the key's state when the condition was
	// evaluated.
	Exists  bool
	Version uint64
	Value   []byte
}

func (e *CompareError) Error() string {
	have := "the key does not exist"
	if e.Exists {
		have = fmt.Sprintf("have version %d value %s", e.Version, quoteValue(e.Value))
	}
	return fmt.Sprintf("lin: compare failed on %q: want %s, %s", e.Key, e.Cond, have)
}

// Is makes errors.Is(err, ErrCompareFailed) hold.
func (e *CompareError) Is(target error) bool { return target == ErrCompareFailed }

// LeaseError reports a lease operation refused because of the lease's
// current state.
type LeaseError struct {
	Op  string // grant, renew, revoke
	Job string
	// Holder and Token describe the request.
	Holder string
	Token  uint64
	// Current is the lease as it stands ("" holder if nobody holds it).
	Current Lease
	err     error
}

func (e *LeaseError) Error() string {
	cur := "nobody holds it"
	if e.Current.Holder != "" {
		cur = fmt.Sprintf("held by %s with token %d", e.Current.Holder, e.Current.Token)
		if e.Current.Remaining > 0 {
			cur += fmt.Sprintf(", expires in about %v unless renewed", e.Current.Remaining.Round(time.Millisecond))
		}
	}
	if e.err == ErrLeaseHeld {
		return fmt.Sprintf("lin: %s lease %q for %s: %s", e.Op, e.Job, e.Holder, cur)
	}
	return fmt.Sprintf("lin: %s lease %q for %s with token %d: lease not held: %s", e.Op, e.Job, e.Holder, e.Token, cur)
}

// Is makes errors.Is match ErrLeaseHeld or ErrLeaseLost.
func (e *LeaseError) Is(target error) bool { return target == e.err }

func quoteValue(v []byte) string {
	const max = 64
	if len(v) > max {
		return fmt.Sprintf("%q… (%d bytes)", v[:max], len(v))
	}
	return fmt.Sprintf("%q", v)
}
