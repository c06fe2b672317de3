package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// namespace is the kv's key space in the site's store.
const namespace = "kv"

// Keys inside the namespace. How far each origin's stream was applied is
// the node's to keep (Batch.SetApplied); releases before namespaces kept it
// here, under prefixApplied, which open moves to the node.
const (
	prefixVersion = 'v' // escaped key, 0x00 0x01, ^hlc, origin -> every version, newest first
	prefixApplied = 'a' // origin -> the last seq of origin's kv stream applied (earlier releases)
	prefixPruned  = 'p' // escaped key, 0x00 0x01 -> the key's pruning marker (retention.go)
	keyFormat     = 'f' // -> the layout version below
)

// formatVersion is the layout of the keys above. Version 1 also kept each
// key's winning version under its own key; version 2 derives it from the
// versions, so that a write stores its value once besides the log.
const formatVersion = 2

var errStop = errors.New("stop")

// state is the kv's materialized state in the site's pebble: every version
// of every key, ordered so that a key's first version is the one that wins,
// and how far each origin's stream has been applied, written in one batch so
// a crash never leaves the position ahead of the data.
type state struct {
	ns *stabilizer.Namespace
}

// open checks that the namespace holds this layout, or nothing yet.
func (s *state) open(ctx context.Context) error {
	b, err := s.ns.Get([]byte{keyFormat})
	if err == nil {
		if len(b) != 1 || b[0] != formatVersion {
			return fmt.Errorf("kv: the store's kv state has layout %v; this version reads layout %d", b, formatVersion)
		}
		return s.movePositions(ctx)
	}
	if !errors.Is(err, stabilizer.ErrNotFound) {
		return fmt.Errorf("kv: read the state's layout: %w", err)
	}
	empty := true
	err = s.ns.Scan(nil, nil, func(_, _ []byte) error { empty = false; return errStop })
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("kv: read the state's layout: %w", err)
	}
	if !empty {
		return fmt.Errorf("kv: the store holds kv state in layout 1, which this version does not read: " +
			"move the site's data directory aside and let the site catch up from its peers")
	}
	return s.ns.Set(ctx, []byte{keyFormat}, []byte{formatVersion})
}

