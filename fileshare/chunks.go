package fileshare

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Ref is where a chunk lives: seq Seq of the files stream of Origin.
type Ref struct {
	Origin string
	Seq    uint64
	Size   uint32
}

// prefixLoc + hash keys where the site holds a chunk (encodeRef). The
// chunk's bytes are the payload of that files stream entry, read back from
// the site's log: they are written once per site, not once more into the
// namespace. An entry's payload is the chunk's bytes alone; its hash, the
// chunk's id, is computed from them.
const prefixLoc = 'l'

func locKey(h [32]byte) []byte { return append([]byte{prefixLoc}, h[:]...) }

func encodeRef(r Ref) []byte {
	b := binary.AppendUvarint(nil, uint64(len(r.Origin)))
	b = append(b, r.Origin...)
	b = binary.AppendUvarint(b, r.Seq)
	return binary.AppendUvarint(b, uint64(r.Size))
}

func decodeRef(b []byte) (Ref, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return Ref{}, errors.New("fileshare: corrupt chunk location")
	}
	r := Ref{Origin: string(b[k : k+int(n)])}
	b = b[k+int(n):]
	seq, k := binary.Uvarint(b)
	if k <= 0 {
		return Ref{}, errors.New("fileshare: corrupt chunk location")
	}
	size, k2 := binary.Uvarint(b[k:])
	if k2 <= 0 {
		return Ref{}, errors.New("fileshare: corrupt chunk location")
	}
	r.Seq, r.Size = seq, uint32(size)
	return r, nil
}

// chunkStore holds the site's chunks: it appends uploaded ones to the
// site's files stream and applies every site's stream into the namespace.
type chunkStore struct {
	ns      *stabilizer.Namespace
	node    *stabilizer.Node
	metrics *metrics
	log     hclog.Logger

	mu struct {
		sync.Mutex
		// pending: own chunks appended and not yet applied here; they
		// count as held (Missing, Commit) from their append on.
		pending map[[32]byte]Ref
		// pendingBytes is their size; put waits while it is above
		// MaxPendingBytes, and applied is closed (and replaced) whenever
		// Apply lowers it.
		pendingBytes int64
		applied      chan struct{}
	}
}

// MaxPendingBytes bounds the chunk bytes a site has taken from clients and
// not yet stored (appended, not applied): uploads wait beyond it, so a
// client faster than the site's disk pushes back instead of filling the
// site's memory.
const MaxPendingBytes = 64 << 20

func newChunkStore(ns *stabilizer.Namespace, node *stabilizer.Node, m *metrics, log hclog.Logger) *chunkStore {
	c := &chunkStore{ns: ns, node: node, metrics: m, log: log}
	c.mu.pending = map[[32]byte]Ref{}
	c.mu.applied = make(chan struct{})
	return c
}

// lookup says where the site holds a chunk, if it does.
func (c *chunkStore) lookup(h [32]byte) (Ref, bool, error) {
	c.mu.Lock()
	r, ok := c.mu.pending[h]
	c.mu.Unlock()
	if ok {
		return r, true, nil
	}
	v, err := c.get(locKey(h))
	if err != nil || v == nil {
		return Ref{}, false, err
	}
	r, err = decodeRef(v)
	return r, err == nil, err
}

// needs adds to need, per files stream, the highest seq of v's chunks, a
// chunk without a location (an early commit) located by hash here; false
// when one is not held here yet.
func (c *chunkStore) needs(need map[stabilizer.StreamID]uint64, v *filesharepb.Version) bool {
	located := true
	for _, ch := range v.Chunks {
		r := Ref{Origin: ch.Origin, Seq: ch.Seq}
		if r.Origin == "" {
			var ok bool
			var err error
			if r, ok, err = c.lookup([32]byte(ch.Hash)); err != nil || !ok {
				located = false
				continue
			}
		}
		id := stabilizer.StreamID{Origin: r.Origin, Name: Stream}
		need[id] = max(need[id], r.Seq)
	}
	return located
}

// data returns the chunk's bytes if they are stored here (applied), nil if
// not yet.
func (c *chunkStore) data(ctx context.Context, h [32]byte) ([]byte, error) {
	v, err := c.get(locKey(h))
	if err != nil || v == nil {
		return nil, err
	}
	r, err := decodeRef(v)
	if err != nil {
		return nil, err
	}
	e, err := c.node.ReadEntry(ctx, stabilizer.StreamID{Origin: r.Origin, Name: Stream}, r.Seq)
	if errors.Is(err, stabilizer.ErrNotFound) {
		return nil, nil // appended here, not yet durable
	}
	if err != nil {
		return nil, err
	}
	return e.Payload, nil
}

