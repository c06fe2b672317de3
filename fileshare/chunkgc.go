package fileshare

import (
	"context"
	"fmt"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// located is a chunk and where the site holds it.
type located struct {
	h [32]byte
	r Ref
}

// pinnedNow returns the chunks commits in progress name.
func (c *chunkStore) pinnedNow() map[[32]byte]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[[32]byte]bool, len(c.mu.pinned))
	for h := range c.mu.pinned {
		out[h] = true
	}
	return out
}

// locations returns every chunk the site locates.
func (c *chunkStore) locations() (map[[32]byte]Ref, error) {
	out := map[[32]byte]Ref{}
	err := c.ns.ScanPrefix([]byte{prefixLoc}, func(k, v []byte) error {
		if len(k) != 33 {
			return fmt.Errorf("fileshare: corrupt chunk location key %x", k)
		}
		r, err := decodeRef(v)
		if err != nil {
			return err
		}
		out[[32]byte(k[1:])] = r
		return nil
	})
	return out, err
}

// condemn takes the chunks a collection found dead (no retained version
// names them) at now and returns those dead for grace already: dead at
// every collection since, with no sign of life between (cand). The others
// wait; a chunk not among dead (live again, or gone) is forgotten.
func (c *chunkStore) condemn(dead []located, now time.Time, grace time.Duration) []located {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[[32]byte]time.Time, len(dead))
	var out []located
	for _, d := range dead {
		if c.mu.pinned[d.h] > 0 {
			continue
		}
		t, ok := c.mu.cand[d.h]
		if !ok {
			t = now
		}
		next[d.h] = t
		if now.Sub(t) >= grace {
			out = append(out, d)
		}
	}
	c.mu.cand = next
	return out
}

// dropBatch bounds the locations one commit of drop deletes, and so how
// long it holds writeMu.
const dropBatch = 1024

// drop deletes the locations of chunks condemn returned, unless they showed
// a sign of life since or their location changed (an entry of them was
// applied). While it deletes one, lookups say it is not held, so that no
// commit names it and an upload stores it again. It returns the chunks it
// dropped.
func (c *chunkStore) drop(ds []located) ([][32]byte, error) {
	var out [][32]byte
	for len(ds) > 0 {
		n := min(len(ds), dropBatch)
		done, err := c.dropSome(ds[:n])
		out = append(out, done...)
		if err != nil {
			return out, err
		}
		ds = ds[n:]
	}
	return out, nil
}

func (c *chunkStore) dropSome(ds []located) ([][32]byte, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	var take []located
	for _, d := range ds {
		if _, ok := c.mu.cand[d.h]; ok && c.mu.pinned[d.h] == 0 {
			c.mu.dying[d.h] = true
			take = append(take, d)
		}
	}
	c.mu.Unlock()
	var done [][32]byte
	var err error
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, d := range take {
			delete(c.mu.dying, d.h)
		}
		if err != nil {
			return
		}
		for _, h := range done {
			delete(c.mu.cand, h)
			if !c.mu.gone[h] {
				c.mu.gone[h] = true
				c.mu.goneLog = append(c.mu.goneLog, h)
			}
		}
		for len(c.mu.goneLog) > maxGone {
			delete(c.mu.gone, c.mu.goneLog[0])
			c.mu.goneLog = c.mu.goneLog[1:]
		}
	}()
	b := c.ns.NewBatch()
	for _, d := range take {
		var v []byte
		if v, err = c.get(locKey(d.h)); err != nil {
			return nil, err
		}
		if r, derr := decodeRef(v); v == nil || derr != nil || r != d.r {
			continue
		}
		b.Delete(locKey(d.h))
		done = append(done, d.h)
	}
	if b.Empty() {
		return nil, nil
	}
	// Unsynced: ordered before the truncation that follows, it is durable
	// when the truncation is (the site's log is one sequence).
	if err = b.CommitNoSync(); err != nil {
		return nil, err
	}
	return done, nil
}

// ungone forgets that the collector dropped a chunk: it is wanted again.
func (c *chunkStore) ungone(h [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.gone, h)
}

func (c *chunkStore) setFloor(id stabilizer.StreamID, f uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.floors[id] = max(c.mu.floors[id], f)
}

// entries returns the index of one files stream from floor+1 to upto.
func (c *chunkStore) entries(id stabilizer.StreamID, floor, upto uint64) ([]entryMeta, error) {
	var out []entryMeta
	if upto <= floor {
		return nil, nil
	}
	err := c.ns.Scan(entryKey(id, floor+1), entryKey(id, upto+1), func(k, v []byte) error {
		_, seq, ok := decodeEntryKey(k)
		if !ok {
			return fmt.Errorf("%w: key %x", errCorruptEntryMeta, k)
		}
		m, err := decodeEntryMeta(seq, v)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// read returns the bytes of chunk h from entry seq of stream id.
func (c *chunkStore) read(ctx context.Context, id stabilizer.StreamID, seq uint64, h [32]byte) ([]byte, error) {
	e, err := c.node.ReadEntry(ctx, id, seq)
	if err != nil {
		return nil, err
	}
	got, data, _, ok := parseEntry(e.Payload)
	if !ok || got != h {
		return nil, fmt.Errorf("fileshare: entry %s seq %d does not hold chunk %x", id, seq, h[:8])
	}
	return data, nil
}

// sweepIndex deletes the index of the entries truncated below the files
// streams' floors and returns their bytes per stream, and the bytes of
// those the logs still hold.
func (c *chunkStore) sweepIndex(streams map[stabilizer.StreamID]streamPos) (map[stabilizer.StreamID]int64, int64, error) {
	reclaimed := map[stabilizer.StreamID]int64{}
	var held int64
	err := c.ns.ScanPrefix([]byte{prefixEntry}, func(k, v []byte) error {
		id, seq, ok := decodeEntryKey(k)
		if !ok {
			return fmt.Errorf("%w: key %x", errCorruptEntryMeta, k)
		}
		m, err := decodeEntryMeta(seq, v)
		if err != nil {
			return err
		}
		if seq <= streams[id].floor {
			reclaimed[id] += int64(m.Size)
		} else {
			held += int64(m.Size)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	b := c.ns.NewBatch()
	for id := range reclaimed {
		b.DeleteRange(entryPrefix(id), entryKey(id, streams[id].floor+1))
	}
	if b.Empty() {
		return reclaimed, held, nil
	}
	return reclaimed, held, b.CommitNoSync()
}
