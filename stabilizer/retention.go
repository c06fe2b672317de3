package stabilizer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// TruncateOptions qualify a Truncate.
type TruncateOptions struct {
	// BeyondPeers lets the truncation take entries some peer has not
	// persisted yet. That peer is told, and catches up from a snapshot of
	// the application's state instead of the log: allowed only for
	// streams whose application's state can be transferred
	// (EnableStateTransfer).
	BeyondPeers bool
}

// Truncate drops the prefix of stream id up to upto from this site's log,
// as the stream's retention policy decides: never past what the local
// application applied, nor, unless opts.BeyondPeers, past what every other
// site persisted. It returns the stream's truncation point afterwards
// (everything at or below it is gone from this site's log); the deletion
// is a range deletion, made durable with the node's next write. A
// truncation beyond what the application applied is cut to it, not
// refused: policies may ask for more than can be had yet.
func (n *Node) Truncate(ctx context.Context, id StreamID, upto uint64, opts TruncateOptions) (uint64, error) {
	if opts.BeyondPeers && !n.transfers(id.Name) {
		return 0, fmt.Errorf("stabilizer: truncate %s beyond peers: its application's state cannot be transferred "+
			"(EnableStateTransfer), so a peer that lacks the entries could never catch up", id)
	}
	var floor uint64
	var err error
	if derr := n.do(ctx, func() { floor, err = n.core.Truncate(id, upto, opts.BeyondPeers) }); derr != nil {
		return 0, fmt.Errorf("stabilizer: truncate %s: %w", id, derr)
	}
	if err != nil {
		return 0, fmt.Errorf("stabilizer: %w", err)
	}
	return floor, nil
}

// transfers reports whether the streams named name have state transfer.
func (n *Node) transfers(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.mu.transfer[name]
	return ok
}

// checkJoin ends a fresh site's wait for its peers at Config.JoinTimeout;
// it runs on the loop.
func (n *Node) checkJoin(now time.Time) {
	if n.joinBy.IsZero() || !n.core.Joining() || now.Before(n.joinBy) {
		return
	}
	n.joinBy = time.Time{}
	var unheard []string
	for peer, up := range n.Connected() {
		if !up {
			unheard = append(unheard, peer)
		}
	}
	slices.Sort(unheard)
	n.log.Warn("a site that started with an empty store appends without having heard every peer: "+
		"if its store was wiped while one of them held entries of its streams, their seqs are given out again",
		"not_connected", unheard, "waited", n.cfg.JoinTimeout)
	n.core.Join()
}

// appendWait runs an append on the loop and, while the site is joining or
// has lost entries of its own streams (a wiped store, being restored),
// tries again until it can or ctx ends.
func (n *Node) appendWait(ctx context.Context, f func() error) error {
	for {
		var err error
		if derr := n.do(ctx, func() { err = f() }); derr != nil {
			return derr
		}
		if !errors.Is(err, ErrJoining) && !errors.Is(err, ErrLostEntries) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waited until: %w)", err, ctx.Err())
		case <-n.stop:
			return ErrStopped
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// DiskUsage is how much of the site's disk its parts take, as estimated
// by the store (see storage.DiskUsage: the parts leave out what is only in
// memory and the write-ahead log), plus the bulk streams' segments.
type DiskUsage struct {
	Total uint64
	// Namespaces: per application namespace (and the library's own,
	// "stabilizer").
	Namespaces map[string]uint64
	// Logs: per stream, the bytes of its retained messages.
	Logs map[StreamID]uint64
}

// DiskUsage estimates the disk use of the site's store, per application
// and per stream.
func (n *Node) DiskUsage() (DiskUsage, error) {
	n.mu.Lock()
	names := []string{nodeNS}
	for ns := range n.mu.namespaces {
		names = append(names, ns)
	}
	n.mu.Unlock()
	slices.Sort(names)
	u, err := n.store.EstimateUsage(names)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("stabilizer: disk usage: %w", err)
	}
	out := DiskUsage{Total: u.Total, Namespaces: u.Namespaces, Logs: map[StreamID]uint64{}}
	for k, v := range u.Streams {
		out.Logs[StreamID{Origin: k[0], Name: k[1]}] = v
	}
	for _, si := range n.bulk.seg.Streams() {
		id := StreamID{Origin: si.Origin, Name: si.Stream}
		out.Logs[id] += uint64(si.Bytes)
		out.Total += uint64(si.Bytes)
	}
	return out, nil
}
