package storage

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// Checkpoint writes a consistent, read-only copy of application namespaces
// into dir, which must not exist: pebble's checkpoint, which hard-links the
// store's files where it can, restricted to the namespaces' key spaces so
// that a checkpoint of a small namespace does not pin the whole log. What a
// namespace held and what the same batch recorded beside it (an
// application's positions, in another namespace) are seen together, as of
// one instant. A checkpoint survives restarts of the process; remove it
// with os.RemoveAll when done.
func (s *Store) Checkpoint(dir string, namespaces ...string) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.ops.Done()
	spans := make([]pebble.CheckpointSpan, 0, len(namespaces))
	for _, ns := range namespaces {
		if err := checkName("namespace", ns); err != nil {
			return err
		}
		p := appPrefix(ns)
		spans = append(spans, pebble.CheckpointSpan{Start: p, End: PrefixEnd(p)})
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL(), pebble.WithRestrictToSpans(spans)); err != nil {
		return fmt.Errorf("storage: checkpoint into %s: %w", dir, err)
	}
	return nil
}

// Snapshot reads a checkpoint's namespaces. Only the namespaces named to
// Checkpoint are complete in it.
type Snapshot struct {
	db *pebble.DB
}

// OpenSnapshot opens a checkpoint made by Checkpoint, read-only.
func OpenSnapshot(dir string) (*Snapshot, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{hclog.NewNullLogger()}})
	if err != nil {
		return nil, fmt.Errorf("storage: open checkpoint %s: %w", dir, err)
	}
	return &Snapshot{db: db}, nil
}

// Close closes the snapshot.
func (sn *Snapshot) Close() error { return sn.db.Close() }

// AppScan calls fn for each key k of namespace ns with k > after (nil:
// from the first key), in key order, until fn returns false or an error,
// which AppScan returns. key and value are valid only during the call.
func (sn *Snapshot) AppScan(ns string, after []byte, fn func(key, value []byte) (bool, error)) error {
	if err := checkName("namespace", ns); err != nil {
		return err
	}
	p := appPrefix(ns)
	lower := p
	if after != nil {
		lower = appKey(ns, after)
	}
	it, err := sn.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: PrefixEnd(p)})
	if err != nil {
		return fmt.Errorf("storage: scan checkpoint: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(p):]
		if after != nil && bytes.Equal(k, after) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("storage: scan checkpoint: %w", err), it.Close())
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return errors.Join(err, it.Close())
		}
	}
	return it.Close()
}

// AppGet returns a copy of the value of key in namespace ns, or an error
// wrapping ErrNotFound.
func (sn *Snapshot) AppGet(ns string, key []byte) ([]byte, error) {
	if err := checkName("namespace", ns); err != nil {
		return nil, err
	}
	v, closer, err := sn.db.Get(appKey(ns, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("storage: checkpoint get %s %q: %w", ns, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: checkpoint get %s %q: %w", ns, key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}
