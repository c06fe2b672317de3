package fileshare

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Defaults of the chunk collector.
const (
	DefaultGCInterval = time.Minute
	DefaultGCGrace    = 10 * time.Minute
)

// wantsPrefix + SITE + "/" + hex(hash) is a KV key by which SITE asks for a
// chunk that a version it retains names and that it no longer holds; the
// value lists the sites asked (comma-separated): the origins of those
// versions, which hold the chunk.
const wantsPrefix = "/fs/want/"

// GCStats says what a collection found and did at one site.
type GCStats struct {
	At time.Time // when it began (Config.Now)
	// Live: bytes of the chunks held here that a retained version or a
	// commit in progress names. Held: bytes of the files streams' entries
	// this site's log holds, every origin's.
	Live, Held int64
	// Relocated: bytes this collection rewrote to the site's own files
	// streams (compaction, and chunks other sites asked for). Reclaimed:
	// bytes of the entries it truncated.
	Relocated, Reclaimed int64
	Dropped              int // chunks whose location it deleted
	Waiting              int // dead chunks it keeps until their grace period ends
	Wanted               int // chunks retained versions name that this site lost and asks for
}

// Reclaimable is what the logs hold beyond the live chunks.
func (st GCStats) Reclaimable() int64 { return max(st.Held-st.Live, 0) }

// String is the status page's line.
func (st GCStats) String() string {
	if st.At.IsZero() {
		return "no collection yet"
	}
	s := fmt.Sprintf("%s held, %s live, %s reclaimable; the last collection (%s) reclaimed %s, relocated %s, dropped %d chunks, keeps %d in their grace period",
		formatBytes(st.Held), formatBytes(st.Live), formatBytes(st.Reclaimable()), st.At.Format(time.RFC3339),
		formatBytes(st.Reclaimed), formatBytes(st.Relocated), st.Dropped, st.Waiting)
	if st.Wanted > 0 {
		s += fmt.Sprintf(", asks other sites for %d", st.Wanted)
	}
	return s
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// GCStatus returns what the last collection found; the zero GCStats before
// the first.
func (s *Service) GCStatus() GCStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.gcLast
}

// gcLoop collects every GCInterval.
func (s *Service) gcLoop() {
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		st, err := s.GC(s.ctx)
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.log.Warn("chunk collection", "error", err)
		case st.Reclaimed > 0 || st.Dropped > 0 || st.Relocated > 0:
			s.log.Info("chunk collection", "reclaimed_bytes", st.Reclaimed, "relocated_bytes", st.Relocated,
				"dropped_chunks", st.Dropped, "live_bytes", st.Live, "held_bytes", st.Held)
		}
	}
}

// GC collects the file chunks no retained version names, at this site:
// it forgets where such chunks live once their grace period is over, moves
// the live chunks out of an old prefix of each of the site's own files
// streams that is mostly dead, truncates every files stream below the
// lowest entry a chunk is still located at, and asks for chunks that a
// retained version names and this site dropped before it learned of the
// version. One runs at a time; the background loop calls it every
// GCInterval.
func (s *Service) GC(ctx context.Context) (GCStats, error) {
	s.mu.Lock()
	closed := s.mu.closed
	s.mu.Unlock()
	if closed {
		return GCStats{}, ErrClosed
	}
	select {
	case s.gcSem <- struct{}{}:
	case <-ctx.Done():
		return GCStats{}, ctx.Err()
	}
	defer func() { <-s.gcSem }()
	st, err := s.collect(ctx)
	if err != nil {
		return st, fmt.Errorf("fileshare: collect chunks: %w", err)
	}
	s.mu.Lock()
	s.mu.gcLast = st
	s.mu.Unlock()
	s.metrics.gc.live.Set(float64(st.Live))
	return st, nil
}

// streamPos is where a site stands in one files stream.
type streamPos struct{ floor, applied uint64 }