// get reads a key; nil, nil when it is absent.
func (c *chunkStore) get(key []byte) ([]byte, error) {
	v, err := c.ns.Get(key)
	if errors.Is(err, stabilizer.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// put stores a chunk uploaded by a client: checked against its hash, then
// appended to the site's files stream, unless the site holds it already.
func (c *chunkStore) put(ctx context.Context, h [32]byte, data []byte) (Ref, bool, error) {
	if len(data) == 0 || len(data) > MaxChunkBytes {
		return Ref{}, false, fmt.Errorf("%w %x: %d bytes, want 1 to %d", ErrBadChunk, h[:8], len(data), MaxChunkBytes)
	}
	if sha256.Sum256(data) != h {
		return Ref{}, false, fmt.Errorf("%w %x: the data's SHA-256 is %x", ErrBadChunk, h[:8], sha256.Sum256(data))
	}
	if r, ok, err := c.lookup(h); err != nil || ok {
		return r, ok, err
	}
	if err := c.reserve(ctx, len(data)); err != nil {
		return Ref{}, false, fmt.Errorf("fileshare: store chunk %x: %w", h[:8], err)
	}
	a, err := c.node.Append(ctx, Stream, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.mu.pendingBytes -= int64(len(data))
		return Ref{}, false, fmt.Errorf("fileshare: store chunk %x: %w", h[:8], err)
	}
	r := Ref{Origin: a.Stream.Origin, Seq: a.Seq, Size: uint32(len(data))}
	if old, dup := c.mu.pending[h]; dup { // a concurrent upload of the same bytes
		c.mu.pendingBytes -= int64(old.Size)
	}
	c.mu.pending[h] = r
	return r, false, nil
}

// reserve waits until n more pending bytes fit under MaxPendingBytes (one
// chunk always fits when nothing is pending) and counts them.
func (c *chunkStore) reserve(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if c.mu.pendingBytes == 0 || c.mu.pendingBytes+int64(n) <= MaxPendingBytes {
			c.mu.pendingBytes += int64(n)
			c.mu.Unlock()
			return nil
		}
		wake := c.mu.applied
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Apply stores a run of one files stream's chunks with the stream's
// position, in one batch. A chunk the site holds already (another site
// sent the same bytes) is not stored twice; a frame that does not check
// out against its hash is skipped and counted, never stored.
func (c *chunkStore) Apply(ctx context.Context, entries []stabilizer.Entry) error {
	id := entries[0].Stream
	batch := c.ns.NewBatch()
	seen := map[[32]byte]bool{}
	own := id.Origin == c.node.Site()
	var seqs []uint64 // own chunks: seq and hash, to release what put reserved
	var hashes [][32]byte
	var stored, dup, bad int
	var bytes int64
	for _, e := range entries {
		data := e.Payload
		if len(data) == 0 || len(data) > MaxChunkBytes {
			bad++
			continue
		}
		h := sha256.Sum256(data)
		if own {
			seqs = append(seqs, e.Seq)
			hashes = append(hashes, h)
		}
		if seen[h] {
			dup++
			continue
		}
		seen[h] = true
		if v, err := c.get(locKey(h)); err != nil {
			return err
		} else if v != nil {
			dup++
			continue
		}
		batch.Set(locKey(h), encodeRef(Ref{Origin: id.Origin, Seq: e.Seq, Size: uint32(len(data))}))
		stored++
		bytes += int64(len(data))
	}
	batch.SetApplied(id, entries[len(entries)-1].Seq)
	if err := batch.CommitNoSync(); err != nil {
		return err
	}
	if own {
		c.mu.Lock()
		for i, h := range hashes {
			if r, ok := c.mu.pending[h]; ok && r.Seq == seqs[i] {
				delete(c.mu.pending, h)
				c.mu.pendingBytes -= int64(r.Size)
			}
		}
		close(c.mu.applied)
		c.mu.applied = make(chan struct{})
		c.mu.Unlock()
	}
	c.metrics.applied(id.Origin, stored, dup, bytes)
	if bad > 0 {
		c.log.Warn("files stream entries that are no valid chunk were skipped", "stream", id, "count", bad)
	}
	return nil
}
