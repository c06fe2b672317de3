package lin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Item is a key's value and version. The version is the raft index of the
// key's last write, so it increases with every write of the key, across
// deletes and leader changes.
type Item struct {
	Key     string
	Value   []byte
	Version uint64
}

// Lease is a job's lease as the group last decided it.
type Lease struct {
	Job string
	// Holder is who holds the lease; "" when nobody does.
	Holder string
	// Token is the fencing token: it increases every time the lease passes
	// to a holder, and stays while the same holder renews. Pass it with
	// writes (IfLeaseHeld) so that a deposed holder's writes are refused.
	Token uint64
	// TTL is how long the lease lasts after each grant or renewal.
	TTL time.Duration
	// ValidUntil is set on what Grant and Renew return: the holder may act
	// as the owner until then on the clock of the site it called (measured
	// from before the request was sent, less a margin for clock rate
	// drift), unless it revokes the lease first.
	ValidUntil time.Time
	// Remaining is this site's estimate of the time left before the leader
	// may expire the lease; advisory, for error messages and GetLease.
	Remaining time.Duration
}

type item struct {
	value   []byte
	version uint64
}

type leaseState struct {
	holder string
	token  uint64
	ttl    time.Duration
	rev    uint64 // index of the last grant, renew, revoke or expiry
}

// result is what applying a command produced, handed to the request's
// waiter at the site that proposed it.
type result struct {
	err     error
	version uint64
	lease   Lease
}

// fsm is the replicated state machine: keys and leases. Every site applies
// the same entries in the same order and reaches the same state; deadlines
// alone are local (measured on this site's clock) and not replicated.
type fsm struct {
	kv     map[string]item
	leases map[string]*leaseState
	// deadlines is when this site, as leader, may expire each held lease.
	deadlines map[string]time.Time
}

func newFSM() *fsm {
	return &fsm{kv: map[string]item{}, leases: map[string]*leaseState{}, deadlines: map[string]time.Time{}}
}

func (f *fsm) get(key string) (item, bool) {
	it, ok := f.kv[key]
	return it, ok
}

func (f *fsm) lease(job string, now time.Time) Lease {
	l := f.leases[job]
	if l == nil {
		return Lease{Job: job}
	}
	out := Lease{Job: job, Holder: l.holder, Token: l.token, TTL: l.ttl}
	if d, ok := f.deadlines[job]; ok && l.holder != "" {
		out.Remaining = max(d.Sub(now), 0)
	}
	return out
}

func (f *fsm) check(c Condition, key string) error {
	cur, exists := f.kv[key]
	ok := false
	switch c.kind {
	case condNone:
		return nil
	case condVersion:
		ok = cur.version == c.version
	case condValue:
		ok = exists && bytes.Equal(cur.value, c.value)
	case condLease:
		l := f.leases[c.job]
		ok = l != nil && l.holder != "" && l.token == c.token
	}
	if ok {
		return nil
	}
	return &CompareError{Key: key, Cond: c, Exists: exists, Version: cur.version, Value: bytes.Clone(cur.value)}
}