// collect is one collection; the caller holds gcSem.
func (s *Service) collect(ctx context.Context) (GCStats, error) {
	st := GCStats{At: s.cfg.Now()}

	// What every version this site retains names, stable or not, early
	// commits included: all of them, since each is a key of its own.
	vs, err := s.retained(ctx)
	if err != nil {
		return st, err
	}
	live := map[[32]byte]bool{}
	for _, v := range vs {
		for _, ch := range v.Chunks {
			live[[32]byte(ch.Hash)] = true
		}
	}
	pinned := s.chunks.pinnedNow()
	isLive := func(h [32]byte) bool { return live[h] || pinned[h] }

	// Where the site stands in each stream, then where chunks are: a
	// location written in between is of an entry beyond the positions.
	streams, err := s.fileStreams(ctx)
	if err != nil {
		return st, err
	}
	locs, err := s.chunks.locations()
	if err != nil {
		return st, err
	}
	var dead []located
	for h, r := range locs {
		if isLive(h) {
			st.Live += int64(r.Size)
		} else {
			dead = append(dead, located{h, r})
		}
	}
	dropped, err := s.chunks.drop(s.chunks.condemn(dead, st.At, s.cfg.GCGrace))
	waiting := make(map[[32]byte]bool, len(dead))
	for _, d := range dead {
		waiting[d.h] = true
	}
	for _, h := range dropped {
		delete(locs, h)
		delete(waiting, h)
	}
	st.Dropped, st.Waiting = len(dropped), len(waiting)
	s.metrics.gc.dropped.Add(float64(len(dropped)))
	if err != nil {
		return st, err
	}
	if st.Wanted, err = s.want(ctx, vs, locs, streams); err != nil && ctx.Err() != nil {
		return st, err
	} else if err != nil {
		s.log.Warn("asking for chunks retained versions name", "error", err)
	}

	// Move the live chunks out of a mostly dead prefix of each own files
	// stream, and send again what other sites ask for.
	n, err := s.compact(ctx, streams, locs, isLive, func(h [32]byte) bool { return waiting[h] })
	st.Relocated += n
	if err != nil && ctx.Err() != nil {
		return st, err
	} else if err != nil {
		// A full disk refuses appends: truncate what needs none.
		s.log.Warn("relocating live chunks out of a files stream's prefix", "error", err)
	}
	if n > 0 && err == nil {
		// Applied: read again, so that the prefixes they left go now.
		if streams, err = s.fileStreams(ctx); err != nil {
			return st, err
		}
		if locs, err = s.chunks.locations(); err != nil {
			return st, err
		}
	}
	st.Relocated += s.answerWants(ctx, st.At)

	// Truncate each stream below its lowest located entry, and within what
	// this site applied: what it has not applied may be located next.
	low := map[stabilizer.StreamID]uint64{}
	for _, r := range locs {
		if l, ok := low[r.id()]; !ok || r.Seq < l {
			low[r.id()] = r.Seq
		}
	}
	for id, pos := range streams {
		upto := pos.applied
		if l, ok := low[id]; ok {
			upto = min(upto, l-1)
		}
		if upto <= pos.floor {
			continue
		}
		f, err := s.node.Truncate(ctx, id, upto, stabilizer.TruncateOptions{})
		if err != nil {
			return st, err
		}
		pos.floor = f
		streams[id] = pos
		s.chunks.setFloor(id, f)
	}
	reclaimed, held, err := s.chunks.sweepIndex(streams)
	if err != nil {
		return st, err
	}
	st.Held = held
	for id, n := range reclaimed {
		st.Reclaimed += n
		s.metrics.gc.reclaimed.WithLabelValues(id.Origin).Add(float64(n))
	}
	return st, nil
}

