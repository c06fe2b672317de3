package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

// namespace is the kv's key space in the site's store.
const namespace = "kv"

// Key prefixes inside the namespace.
const (
	prefixLatest  = 'l' // key -> the winning version
	prefixHistory = 'h' // len(key) key ^hlc origin -> every version, newest first
	prefixApplied = 'a' // origin -> the last seq of origin's kv stream applied
)

var errStop = errors.New("stop")

// state is the kv's materialized state in the site's pebble: the winning
// version of each key, every version for snapshot reads, and how far each
// origin's stream has been applied, all written in one durable batch so a
// crash never leaves the position ahead of the data.
type state struct {
	st *storage.Store
}

func latestKey(key string) []byte { return append([]byte{prefixLatest}, key...) }

func historyPrefix(key string) []byte {
	b := binary.AppendUvarint([]byte{prefixHistory}, uint64(len(key)))
	return append(b, key...)
}

// historyKey orders a key's versions newest first: the HLC is stored
// inverted, with the sign of the wall clock flipped so that it sorts as
// unsigned.
func historyKey(key string, h core.HLC, origin string) []byte {
	b := historyPrefix(key)
	b = binary.BigEndian.AppendUint64(b, ^(uint64(h.Wall) ^ 1<<63))
	b = binary.BigEndian.AppendUint32(b, ^h.Logical)
	return append(b, origin...)
}

func appliedKey(origin string) []byte { return append([]byte{prefixApplied}, origin...) }

// apply writes the versions of one origin's entries, in seq order, and the
// new applied position, durably. The latest version of each key is a
// keep-greatest register ordered by (HLC, origin), so applying never reads:
// the store keeps whichever version is newest. Only when watch is set does
// apply read the current versions, to return the ones that became the
// latest of their key (the ones watchers see).
func (s *state) apply(ctx context.Context, origin string, entries []core.Entry, watch bool) ([]Version, error) {
	var b storage.Batch
	won := map[string]*Version{}
	var changed []Version
	for i := range entries {
		v, err := versionFromEntry(&entries[i])
		if err != nil {
			return nil, err
		}
		b.AppSet(namespace, historyKey(v.Key, v.HLC, v.Origin), encodeVersion(&v))
		cur, ok := won[v.Key]
		if !ok && watch {
			stored, found, err := s.latest(v.Key)
			if err != nil {
				return nil, err
			}
			if found {
				cur = &stored
			}
		}
		if cur == nil || v.Newer(cur) {
			won[v.Key] = &v
			if watch {
				changed = append(changed, v)
			}
		}
	}
	for key, v := range won {
		b.AppKeepGreatest(namespace, latestKey(key), encodeLatest(v))
	}
	last := entries[len(entries)-1].Seq
	b.AppSet(namespace, appliedKey(origin), binary.BigEndian.AppendUint64(nil, last))
	// No fsync of its own: the state is rebuilt from the log, which is
	// durable before delivery, from the applied position stored in the same
	// batch. And the node acks "applied" only in a later synced write, which
	// makes this batch durable too (pebble's WAL is one sequence).
	if err := s.st.WriteNoSync(&b); err != nil {
		return nil, fmt.Errorf("kv: apply %s up to seq %d: %w", origin, last, err)
	}
	return changed, nil
}

// encodeLatest orders a key's versions as Version.Newer does: by HLC (the
// wall clock's sign flipped so that it sorts as unsigned), then by origin.
func encodeLatest(v *Version) []byte {
	order := make([]byte, 0, 12+len(v.Origin))
	order = binary.BigEndian.AppendUint64(order, uint64(v.HLC.Wall)^1<<63)
	order = binary.BigEndian.AppendUint32(order, v.HLC.Logical)
	order = append(order, v.Origin...)
	return storage.GreatestValue(order, encodeVersion(v))
}

func decodeLatest(key string, b []byte) (Version, error) {
	_, enc, err := storage.SplitGreatest(b)
	if err != nil {
		return Version{}, fmt.Errorf("kv: corrupt latest version of %q: %w", key, err)
	}
	return decodeVersion(key, enc)
}

// latest returns the winning version of key.
func (s *state) latest(key string) (Version, bool, error) {
	b, err := s.st.AppGet(namespace, latestKey(key))
	if errors.Is(err, storage.ErrNotFound) {
		return Version{}, false, nil
	}
	if err != nil {
		return Version{}, false, err
	}
	v, err := decodeLatest(key, b)
	return v, err == nil, err
}

// at returns the version of key a snapshot at time t sees: the winner among
// the versions with an HLC at or below t.
func (s *state) at(key string, t core.HLC) (Version, bool, error) {
	prefix := historyPrefix(key)
	start := historyKey(key, t, "")
	end := append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	var best Version
	found := false
	err := s.st.AppScan(namespace, start, end, func(k, val []byte) error {
		v, err := decodeVersion(key, val)
		if err != nil {
			return err
		}
		if found && v.HLC != best.HLC {
			return errStop // versions come newest first: the winner is known
		}
		if !found || v.Newer(&best) {
			best, found = v, true
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Version{}, false, err
	}
	return best, found, nil
}

// scan calls fn for the winning version of each key with the prefix, in key
// order, up to limit keys (0: no limit), deleted keys skipped.
func (s *state) scan(prefix string, limit int, fn func(Version) error) error {
	n := 0
	err := s.st.AppScanPrefix(namespace, latestKey(prefix), func(k, val []byte) error {
		v, err := decodeLatest(string(k[1:]), val)
		if err != nil {
			return err
		}
		if v.Deleted {
			return nil
		}
		if err := fn(v); err != nil {
			return err
		}
		if n++; limit > 0 && n >= limit {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// appliedPositions returns how far each origin's kv stream was applied.
func (s *state) appliedPositions() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.st.AppScanPrefix(namespace, []byte{prefixApplied}, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("kv: corrupt applied position of %q", k[1:])
		}
		out[string(k[1:])] = binary.BigEndian.Uint64(v)
		return nil
	})
	return out, err
}

// history calls fn for every version of key, newest first, until fn
// returns false.
func (s *state) history(key string, fn func(Version) (bool, error)) error {
	prefix := historyPrefix(key)
	err := s.st.AppScanPrefix(namespace, prefix, func(k, val []byte) error {
		v, err := decodeVersion(key, val)
		if err != nil {
			return err
		}
		more, err := fn(v)
		if err != nil {
			return err
		}
		if !more {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