// movePositions hands the applied positions that earlier releases kept in
// the namespace to the node, in one batch that also deletes them.
func (s *state) movePositions(ctx context.Context) error {
	b := s.ns.NewBatch()
	err := s.ns.ScanPrefix([]byte{prefixApplied}, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("kv: corrupt applied position of %q", k[1:])
		}
		b.SetApplied(stabilizer.StreamID{Origin: string(k[1:]), Name: Stream}, binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil || b.Empty() {
		return err
	}
	b.DeleteRange([]byte{prefixApplied}, []byte{prefixApplied + 1})
	if err := b.Commit(ctx); err != nil {
		return fmt.Errorf("kv: move the applied positions to the node: %w", err)
	}
	return nil
}

// versionPrefix is the common prefix of key's versions. The key is escaped
// (0x00 becomes 0x00 0xff) and ends with 0x00 0x01, so that versions sort by
// key first, and the keys with a given prefix are one range.
func versionPrefix(key string) []byte {
	return appendVersionPrefix(make([]byte, 0, len(key)+3), key)
}

func appendVersionPrefix[K string | []byte](b []byte, key K) []byte {
	b = append(b, prefixVersion)
	return append(escapeKey(b, key), 0, 1)
}

func escapeKey[K string | []byte](b []byte, key K) []byte {
	for i := 0; i < len(key); i++ {
		b = append(b, key[i])
		if key[i] == 0 {
			b = append(b, 0xff)
		}
	}
	return b
}

// splitVersionKey returns the key of a version's storage key and the
// length of its versionPrefix.
func splitVersionKey(k []byte) (key string, prefixLen int, ok bool) {
	if len(k) == 0 || k[0] != prefixVersion {
		return "", 0, false
	}
	var b []byte
	for i := 1; i+1 < len(k); i++ {
		if k[i] != 0 {
			b = append(b, k[i])
			continue
		}
		switch k[i+1] {
		case 1:
			return string(b), i + 2, true
		case 0xff:
			b = append(b, 0)
			i++
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

// appendVersionKey appends the storage key of a version to b. A key's
// versions sort newest first: the HLC is stored inverted, with the sign of
// the wall clock flipped so that it sorts as unsigned. Versions with equal
// HLCs follow in origin order; the greatest origin wins among them
// (Version.Newer), so readers look at all of them.
func appendVersionKey[K string | []byte](b []byte, key K, h stabilizer.HLC, origin string) []byte {
	return append(appendInvertedHLC(appendVersionPrefix(b, key), h), origin...)
}

func appendInvertedHLC(b []byte, h stabilizer.HLC) []byte {
	b = binary.BigEndian.AppendUint64(b, ^(uint64(h.Wall) ^ 1<<63))
	return binary.BigEndian.AppendUint32(b, ^h.Logical)
}

// apply writes the versions of one origin's entries and the new applied
// position. It reads nothing, since the order of a key's versions decides
// which one wins, unless watch is set: then it reads the current versions to
// return the ones that became the latest of their key (what watchers see).
func (s *state) apply(origin string, entries []stabilizer.Entry, watch bool) ([]Version, error) {
	b := s.ns.NewBatch()
	won := map[string]*Version{}
	var changed []Version
	// The batch copies each key, so one buffer serves them all; the values
	// share one array, sized so that it does not grow.
	var key []byte
	size := 0
	for i := range entries {
		size += versionOverhead + len(origin) + len(entries[i].Payload)
	}
	values := make([]byte, 0, size)
	for i := range entries {
		v, k, err := versionFromEntry(&entries[i])
		if err != nil {
			return nil, err
		}
		key = appendVersionKey(key[:0], k, v.HLC, v.Origin)
		start := len(values)
		values = appendVersion(values, &v)
		b.Set(key, values[start:len(values):len(values)])
		if watch {
			v.Key = string(k)
			if changed, err = s.winning(changed, won, v); err != nil {
				return nil, err
			}
		}
	}
	last := entries[len(entries)-1].Seq
	b.SetApplied(entries[0].Stream, last)
	// No fsync of its own: the state is rebuilt from the log, which is
	// durable before delivery, from the applied position stored in the same
	// batch. And the node acks "applied" only in a later synced write, which
	// makes this batch durable too (CommitNoSync).
	if err := b.CommitNoSync(); err != nil {
		return nil, fmt.Errorf("kv: apply %s up to seq %d: %w", origin, last, err)
	}
	return changed, nil
}

// winning appends v to changed if it wins over the key's current version,
// counting the versions of this batch that won before it.
func (s *state) winning(changed []Version, won map[string]*Version, v Version) ([]Version, error) {
	cur, ok := won[v.Key]
	if !ok {
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
		changed = append(changed, v)
	}
	return changed, nil
}

// latest returns the winning version of key.
func (s *state) latest(key string) (Version, bool, error) {
	p := versionPrefix(key)
	return s.winner(key, p, stabilizer.PrefixEnd(p))
}

// at returns the version of key a snapshot at time t sees: the winner among
// the versions with an HLC at or below t.
func (s *state) at(key string, t stabilizer.HLC) (Version, bool, error) {
	p := versionPrefix(key)
	v, found, err := s.winner(key, appendInvertedHLC(p, t), stabilizer.PrefixEnd(p))
	if err == nil && !found {
		// After the versions: a prune between the two is seen by the
		// marker, which only moves forward.
		err = s.prunedAt(key, t)
	}
	return v, found, err
}

// winner returns the newest version of key in [start, end), which holds
// versions of key only: the first, or the greatest origin among the first
// ones if their HLCs are equal.
func (s *state) winner(key string, start, end []byte) (Version, bool, error) {
	var best Version
	found := false
	err := s.ns.Scan(start, end, func(_, val []byte) error {
		v, err := decodeVersion(key, val)
		if err != nil {
			return err
		}
		if found && v.HLC != best.HLC {
			return errStop
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
// order, up to limit keys (0: no limit). A deleted key's winner is its
// delete, passed on too: a caller merging older versions from elsewhere
// (Store.Scan's pending writes) must know the key was deleted after them.
// It reads the first versions of each key and skips the older ones.
func (s *state) scan(prefix string, limit int, fn func(Version) error) error {
	start := escapeKey([]byte{prefixVersion}, prefix)
	n := 0
	var cur Version
	have := false
	emit := func() error {
		if !have {
			return nil
		}
		if err := fn(cur); err != nil {
			return err
		}
		if n++; limit > 0 && n >= limit {
			return errStop
		}
		return nil
	}
	err := s.ns.ScanSkip(start, stabilizer.PrefixEnd(start), func(k, val []byte) ([]byte, error) {
		key, plen, ok := splitVersionKey(k)
		if !ok {
			return nil, fmt.Errorf("kv: corrupt version key %q", k)
		}
		v, err := decodeVersion(key, val)
		if err != nil {
			return nil, err
		}
		switch {
		case have && key == cur.Key && v.HLC == cur.HLC:
			if v.Newer(&cur) {
				cur = v
			}
			return nil, nil
		case have && key == cur.Key:
			return stabilizer.PrefixEnd(k[:plen]), nil // older versions
		}
		if err := emit(); err != nil {
			return nil, err
		}
		cur, have = v, true
		return nil, nil
	})
	if err == nil {
		err = emit()
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// history calls fn for every version of key, newest first, until fn
// returns false.
func (s *state) history(key string, fn func(Version) (bool, error)) error {
	err := s.ns.ScanPrefix(versionPrefix(key), func(k, val []byte) error {
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