// retained returns every version record of every share this site holds
// (the KV's latest state, own writes not yet applied included) that names
// chunks: each version is a key of its own, never overwritten but by its
// pruned stub, so the scan sees every one, not only the ones shown. A
// record that does not decode is never listed, so it can never become
// visible, and names nothing.
func (s *Service) retained(ctx context.Context) ([]*filesharepb.Version, error) {
	kvs, err := s.kv.Scan(ctx, versionsPrefix, 0, kv.ReadOptions{})
	if err != nil {
		return nil, err
	}
	var out []*filesharepb.Version
	for _, e := range kvs {
		v, err := manifest.Decode(e.Value)
		if err != nil || v.Pruned || len(v.Chunks) == 0 {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// fileStreams says where this site stands in every files stream it knows:
// every stripe of every site's files transfer.
func (s *Service) fileStreams(ctx context.Context) (map[stabilizer.StreamID]streamPos, error) {
	all, err := s.node.Streams(ctx)
	if err != nil {
		return nil, err
	}
	schema := s.node.Schema()
	self, _ := schema.SiteIndex(s.node.Site())
	n := len(schema.Sites)
	out := map[stabilizer.StreamID]streamPos{}
	for _, st := range all {
		if !isStripe(st.Stream.Name) {
			continue
		}
		var applied uint64
		if i := frontier.Applied*n + self; i < len(st.Acks) {
			applied = st.Acks[i]
		}
		out[st.Stream] = streamPos{floor: st.Truncated, applied: applied}
		s.chunks.setFloor(st.Stream, st.Truncated)
	}
	return out, nil
}

// compact relocates the live chunks of a mostly dead prefix of each own
// files stream (planCompaction), at most MaxRelocateBytes in all, and waits
// until this site applied the relocations, so that the truncation that
// follows finds them located beyond the prefixes. A chunk needs moving out
// of a prefix when it is located in it (locs): one located in another
// stream, or beyond, holds nothing there. The relocations go where
// AppendStriped puts them, to any own stream. Until a prefix it moved
// chunks out of is dropped (peers persist it), it plans within that prefix
// only, so that it never moves a chunk twice.
func (s *Service) compact(ctx context.Context, streams map[stabilizer.StreamID]streamPos, locs map[[32]byte]Ref, live, waiting func([32]byte) bool) (int64, error) {
	self := s.node.Site()
	var own []stabilizer.StreamID
	for id := range streams {
		if id.Origin == self {
			own = append(own, id)
		}
	}
	slices.SortFunc(own, func(a, b stabilizer.StreamID) int { return strings.Compare(a.Name, b.Name) })
	type planned struct {
		id   stabilizer.StreamID
		plan compaction
	}
	var plans []planned
	budget := int64(MaxRelocateBytes)
	for _, id := range own {
		pos := streams[id]
		limit := pos.applied
		if t := s.gc.relocTarget[id.Name]; t > pos.floor {
			limit = min(limit, t)
		} else {
			delete(s.gc.relocTarget, id.Name)
		}
		entries, err := s.chunks.entries(id, pos.floor, pos.applied)
		if err != nil {
			return 0, err
		}
		at := func(h [32]byte) (uint64, bool) {
			r, ok := locs[h]
			return r.Seq, ok && r.id() == id
		}
		plan := planCompaction(entries, limit, live, waiting, at, RelocateRatio, budget)
		if len(plan.Move) > 0 {
			plans = append(plans, planned{id, plan})
			budget -= plan.MoveBytes
		}
	}
	var moved int64
	last := map[string]uint64{} // per own stream, the last relocation appended
	for _, p := range plans {
		var bytes int64
		for _, m := range p.plan.Move {
			data, err := s.chunks.read(ctx, p.id, m.Seq, m.Hash)
			if err != nil {
				return moved, err
			}
			r, err := s.chunks.relocate(ctx, m.Hash, data)
			if err != nil {
				return moved, err
			}
			bytes += int64(len(data))
			last[r.Stream] = max(last[r.Stream], r.Seq)
			s.metrics.gc.relocated.Add(float64(len(data)))
		}
		moved += bytes
		s.gc.relocTarget[p.id.Name] = p.plan.Upto
		s.log.Debug("relocated live chunks out of a files stream's prefix", "stream", p.id.Name, "upto", p.plan.Upto,
			"chunks", len(p.plan.Move), "bytes", bytes, "prefix_bytes", p.plan.Bytes)
	}
	for name, seq := range last {
		if err := s.node.WaitFor(ctx, stabilizer.StreamID{Origin: self, Name: name}, "applied(self)", seq); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// want asks for the chunks that a version this site retains names and
// that it no longer holds although it applied their entries: it dropped
// them before it learned of the version (committed at another site, which
// named a chunk it held by deduplication, while no version this site knew
// named it). It asks the versions' origins, which hold the chunks while the
// versions are live there, to send them again (answerWants), and withdraws
// what it holds again or no longer needs. It returns how many it wants.
func (s *Service) want(ctx context.Context, vs []*filesharepb.Version, locs map[[32]byte]Ref, streams map[stabilizer.StreamID]streamPos) (int, error) {
	self := s.node.Site()
	need := map[[32]byte][]string{}
	for _, v := range vs {
		for _, ch := range v.Chunks {
			h := [32]byte(ch.Hash)
			if _, ok := locs[h]; ok || ch.Origin == "" || v.Origin == self {
				continue // held, or not uploaded yet (an early commit), or ours: held
			}
			if pos, ok := streams[refOf(ch).id()]; !ok || pos.applied < ch.Seq {
				continue // on its way
			}
			if _, ok, err := s.chunks.locate(h); err != nil {
				return 0, err
			} else if ok {
				continue
			}
			if !slices.Contains(need[h], v.Origin) {
				need[h] = append(need[h], v.Origin)
			}
		}
	}
	mine := wantsPrefix + self + "/"
	have, err := s.kv.Scan(ctx, mine, 0, kv.ReadOptions{})
	if err != nil {
		return 0, err
	}
	asked := map[string]string{}
	for _, e := range have {
		asked[e.Key] = string(e.Value)
	}
	for h, from := range need {
		slices.Sort(from)
		key, val := mine+hex.EncodeToString(h[:]), strings.Join(from, ",")
		s.chunks.ungone(h)
		if asked[key] == val {
			delete(asked, key)
			continue
		}
		delete(asked, key)
		if _, err := s.kv.Put(ctx, key, []byte(val), kv.WriteOptions{Wait: "none"}); err != nil {
			return 0, err
		}
		s.log.Info("asking for a chunk a retained version names, which this site collected before it learned of the version",
			"chunk", hex.EncodeToString(h[:8]), "from", val)
	}
	for key := range asked {
		if _, err := s.kv.Delete(ctx, key, kv.WriteOptions{Wait: "none"}); err != nil {
			return 0, err
		}
	}
	return len(need), nil
}

// answerWants sends again, as relocation entries of the own files streams,
// the chunks other sites ask this one for (want), once per GCGrace each. It
// returns the bytes sent; a chunk it cannot send now waits for the next
// collection.
func (s *Service) answerWants(ctx context.Context, now time.Time) int64 {
	self := s.node.Site()
	for h, t := range s.gc.answered {
		if now.Sub(t) >= s.cfg.GCGrace {
			delete(s.gc.answered, h)
		}
	}
	wants, err := s.kv.Scan(ctx, wantsPrefix, 0, kv.ReadOptions{})
	if err != nil {
		s.log.Warn("reading other sites' requests for chunks", "error", err)
		return 0
	}
	var sent int64
	for _, e := range wants {
		site, hx, ok := strings.Cut(strings.TrimPrefix(e.Key, wantsPrefix), "/")
		b, err := hex.DecodeString(hx)
		if !ok || site == self || err != nil || len(b) != 32 || !slices.Contains(strings.Split(string(e.Value), ","), self) {
			continue
		}
		h := [32]byte(b)
		if _, ok := s.gc.answered[h]; ok {
			continue
		}
		r, ok, err := s.chunks.locate(h)
		if err != nil || !ok || r.Origin == "" {
			continue
		}
		data, err := s.chunks.read(ctx, r.id(), r.Seq, h)
		if err != nil {
			continue // pending: not readable yet
		}
		if _, err := s.chunks.relocate(ctx, h, data); err != nil {
			s.log.Warn("sending a chunk another site asks for", "site", site, "error", err)
			continue
		}
		s.gc.answered[h] = now
		sent += int64(len(data))
		s.metrics.gc.relocated.Add(float64(len(data)))
		s.log.Info("sent again a chunk another site collected before it learned of a version naming it",
			"site", site, "chunk", hx[:16])
	}
	return sent
}
