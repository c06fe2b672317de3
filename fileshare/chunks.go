package fileshare

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Ref is where a chunk lives: entry Seq of files stream Stream (a stripe
// of the files transfer: Stream, Stream+"/1", ...) of Origin. A chunk not
// located yet (an early commit) has neither.
type Ref struct {
	Origin string
	Stream string
	Seq    uint64
	Size   uint32
}

// id is the stream of the chunk's entry.
func (r Ref) id() stabilizer.StreamID { return stabilizer.StreamID{Origin: r.Origin, Name: r.Stream} }

// refOf reads where a chunk ref of a version or a client says the chunk
// lives: a located ref without a stream (written before transfers were
// striped, or of stripe 0) is of Stream.
func refOf(c *filesharepb.ChunkRef) Ref {
	r := Ref{Origin: c.GetOrigin(), Stream: c.GetStream(), Seq: c.GetSeq(), Size: c.GetSize()}
	if r.Stream == "" && r.Origin != "" {
		r.Stream = Stream
	}
	return r
}

// chunkRef is r as the API and the manifests say it, with the chunk's
// hash: stream Stream is left empty, as refs were written before
// transfers were striped.
func chunkRef(hash []byte, r Ref) *filesharepb.ChunkRef {
	c := &filesharepb.ChunkRef{Hash: hash, Size: r.Size, Origin: r.Origin, Seq: r.Seq}
	if r.Stream != Stream {
		c.Stream = r.Stream
	}
	return c
}

// prefixLoc + hash keys where the site holds a chunk (encodeRef). The
// chunk's bytes are the payload of that files stream entry, read back from
// the site's log: they are written once per site, not once more into the
// namespace. An entry's payload is the chunk's bytes alone; its hash, the
// chunk's id, is computed from them.
const prefixLoc = 'l'

func locKey(h [32]byte) []byte { return append([]byte{prefixLoc}, h[:]...) }

// encodeRef writes a location: the origin (length first), the seq and the
// size, then, for a stream other than Stream, the stream (length first).
// A record of Stream is thus the format from before transfers were
// striped, and a record of that format (no stream) is of Stream.
func encodeRef(r Ref) []byte {
	b := binary.AppendUvarint(nil, uint64(len(r.Origin)))
	b = append(b, r.Origin...)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendUvarint(b, uint64(r.Size))
	if r.Stream != Stream {
		b = binary.AppendUvarint(b, uint64(len(r.Stream)))
		b = append(b, r.Stream...)
	}
	return b
}

var errCorruptRef = errors.New("fileshare: corrupt chunk location")

func decodeRef(b []byte) (Ref, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return Ref{}, errCorruptRef
	}
	r := Ref{Origin: string(b[k : k+int(n)]), Stream: Stream}
	b = b[k+int(n):]
	seq, k := binary.Uvarint(b)
	if k <= 0 {
		return Ref{}, errCorruptRef
	}
	b = b[k:]
	size, k := binary.Uvarint(b)
	if k <= 0 || size > math.MaxUint32 {
		return Ref{}, errCorruptRef
	}
	r.Seq, r.Size = seq, uint32(size)
	if b = b[k:]; len(b) == 0 {
		return r, nil
	}
	n, k = binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) != n {
		return Ref{}, errCorruptRef
	}
	if r.Stream = string(b[k:]); r.Stream == Stream || !isStripe(r.Stream) {
		return Ref{}, errCorruptRef // another stream, or Stream not written as it is
	}
	return r, nil
}