// apply applies the command of entry index. now is the local clock, used
// only for lease deadlines and advisory fields.
func (f *fsm) apply(index uint64, c command, now time.Time) result {
	switch c.op {
	case opPut, opDelete:
		if err := f.check(c.cond, c.key); err != nil {
			return result{err: err}
		}
		if c.op == opPut {
			f.kv[c.key] = item{value: bytes.Clone(c.value), version: index}
		} else {
			delete(f.kv, c.key)
		}
		return result{version: index}
	case opGrant:
		l := f.leases[c.key]
		if l == nil {
			l = &leaseState{}
			f.leases[c.key] = l
		}
		if l.holder != "" && l.holder != c.holder {
			return result{err: &LeaseError{Op: "grant", Job: c.key, Holder: c.holder, Current: f.lease(c.key, now), err: ErrLeaseHeld}}
		}
		if l.holder == "" {
			l.token++
		}
		l.holder, l.ttl, l.rev = c.holder, c.ttl, index
		f.deadlines[c.key] = now.Add(l.ttl)
		return result{version: index, lease: f.lease(c.key, now)}
	case opRenew, opRevoke:
		l := f.leases[c.key]
		if l == nil || l.holder == "" || l.holder != c.holder || l.token != c.token {
			return result{err: &LeaseError{Op: c.op.String(), Job: c.key, Holder: c.holder, Token: c.token, Current: f.lease(c.key, now), err: ErrLeaseLost}}
		}
		l.rev = index
		if c.op == opRenew {
			f.deadlines[c.key] = now.Add(l.ttl)
		} else {
			l.holder = ""
			delete(f.deadlines, c.key)
		}
		return result{version: index, lease: f.lease(c.key, now)}
	case opExpire:
		// The leader saw revision rev outlive its deadline. Anything that
		// happened to the lease since (a renewal, a new holder) makes the
		// expiry stale.
		if l := f.leases[c.key]; l != nil && l.holder != "" && l.rev == c.rev {
			l.holder, l.rev = "", index
			delete(f.deadlines, c.key)
		}
		return result{version: index}
	}
	return result{err: fmt.Errorf("lin: entry %d: %w", index, errCorrupt)}
}

// refreshDeadlines restarts the clock of every held lease at now: a site
// that becomes leader, or restores a snapshot, cannot know how long ago
// the holder last renewed, so it waits a full TTL from now before it may
// expire the lease.
func (f *fsm) refreshDeadlines(now time.Time) {
	for job, l := range f.leases {
		if l.holder == "" {
			continue
		}
		d := now.Add(l.ttl)
		if old, ok := f.deadlines[job]; !ok || old.Before(d) {
			f.deadlines[job] = d
		}
	}
}

// expired returns the held leases whose deadline passed, with the revision
// that was found expired.
func (f *fsm) expired(now time.Time) map[string]uint64 {
	var out map[string]uint64
	for job, d := range f.deadlines {
		l := f.leases[job]
		if l == nil || l.holder == "" || now.Before(d) {
			continue
		}
		if out == nil {
			out = map[string]uint64{}
		}
		out[job] = l.rev
	}
	return out
}

const snapshotFormat = 1

// encode serializes the replicated state (not the deadlines), keys in order
// so that equal states encode equally.
func (f *fsm) encode() []byte {
	b := []byte{snapshotFormat}
	b = binary.AppendUvarint(b, uint64(len(f.kv)))
	for _, k := range slices.Sorted(maps.Keys(f.kv)) {
		it := f.kv[k]
		b = appendBytes(b, []byte(k))
		b = appendBytes(b, it.value)
		b = binary.AppendUvarint(b, it.version)
	}
	b = binary.AppendUvarint(b, uint64(len(f.leases)))
	for _, j := range slices.Sorted(maps.Keys(f.leases)) {
		l := f.leases[j]
		b = appendBytes(b, []byte(j))
		b = appendBytes(b, []byte(l.holder))
		b = binary.AppendUvarint(b, l.token)
		b = binary.AppendUvarint(b, uint64(l.ttl))
		b = binary.AppendUvarint(b, l.rev)
	}
	return b
}

// decodeFSM restores a state encoded by encode; empty data is the empty
// state. Held leases get deadlines a full TTL after now.
func decodeFSM(data []byte, now time.Time) (*fsm, error) {
	f := newFSM()
	if len(data) == 0 {
		return f, nil
	}
	d := decoder{b: data}
	if v := d.byte(); v != snapshotFormat {
		return nil, fmt.Errorf("lin: snapshot format %d unknown: %w", v, errCorrupt)
	}
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := string(d.bytes())
		v := bytes.Clone(d.bytes())
		f.kv[k] = item{value: v, version: d.uvarint()}
	}
	n = d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		j := string(d.bytes())
		l := &leaseState{holder: string(d.bytes())}
		l.token = d.uvarint()
		l.ttl = time.Duration(d.uvarint())
		l.rev = d.uvarint()
		f.leases[j] = l
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return nil, fmt.Errorf("lin: snapshot: %w", d.err)
	}
	f.refreshDeadlines(now)
	return f, nil
}
