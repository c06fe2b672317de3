package stabilizer

import (
	"context"
	"fmt"
	"strconv"
)

// Striped bulk transfers: one logical bulk stream spread over stripes, one
// per peer of the site, each routed through a different peer (core's
// Routes): the origin sends stripe i to its i-th peer only, which relays it
// to the others as it persists it. So every link into a receiver carries
// part of a transfer, from the origin and from the other receivers, and
// each byte still reaches each site once.

// stripeNames returns the names of the stripes of name: name itself, then
// name/1 … name/(k-1), k being the number of the site's peers (at least
// one stripe).
func stripeNames(name string, sites int) []string {
	k := max(1, sites-1)
	out := make([]string, k)
	out[0] = name
	for i := 1; i < k; i++ {
		out[i] = name + "/" + strconv.Itoa(i)
	}
	return out
}

// HandleStriped registers app for the bulk transfer name, spread over
// stripes: bulk streams (HandleBulk) named name, name/1, …, one per peer
// of this site, stripe i routed through the i-th peer. app receives the
// entries of every stripe, each stripe in order. It returns the stripes'
// names; AppendStriped spreads appends over them. Every site must register
// the same striped transfers. Call before Start.
func (n *Node) HandleStriped(name string, app Applier) ([]string, error) {
	names := stripeNames(name, len(n.cfg.Schema.Sites))
	for i, s := range names {
		if err := n.HandleBulk(s, app); err != nil {
			return nil, err
		}
		n.mu.Lock()
		n.mu.stripes[s] = i
		n.mu.Unlock()
	}
	n.mu.Lock()
	n.mu.striped[name] = names
	n.mu.Unlock()
	return names, nil
}

// AppendStriped appends payloads to the stripes of the striped transfer
// name (HandleStriped), each to the stripe that has been given the fewest
// bytes at this site so far, so that every route carries its share; the
// whole call costs one round trip to the node's loop. It returns where
// each went, in order. Like AppendBatch, either every payload is appended
// or, on error, none; the caller must not change them afterwards.
func (n *Node) AppendStriped(ctx context.Context, name string, payloads [][]byte) ([]Appended, error) {
	n.mu.Lock()
	names := n.mu.striped[name]
	n.mu.Unlock()
	if len(names) == 0 {
		return nil, fmt.Errorf("stabilizer: append to %q: %w: not a striped transfer (HandleStriped)", name, ErrUnknownStream)
	}
	if len(payloads) == 0 {
		return nil, nil
	}
	if err := n.disk.admit(len(payloads)); err != nil {
		return nil, fmt.Errorf("stabilizer: append to %q: %w", name, err)
	}
	out := make([]Appended, len(payloads))
	err := n.appendWait(ctx, func() error {
		// The loop owns stripeBytes; a failed append (only the first can
		// fail: joining, lost entries) leaves it as it was.
		given := append([]int64(nil), n.stripeBytes(name, len(names))...)
		for i, p := range payloads {
			j := 0
			for k := range given {
				if given[k] < given[j] {
					j = k
				}
			}
			seq, h, err := n.core.Append(names[j], p)
			if err != nil {
				return err
			}
			given[j] += int64(len(p))
			out[i] = Appended{Stream: StreamID{Origin: n.cfg.Site, Name: names[j]}, Seq: seq, HLC: h}
		}
		copy(n.stripeBytes(name, len(names)), given)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stabilizer: append to %q: %w", name, err)
	}
	n.m.appends.Add(float64(len(out)))
	return out, nil
}

// stripeBytes returns the bytes given to each stripe of name at this site
// since Start; only the loop touches it.
func (n *Node) stripeBytes(name string, k int) []int64 {
	if n.given == nil {
		n.given = map[string][]int64{}
	}
	b, ok := n.given[name]
	if !ok {
		b = make([]int64, k)
		n.given[name] = b
	}
	return b
}