// chunkStore holds the site's chunks: it appends uploaded ones to the
// site's files streams and applies every site's streams into the
// namespace.
type chunkStore struct {
	ns      *stabilizer.Namespace
	node    *stabilizer.Node
	metrics *metrics
	log     hclog.Logger

	// writeMu serialises the two writers of location records: the applier
	// (a run of entries) and the collector (dead chunks' records, gc.go).
	// Each holds it across its reads of the records it changes and its
	// unsynced commit, and never while it waits for anything else. It
	// comes before mu.
	writeMu sync.Mutex

	mu struct {
		sync.Mutex
		// pending: own chunks appended and not yet applied here; they
		// count as held (Missing, Commit) from their append on.
		pending map[[32]byte]pendingChunk
		// own: the entries appended to the own files streams and not yet
		// applied here, per stream and seq (Apply takes their hash from
		// here); ownApplied: per own files stream, the last seq applied
		// here, so that an append whose entries were applied before its
		// caller recorded them records nothing.
		own        map[string]map[uint64]ownEntry
		ownApplied map[string]uint64
		// pendingBytes is their size; put waits while it is above
		// MaxPendingBytes, and applied is closed (and replaced) whenever
		// Apply lowers it.
		pendingBytes int64
		applied      chan struct{}
		// cand: chunks held here that no retained version names, with the
		// time the collector first found them so. Any sign of life (an
		// upload or lookup of the chunk, an entry of it applied) takes one
		// out; the collector drops those that stayed in for GCGrace.
		cand map[[32]byte]time.Time
		// pinned counts the commits in progress that name a chunk: it is
		// live until their versions are in the KV.
		pinned map[[32]byte]int
		// dying: chunks whose location the collector is deleting; they
		// are not held for lookups any more.
		dying map[[32]byte]bool
		// floors: the files streams' truncation points here, as the
		// collector last read or set them.
		floors map[stabilizer.StreamID]uint64
		// gone: chunks the collector dropped lately (at most maxGone, the
		// oldest forgotten first), so that a download of one says so.
		gone    map[[32]byte]bool
		goneLog [][32]byte
		// appendStriped is how chunks are appended to the files
		// transfer: Node.AppendStriped, or a test's wrapper of it.
		appendStriped func(ctx context.Context, name string, payloads [][]byte) ([]stabilizer.Appended, error)
	}
}

// pendingChunk is an own chunk appended and not yet applied, and the bytes
// put reserved for it.
type pendingChunk struct {
	Ref
	reserved int64
}

// maxGone bounds how many dropped chunks a site remembers to say so.
const maxGone = 1 << 16

// MaxPendingBytes bounds the chunk bytes a site has taken from clients and
// not yet stored (appended, not applied): uploads wait beyond it, so a
// client faster than the site's disk pushes back instead of filling the
// site's memory.
const MaxPendingBytes = 64 << 20

func newChunkStore(ns *stabilizer.Namespace, node *stabilizer.Node, m *metrics, log hclog.Logger) *chunkStore {
	c := &chunkStore{ns: ns, node: node, metrics: m, log: log}
	c.mu.pending = map[[32]byte]pendingChunk{}
	c.mu.own = map[string]map[uint64]ownEntry{}
	c.mu.ownApplied = map[string]uint64{}
	c.mu.applied = make(chan struct{})
	c.mu.cand = map[[32]byte]time.Time{}
	c.mu.pinned = map[[32]byte]int{}
	c.mu.dying = map[[32]byte]bool{}
	c.mu.floors = map[stabilizer.StreamID]uint64{}
	c.mu.gone = map[[32]byte]bool{}
	c.mu.appendStriped = node.AppendStriped
	return c
}

// locate says where the site holds a chunk, if it does: pending (own,
// appended), or located and not being dropped.
func (c *chunkStore) locate(h [32]byte) (Ref, bool, error) {
	return c.find(h, false, false)
}

// lookup is locate for a client that may name the chunk next (Missing,
// an upload of bytes held already): a sign of life, which restarts the
// chunk's grace period if no version names it.
func (c *chunkStore) lookup(h [32]byte) (Ref, bool, error) {
	return c.find(h, true, false)
}

// hold is lookup for a commit that names the chunk: it stays live until
// release, once the commit's versions are in the KV (or it failed).
func (c *chunkStore) hold(h [32]byte) (Ref, bool, error) {
	return c.find(h, true, true)
}

// release ends the holds of a commit.
func (c *chunkStore) release(hs [][32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		if c.mu.pinned[h]--; c.mu.pinned[h] <= 0 {
			delete(c.mu.pinned, h)
		}
	}
}

