package storage

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// AppScanKeys is AppScanSkip without the values: fn sees each key of
// namespace ns with start <= k < end, in key order, and may skip ahead the
// same way. The iterator never asks for a value, and pebble loads values
// lazily: a value stored beside its key (in the same block) costs nothing
// more, a large one separated into a blob file, or an older version's in a
// value block, is never read. So a scan of the keys of a namespace of
// large values reads about as much as the keys.
func (s *Store) AppScanKeys(ns string, start, end []byte, fn func(key []byte) (next []byte, err error)) error {
	_, err := s.appScanKeys(ns, start, end, fn)
	return err
}

// appScanKeys is AppScanKeys that also returns the iterator's statistics
// (what the tests check that no value was fetched with).
func (s *Store) appScanKeys(ns string, start, end []byte, fn func(key []byte) ([]byte, error)) (pebble.IteratorStats, error) {
	if err := checkName("namespace", ns); err != nil {
		return pebble.IteratorStats{}, err
	}
	p := appPrefix(ns)
	upper := PrefixEnd(p)
	if end != nil {
		upper = appKey(ns, end)
	}
	if !s.enter() {
		return pebble.IteratorStats{}, ErrClosed
	}
	defer s.ops.Done()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appKey(ns, start), UpperBound: upper})
	if err != nil {
		return pebble.IteratorStats{}, fmt.Errorf("storage: scan keys: %w", err)
	}
	for ok := it.First(); ok; {
		k := it.Key()
		next, err := fn(k[len(p):])
		if err != nil {
			// The caller's error as is, as scanSkip does.
			stats := it.Stats()
			_ = it.Close()
			return stats, err
		}
		if next != nil {
			if next = appKey(ns, next); bytes.Compare(next, k) > 0 {
				ok = it.SeekGE(next)
				continue
			}
		}
		ok = it.Next()
	}
	stats := it.Stats()
	if err := it.Close(); err != nil {
		return stats, fmt.Errorf("storage: scan keys: %w", err)
	}
	return stats, nil
}
