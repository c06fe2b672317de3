package storage

import "fmt"

// DiskUsage estimates the bytes the store's files take on disk: in all
// (pebble's own count: tables, blob files, logs) and, per namespace and
// per stream, what pebble's estimate of a key range says. The parts leave
// out what is only in memtables and the write-ahead log, so they add up to
// less than the total.
type DiskUsage struct {
	Total      uint64
	Namespaces map[string]uint64
	Streams    map[[2]string]uint64 // (origin, stream) -> log bytes
}

// EstimateUsage estimates the disk use of every namespace in namespaces
// and of every stream the store holds.
func (s *Store) EstimateUsage(namespaces []string) (DiskUsage, error) {
	if !s.enter() {
		return DiskUsage{}, ErrClosed
	}
	defer s.ops.Done()
	u := DiskUsage{Total: s.db.Metrics().DiskSpaceUsage(), Namespaces: map[string]uint64{}, Streams: map[[2]string]uint64{}}
	for _, ns := range namespaces {
		if err := checkName("namespace", ns); err != nil {
			return u, err
		}
		p := appPrefix(ns)
		n, err := s.db.EstimateDiskUsage(p, PrefixEnd(p))
		if err != nil {
			return u, fmt.Errorf("storage: estimate namespace %s: %w", ns, err)
		}
		u.Namespaces[ns] = n
	}
	for _, si := range s.Streams() {
		p := streamPrefix(prefixMsg, si.Origin, si.Stream)
		n, err := s.db.EstimateDiskUsage(p, PrefixEnd(p))
		if err != nil {
			return u, fmt.Errorf("storage: estimate stream %s/%s: %w", si.Origin, si.Stream, err)
		}
		u.Streams[[2]string{si.Origin, si.Stream}] = n
	}
	return u, nil
}