func (c *chunkStore) find(h [32]byte, touch, pin bool) (Ref, bool, error) {
	c.mu.Lock()
	if touch {
		delete(c.mu.cand, h)
	}
	if pin {
		c.mu.pinned[h]++
	}
	p, pending := c.mu.pending[h]
	dying := c.mu.dying[h]
	c.mu.Unlock()
	if pending {
		return p.Ref, true, nil
	}
	if dying {
		return Ref{}, false, nil
	}
	v, err := c.get(locKey(h))
	if err != nil || v == nil {
		return Ref{}, false, err
	}
	r, err := decodeRef(v)
	return r, err == nil, err
}

// needs adds to need, per files stream, the highest seq of v's chunks, a
// chunk without a location (an early commit) located by hash here; false
// when one is not held here yet.
func (c *chunkStore) needs(need map[stabilizer.StreamID]uint64, v *filesharepb.Version) bool {
	located := true
	for _, ch := range v.Chunks {
		r := refOf(ch)
		if r.Origin == "" {
			var ok bool
			var err error
			if r, ok, err = c.locate([32]byte(ch.Hash)); err != nil || !ok {
				located = false
				continue
			}
		}
		need[r.id()] = max(need[r.id()], r.Seq)
	}
	return located
}

// data returns the chunk's bytes if they are stored here (applied), nil if
// not (yet). A chunk this site dropped lately because no retained version
// named it fails wrapping ErrChunkGone, as would one whose entry was
// truncated here (never, for a located chunk: the collector deletes a
// location before it truncates below it).
func (c *chunkStore) data(ctx context.Context, h [32]byte) ([]byte, error) {
	v, err := c.get(locKey(h))
	if err != nil {
		return nil, err
	}
	if v == nil {
		c.mu.Lock()
		gone := c.mu.gone[h]
		c.mu.Unlock()
		if gone {
			return nil, fmt.Errorf("%w: %x: collected here, no version this site retained naming it", ErrChunkGone, h[:8])
		}
		return nil, nil
	}
	r, err := decodeRef(v)
	if err != nil {
		return nil, err
	}
	id := r.id()
	e, err := c.node.ReadEntry(ctx, id, r.Seq)
	if errors.Is(err, stabilizer.ErrNotFound) {
		c.mu.Lock()
		floor := c.mu.floors[id]
		c.mu.Unlock()
		if r.Seq <= floor {
			return nil, fmt.Errorf("%w: %x: its entry, seq %d of %s, is below the stream's floor %d here", ErrChunkGone, h[:8], r.Seq, id, floor)
		}
		return nil, nil // appended here, not yet durable
	}
	if err != nil {
		return nil, err
	}
	got, data, _, ok := parseEntry(e.Payload)
	if !ok || got != h {
		return nil, fmt.Errorf("fileshare: chunk %x: entry %s seq %d holds another chunk", h[:8], id, r.Seq)
	}
	return data, nil
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
// appended to one of the site's files streams, unless the site holds it
// already.
func (c *chunkStore) put(ctx context.Context, h [32]byte, data []byte) (Ref, bool, error) {
	rs, err := c.putBatch(ctx, []putItem{{Hash: h, Data: data}})
	if len(rs) == 0 {
		return Ref{}, false, err
	}
	return rs[0].Ref, rs[0].Dup, err
}

// putItem is a chunk a client sent, and where putBatch stored it.
type putItem struct {
	Hash [32]byte
	Data []byte
	// Set by putBatch.
	Ref Ref
	Dup bool // held here already (or earlier in the batch): not stored again
}

// checkUpload says why a client's chunk cannot be stored, if it cannot.
func checkUpload(h [32]byte, data []byte) error {
	if len(data) == 0 || len(data) > MaxChunkBytes {
		return fmt.Errorf("%w %x: %d bytes, want 1 to %d", ErrBadChunk, h[:8], len(data), MaxChunkBytes)
	}
	if sum := sha256.Sum256(data); sum != h {
		return fmt.Errorf("%w %x: the data's SHA-256 is %x", ErrBadChunk, h[:8], sum)
	}
	if looksRelocated(data) {
		return fmt.Errorf("%w %x: laid out as a relocation entry (its first bytes are the marker, then the hash of the rest)", ErrBadChunk, h[:8])
	}
	return nil
}

// putBatch stores chunks that arrived together, as put does each, with one
// append to the files transfer for all those the site does not hold yet
// (one round trip to the node's loop, not one per chunk, spread over the
// stripes), within MaxPendingBytes. It returns them in order with their
// refs. A bad chunk stops the batch: those before it are stored and
// returned, with the bad one's error.
func (c *chunkStore) putBatch(ctx context.Context, ups []putItem) ([]putItem, error) {
	var bad error
	for i := range ups {
		if err := checkUpload(ups[i].Hash, ups[i].Data); err != nil {
			ups, bad = ups[:i], err
			break
		}
	}
	var (
		hs       [][32]byte
		payloads [][]byte
		first    = map[[32]byte]int{} // chunk -> its first index in ups, when new
	)
	for i := range ups {
		u := &ups[i]
		if _, ok := first[u.Hash]; ok {
			u.Dup = true
			continue
		}
		r, ok, err := c.lookup(u.Hash)
		if err != nil {
			return nil, err
		}
		if ok {
			u.Ref, u.Dup = r, true
			continue
		}
		first[u.Hash] = i
		hs = append(hs, u.Hash)
		payloads = append(payloads, u.Data)
	}
	if len(payloads) > 0 {
		refs, err := c.appendEntries(ctx, hs, payloads, nil)
		if err != nil {
			return nil, err
		}
		for j, h := range hs {
			ups[first[h]].Ref = refs[j]
		}
	}
	for i := range ups {
		if j, ok := first[ups[i].Hash]; ok && j != i {
			ups[i].Ref = ups[j].Ref
		}
	}
	return ups, bad
}

// relocate appends a chunk the site holds again, as a relocation entry
// (entries.go), through the path uploads take.
func (c *chunkStore) relocate(ctx context.Context, h [32]byte, data []byte) (Ref, error) {
	refs, err := c.appendEntries(ctx, [][32]byte{h}, [][]byte{relocFrame(h, data)}, []int{len(data)})
	if err != nil {
		return Ref{}, err
	}
	return refs[0], nil
}

// appendEntries appends payloads, entries of chunks hs, to the site's files
// transfer in one batch (AppendStriped: spread over its stripes), within
// MaxPendingBytes, and counts them held. sizes are the chunks' sizes when
// the payloads are relocation entries (nil: the payloads are the chunks,
// uploads). The chunks' hashes are known (checked against the bytes, or
// the collector's), so Apply takes them from here instead of hashing the
// entries again.
func (c *chunkStore) appendEntries(ctx context.Context, hs [][32]byte, payloads [][]byte, sizes []int) ([]Ref, error) {
	var n int64
	for _, p := range payloads {
		n += int64(len(p))
	}
	if err := c.reserve(ctx, n); err != nil {
		return nil, fmt.Errorf("fileshare: store %d chunk(s) from %x: %w", len(hs), hs[0][:8], err)
	}
	c.mu.Lock()
	appendStriped := c.mu.appendStriped
	c.mu.Unlock()
	as, err := appendStriped(ctx, Stream, payloads)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.mu.pendingBytes -= n
		return nil, fmt.Errorf("fileshare: store %d chunk(s) from %x: %w", len(hs), hs[0][:8], err)
	}
	refs := make([]Ref, len(hs))
	released := false
	for i, h := range hs {
		size := len(payloads[i])
		if sizes != nil {
			size = sizes[i]
		}
		a := as[i]
		r := Ref{Origin: a.Stream.Origin, Stream: a.Stream.Name, Seq: a.Seq, Size: uint32(size)}
		refs[i] = r
		if a.Seq <= c.mu.ownApplied[r.Stream] {
			// Applied already (the applier ran before this caller got the
			// lock back): stored, not pending.
			c.mu.pendingBytes -= int64(len(payloads[i]))
			released = true
			continue
		}
		if old, dup := c.mu.pending[h]; dup { // a concurrent upload of the same bytes
			c.mu.pendingBytes -= old.reserved
			released = true
		}
		c.mu.pending[h] = pendingChunk{Ref: r, reserved: int64(len(payloads[i]))}
		own := c.mu.own[r.Stream]
		if own == nil {
			own = map[uint64]ownEntry{}
			c.mu.own[r.Stream] = own
		}
		own[r.Seq] = ownEntry{h: h, reloc: sizes != nil}
	}
	if released {
		c.wakeLocked()
	}
	return refs, nil
}

