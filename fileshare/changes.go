package fileshare

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Incremental lists. A client that holds a share's list asks only for what
// changed since (ListRequest.since): the site keeps, per share, a log of
// changes numbered by generation, and a cursor names a position in it.
//
// What can change in a list: a version record appears (a commit here or
// elsewhere, applied here), is rewritten (a pruned stub) or goes (a key
// deleted), and a version's stable and persisted_at change as frontiers
// and acks advance. Records come from one watch of the KV on the versions
// prefix (Service.watchVersions) and from this site's own writes at once
// (Commit and Prune, before they are applied here, as a full List reads
// them). Stability is evaluated again, at each List that asks for changes,
// for the versions that may still change: the open ones, not yet stable
// and persisted at every site. Once closed a version leaves the share's
// memory (frontiers and acks only grow), until its record changes. So a
// share costs memory for its open versions and its recent changes, a
// delta List costs time for them and for what it sends, not for the
// history.
//
// A cursor is the site, the share's log epoch and a generation. The log
// starts over (new epoch) when the site restarts or its watch of the KV
// fell behind; a cursor of another site, of another epoch or older than
// the log's floor (the log keeps maxChangeLog changes) gets the full list
// and a new cursor, as does a client that asks for a cursor without one.
// Marks are read in the open versions' refresh (one frontier and ack table
// read per stream), as the full List reads them.
//
// A full List reads a chunk named by hash only (an early commit) where it
// lies at each List; the log locates it once and keeps that location,
// which a later relocation of the chunk does not move.

// maxChangeLog bounds the changes a share's log keeps: a cursor older than
// them gets the full list.
const maxChangeLog = 1 << 16

// shareLog is one share's changes at this site.
type shareLog struct {
	s     *Service
	share string
	epoch uint64
	// ready is closed once built (from a scan), err set if that failed.
	ready chan struct{}
	err   error
	// dead is closed when the log is dropped (the KV watch fell behind):
	// its cursors are void; the next List builds a new one.
	dead chan struct{}
	// refreshMu serialises refreshes: each reads frontiers and ack tables
	// from the node and then numbers the changes it found, in order. It
	// comes before mu and is held across those reads.
	refreshMu chan struct{}

	mu struct {
		sync.Mutex
		// building: records applied while the build scans, ingested
		// after it.
		building bool
		early    []kv.Version
		gen      uint64
		open     map[string]*openVersion // by key
		log      []change                // by generation
		floor    uint64                  // cursors below it get the full list
		// changed is closed and replaced at every record ingested: a
		// Watch tells its client to List.
		changed chan struct{}
	}
}

// openVersion is a version record whose list entry may still change: its
// record is new or its stability is not final.
type openVersion struct {
	id     string
	origin string // of the record's write in the KV
	seq    uint64
	hlc    stabilizer.HLC
	// gone: the key was deleted, or holds no valid record of the share.
	gone bool
	// need: per files stream (each stripe of each origin's), the highest
	// seq of the chunks that are located; unlocated: chunks named by hash
	// not held here yet.
	need      map[stabilizer.StreamID]uint64
	unlocated [][32]byte
	// The marks last logged; marked false until the first.
	marked      bool
	stable      bool
	persistedAt []string
}

// change is one entry of the log: a version's record and marks as of
// generation gen, or its going.
type change struct {
	gen         uint64
	key, id     string
	origin      string
	seq         uint64
	gone        bool
	stable      bool
	persistedAt []string
}