// wakeLocked tells put's waiters (reserve) that pending bytes fell.
func (c *chunkStore) wakeLocked() {
	close(c.mu.applied)
	c.mu.applied = make(chan struct{})
}

// reserve waits until n more pending bytes fit under MaxPendingBytes (one
// batch always fits when nothing is pending) and counts them.
func (c *chunkStore) reserve(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		if c.mu.pendingBytes == 0 || c.mu.pendingBytes+n <= MaxPendingBytes {
			c.mu.pendingBytes += n
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
// position, in one batch, and indexes every entry (entries.go). A chunk the
// site holds already (another site uploaded the same bytes) keeps its
// location; a relocation entry moves it. A frame that does not check out
// against its hash is skipped and counted, never located. An entry of the
// site's own that it appended in this run of the node (chunkStore.mu.own)
// is not hashed again: its hash was checked when it was appended, and a
// seq names one message.
func (c *chunkStore) Apply(ctx context.Context, entries []stabilizer.Entry) error {
	id := entries[0].Stream
	own := id.Origin == c.node.Site()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	var known map[uint64]ownEntry
	if own {
		c.mu.Lock()
		if m := c.mu.own[id.Name]; len(m) > 0 {
			known = make(map[uint64]ownEntry, len(entries))
			for _, e := range entries {
				if k, ok := m[e.Seq]; ok {
					known[e.Seq] = k
				}
			}
		}
		c.mu.Unlock()
	}
	batch := c.ns.NewBatch()
	set := map[[32]byte]Ref{} // the locations this run writes
	type applied struct {
		h   [32]byte
		seq uint64
	}
	var got []applied
	var stored, dup, bad int
	var bytes int64
	for _, e := range entries {
		var h [32]byte
		var data []byte
		var reloc, ok bool
		if k, mine := known[e.Seq]; mine {
			h, data, reloc, ok = parseOwn(e.Payload, k)
		} else {
			h, data, reloc, ok = parseEntry(e.Payload)
		}
		m := entryMeta{Seq: e.Seq, Hash: h, Size: uint32(len(e.Payload)), Reloc: reloc, Bad: !ok}
		if !ok {
			m.Hash = [32]byte{}
		}
		batch.Set(entryKey(id, e.Seq), encodeEntryMeta(m))
		if !ok {
			bad++
			continue
		}
		got = append(got, applied{h, e.Seq})
		if !reloc {
			if _, ok := set[h]; ok {
				dup++
				continue
			}
			if v, err := c.get(locKey(h)); err != nil {
				return err
			} else if v != nil {
				dup++
				continue
			}
		}
		set[h] = Ref{Origin: id.Origin, Stream: id.Name, Seq: e.Seq, Size: uint32(len(data))}
		stored++
		bytes += int64(len(data))
	}
	for h, r := range set {
		batch.Set(locKey(h), encodeRef(r))
	}
	last := entries[len(entries)-1].Seq
	batch.SetApplied(id, last)
	if err := batch.CommitNoSync(); err != nil {
		return err
	}
	c.mu.Lock()
	for _, a := range got {
		delete(c.mu.cand, a.h) // arrived: a sign of life
		if _, ok := set[a.h]; ok {
			delete(c.mu.gone, a.h)
		}
		if p, ok := c.mu.pending[a.h]; own && ok && p.Stream == id.Name && p.Seq == a.seq {
			delete(c.mu.pending, a.h)
			c.mu.pendingBytes -= p.reserved
		}
	}
	if own {
		if m := c.mu.own[id.Name]; len(m) > 0 {
			for _, e := range entries {
				delete(m, e.Seq)
			}
		}
		c.mu.ownApplied[id.Name] = max(c.mu.ownApplied[id.Name], last)
		c.wakeLocked()
	}
	c.mu.Unlock()
	c.metrics.applied(id.Origin, stored, dup, bytes)
	if bad > 0 {
		c.log.Warn("files stream entries that are no valid chunk were skipped", "stream", id, "count", bad)
	}
	return nil
}