// shareLog returns the share's log, building it (a scan of the share's
// records) on first use. A caller that waited for another's build that
// failed (its ctx ended, say) builds it again itself.
func (s *Service) shareLog(ctx context.Context, share string) (*shareLog, error) {
	for {
		s.lists.Lock()
		if s.lists.closed {
			s.lists.Unlock()
			return nil, ErrClosed
		}
		t := s.lists.shares[share]
		created := t == nil
		if created {
			t = &shareLog{s: s, share: share, epoch: rand.Uint64(), ready: make(chan struct{}), dead: make(chan struct{}),
				refreshMu: make(chan struct{}, 1)}
			t.mu.building = true
			t.mu.open = map[string]*openVersion{}
			t.mu.changed = make(chan struct{})
			s.lists.shares[share] = t
		}
		s.lists.Unlock()
		if created {
			t.err = t.build(ctx)
			if t.err != nil {
				s.lists.Lock()
				if s.lists.shares[share] == t {
					delete(s.lists.shares, share)
				}
				s.lists.Unlock()
			}
			close(t.ready)
			if t.err != nil {
				return nil, t.err
			}
			return t, nil
		}
		select {
		case <-t.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if t.err == nil {
			return t, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// build ingests the share's records as a scan finds them, then those the
// watch brought meanwhile.
func (t *shareLog) build(ctx context.Context) error {
	kvs, err := t.s.kv.Scan(ctx, pathPrefix(t.share, ""), 0, kv.ReadOptions{})
	if err != nil {
		return fmt.Errorf("fileshare: changes of %q: %w", t.share, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range kvs {
		t.ingestLocked(v)
	}
	for _, v := range t.mu.early {
		t.ingestLocked(v)
	}
	t.mu.early, t.mu.building = nil, false
	return nil
}

// watchVersions feeds the shares' logs with every version record applied
// here, from one watch of the KV. When the watch fails (it fell behind)
// every log is dropped: their cursors get full lists.
func (s *Service) watchVersions() {
	for {
		err := s.kv.Watch(s.ctx, versionsPrefix, "", func(v kv.Version) error {
			if t := s.loggedShare(v.Key); t != nil {
				t.ingest(v)
			}
			return nil
		})
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("the watch of version records ended; lists start over in full", "error", err)
		s.dropLogs()
		t := time.NewTimer(time.Second)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// loggedShare returns the log of the share a version key belongs to, if
// the share has one.
func (s *Service) loggedShare(key string) *shareLog {
	share, _, ok := strings.Cut(strings.TrimPrefix(key, versionsPrefix), "/")
	if !ok {
		return nil
	}
	s.lists.Lock()
	defer s.lists.Unlock()
	return s.lists.shares[share]
}

// dropLogs forgets every share's log.
func (s *Service) dropLogs() {
	s.lists.Lock()
	defer s.lists.Unlock()
	for share, t := range s.lists.shares {
		close(t.dead)
		delete(s.lists.shares, share)
	}
}

// wrote ingests this site's own writes of version records at once, before
// they are applied here (a full List reads them from then on).
func (s *Service) wrote(share string, ops []kv.Op, res []kv.OpResult) {
	s.lists.Lock()
	t := s.lists.shares[share]
	s.lists.Unlock()
	if t == nil {
		return
	}
	for i, r := range res {
		if r.Seq != 0 { // written, its wait failed or not
			t.ingest(kv.Version{Key: ops[i].Key, Value: ops[i].Value, Origin: r.Origin, Seq: r.Seq, HLC: r.HLC})
		}
	}
}

// ingest takes a record applied (or written) here.
func (t *shareLog) ingest(v kv.Version) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.building {
		t.mu.early = append(t.mu.early, v)
		return
	}
	t.ingestLocked(v)
	close(t.mu.changed)
	t.mu.changed = make(chan struct{})
}

func (t *shareLog) ingestLocked(v kv.Version) {
	if o := t.mu.open[v.Key]; o != nil {
		cur := kv.Version{Origin: o.origin, HLC: o.hlc}
		if !v.Newer(&cur) {
			return // known already (an own write), or older
		}
	}
	o := &openVersion{origin: v.Origin, seq: v.Seq, hlc: v.HLC, need: map[stabilizer.StreamID]uint64{}}
	_, o.id, _ = strings.Cut(v.Key, "\x00")
	m, err := manifest.Decode(v.Value)
	switch {
	case v.Deleted:
		o.gone = true
	case err != nil || m.Share != t.share || !strings.HasPrefix(v.Key, pathPrefix(t.share, m.Path)):
		o.gone = true // as a full List skips it
	default:
		o.id = m.Id
		for _, ch := range m.Chunks {
			if ch.Origin == "" {
				o.unlocated = append(o.unlocated, [32]byte(ch.Hash))
				continue
			}
			id := refOf(ch).id()
			o.need[id] = max(o.need[id], ch.Seq)
		}
	}
	t.mu.open[v.Key] = o
}

// changes returns the channel closed at the next record ingested.
func (t *shareLog) changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.changed
}

// refresh marks the open versions again and logs those whose marks
// changed (or that are new, rewritten or gone), dropping the ones that
// can no longer change.
func (t *shareLog) refresh(ctx context.Context) error {
	select {
	case t.refreshMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.refreshMu }()
	sh, err := t.s.Share(ctx, t.share)
	if err != nil {
		return err
	}
	t.mu.Lock()
	keys := make([]string, 0, len(t.mu.open))
	ovs := make([]*openVersion, 0, len(t.mu.open))
	for k, o := range t.mu.open {
		keys = append(keys, k)
		ovs = append(ovs, o)
	}
	t.mu.Unlock()
	type mark struct {
		stable, final bool
		at            []string
		found         []Ref // where unlocated chunks were found
	}
	marks := make([]mark, len(ovs))
	st := t.s.newStability(sh.Visibility)
	for i, o := range ovs {
		if o.gone {
			continue
		}
		need := map[stabilizer.StreamID]uint64{{Origin: o.origin, Name: kv.Stream}: o.seq}
		for id, q := range o.need {
			need[id] = max(need[id], q)
		}
		located := true
		m := &marks[i]
		for _, h := range o.unlocated {
			r, ok, err := t.s.chunks.locate(h)
			if err != nil || !ok {
				located = false
				continue
			}
			m.found = append(m.found, r)
			need[r.id()] = max(need[r.id()], r.Seq)
		}
		m.stable, m.at = st.markNeed(ctx, need, located)
		m.final = located && m.stable && len(m.at) == len(st.sites)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, o := range ovs {
		key := keys[i]
		if t.mu.open[key] != o {
			continue // a newer record came meanwhile: marked next time
		}
		m := marks[i]
		if o.gone {
			t.logLocked(change{key: key, id: o.id, origin: o.origin, seq: o.seq, gone: true})
			delete(t.mu.open, key)
			continue
		}
		if len(o.unlocated) > 0 && len(m.found) == len(o.unlocated) {
			for _, r := range m.found { // located for good: see the top of this file
				o.need[r.id()] = max(o.need[r.id()], r.Seq)
			}
			o.unlocated = nil
		}
		if !o.marked || o.stable != m.stable || !slices.Equal(o.persistedAt, m.at) {
			o.marked, o.stable, o.persistedAt = true, m.stable, m.at
			t.logLocked(change{key: key, id: o.id, origin: o.origin, seq: o.seq, stable: m.stable, persistedAt: m.at})
		}
		if m.final {
			delete(t.mu.open, key)
		}
	}
	if over := len(t.mu.log) - maxChangeLog; over > 0 {
		t.mu.floor = t.mu.log[over-1].gen
		t.mu.log = slices.Delete(t.mu.log, 0, over)
	}
	return nil
}

func (t *shareLog) logLocked(c change) {
	t.mu.gen++
	c.gen = t.mu.gen
	t.mu.log = append(t.mu.log, c)
}

// since returns the latest change of each version changed after
// generation gen, by key, and the generation they bring a client to; ok
// false when gen is not in the log (below its floor, or beyond its end).
func (t *shareLog) since(gen uint64) ([]change, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen < t.mu.floor || gen > t.mu.gen {
		return nil, t.mu.gen, false
	}
	i := sort.Search(len(t.mu.log), func(i int) bool { return t.mu.log[i].gen > gen })
	latest := map[string]change{}
	for _, c := range t.mu.log[i:] {
		latest[c.key] = c
	}
	out := make([]change, 0, len(latest))
	for _, c := range latest {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b change) int { return strings.Compare(a.key, b.key) })
	return out, t.mu.gen, true
}

func (t *shareLog) generation() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.gen
}

// Listing is what ListChanges answers.
type Listing struct {
	// Versions: every version (Delta false), or those changed since the
	// cursor given, each whole.
	Versions []*filesharepb.Version
	// Gone: ids of versions no longer recorded since the cursor.
	Gone []string
	// Delta says Versions and Gone are the changes since the cursor.
	Delta bool
	// Cursor is this answer's position, for the next call.
	Cursor []byte
}

// ListChanges answers a List of a whole share with a cursor: what changed
// since the cursor since (one of this site's answers), or every version
// when since is empty or not a cursor of this site's log of the share
// (another site's, from before a restart, older than the log keeps).
func (s *Service) ListChanges(ctx context.Context, share string, since []byte) (Listing, error) {
	t, err := s.shareLog(ctx, share)
	if err != nil {
		return Listing{}, err
	}
	if err := t.refresh(ctx); err != nil {
		return Listing{}, err
	}
	c, ok := decodeCursor(since)
	ok = ok && c.site == s.node.Site() && c.epoch == t.epoch
	var changes []change
	var gen uint64
	if ok {
		changes, gen, ok = t.since(c.gen)
	}
	if !ok {
		// Every change after gen is logged after it: a record the scan
		// below reads but the log has not numbered yet is sent again.
		gen = t.generation()
		vs, err := s.List(ctx, share, "")
		if err != nil {
			return Listing{}, err
		}
		s.metrics.listed(share, false)
		return Listing{Versions: vs, Cursor: cursor{site: s.node.Site(), epoch: t.epoch, gen: gen}.encode()}, nil
	}
	out := Listing{Delta: true, Cursor: cursor{site: s.node.Site(), epoch: t.epoch, gen: gen}.encode()}
	for _, ch := range changes {
		if ch.gone {
			out.Gone = append(out.Gone, ch.id)
			continue
		}
		r, err := s.kv.Get(ctx, ch.key, kv.ReadOptions{})
		if errors.Is(err, kv.ErrNotFound) {
			continue // deleted since: logged once ingested
		}
		if err != nil {
			return Listing{}, err
		}
		if !r.Found || r.Origin != ch.origin || r.Seq != ch.seq {
			// Rewritten or deleted since it was marked: the newer
			// record is logged once ingested, and its Watch event
			// follows.
			continue
		}
		v, err := manifest.Decode(r.Value)
		if err != nil {
			continue // logged as gone already if it stays so
		}
		v.Stable, v.PersistedAt = ch.stable, ch.persistedAt
		out.Versions = append(out.Versions, v)
	}
	s.metrics.listed(share, true)
	return out, nil
}

// cursor is a position in a share's log at a site.
type cursor struct {
	site  string
	epoch uint64
	gen   uint64
}

const cursorFormat = 1

func (c cursor) encode() []byte {
	b := []byte{cursorFormat}
	b = binary.AppendUvarint(b, uint64(len(c.site)))
	b = append(b, c.site...)
	b = binary.BigEndian.AppendUint64(b, c.epoch)
	return binary.AppendUvarint(b, c.gen)
}

// decodeCursor reads a cursor a client sent back; false if it is none.
func decodeCursor(b []byte) (cursor, bool) {
	if len(b) < 1 || b[0] != cursorFormat {
		return cursor{}, false
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return cursor{}, false
	}
	c := cursor{site: string(b[k : k+int(n)])}
	b = b[k+int(n):]
	if len(b) < 8 {
		return cursor{}, false
	}
	c.epoch = binary.BigEndian.Uint64(b)
	b = b[8:]
	gen, k := binary.Uvarint(b)
	if k <= 0 || k != len(b) {
		return cursor{}, false
	}
	c.gen = gen
	return c, true
}
