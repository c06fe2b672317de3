package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// getStable returns the newest version of key whose seq is behind its
// origin's frontier of predicate p. Versions come newest first from the
// history, so the first stable one wins (among equal HLCs the greater
// origin, as last writer wins decides).
func (s *Store) getStable(ctx context.Context, key, p string) (ReadResult, error) {
	if _, err := s.node.Predicate(ctx, p); err != nil {
		return ReadResult{}, fmt.Errorf("kv: stable read: %w", err)
	}
	var best Version
	found := false
	err := s.state.history(key, func(v Version) (bool, error) {
		if found && v.HLC != best.HLC {
			return false, nil
		}
		f, err := s.node.Frontier(ctx, stabilizer.StreamID{Origin: v.Origin, Name: Stream}, p)
		if err != nil {
			return false, err
		}
		if f.Seq >= v.Seq && (!found || v.Newer(&best)) {
			best, found = v, true
		}
		return true, nil
	})
	if err == nil && !found {
		err = s.stablePruned(ctx, key, p)
	}
	return ReadResult{Version: best, Found: found}, err
}

// getSnapshot reads key at the global stable time of "applied here and p":
// every write before that time, from any origin, is stable under p and
// already applied at this site, so the read is a consistent cut.
func (s *Store) getSnapshot(ctx context.Context, key, p string) (ReadResult, error) {
	t, err := s.snapshotTime(ctx, p)
	if err != nil {
		return ReadResult{}, err
	}
	v, found, err := s.state.at(key, t)
	return ReadResult{Version: v, Found: found, Snapshot: t}, err
}

func (s *Store) snapshotTime(ctx context.Context, p string) (stabilizer.HLC, error) {
	c, err := s.compile(ctx, p)
	if err != nil {
		return stabilizer.HLC{}, fmt.Errorf("kv: snapshot read: %w", err)
	}
	return s.node.StableTime(ctx, "min(applied(self), "+c.String()+")")
}

// getQuorum asks every site in parallel and returns the newest version once
// the sites that answered satisfy the dual of p for every origin: whichever
// site a write came from, if it was acknowledged under p, one of them holds
// it.
func (s *Store) getQuorum(ctx context.Context, key, p string) (ReadResult, error) {
	c, err := s.compile(ctx, p)
	if err != nil {
		return ReadResult{}, fmt.Errorf("kv: quorum read: %w", err)
	}
	dual := c.Dual()
	schema := s.node.Schema()
	self, _ := schema.SiteIndex(s.node.Site())
	type answer struct {
		site string
		v    Version
		ok   bool
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(schema.Sites))
	for _, site := range schema.Sites {
		go func() {
			var a answer
			a.site = site
			if site == s.node.Site() {
				a.v, a.ok, a.err = s.LocalGet(ctx, key)
			} else if r, ok := s.cfg.Peers[site]; ok {
				a.v, a.ok, a.err = r.LocalGet(ctx, key)
			} else {
				a.err = fmt.Errorf("no client for site %s", site)
			}
			answers <- a
		}()
	}
	var set frontier.SiteSet
	var res ReadResult
	var failures []string
	for range schema.Sites {
		a := <-answers
		if a.err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", a.site, a.err))
			continue
		}
		i, _ := schema.SiteIndex(a.site)
		set |= frontier.SiteSetOf(i)
		res.Answered = append(res.Answered, a.site)
		if a.ok && (!res.Found || a.v.Newer(&res.Version)) {
			res.Version, res.Found = a.v, true
		}
		if holdsForEveryOrigin(dual, set, len(schema.Sites), self) {
			slices.Sort(res.Answered)
			return res, nil
		}
	}
	return ReadResult{}, fmt.Errorf("%w: %q needs answers satisfying %s; %d of %d sites answered (%s); failed: %s",
		ErrQuorum, p, dual.SourceAt(self, self), len(res.Answered), len(schema.Sites), strings.Join(res.Answered, ", "), strings.Join(failures, "; "))
}

func holdsForEveryOrigin(dual *frontier.Predicate, set frontier.SiteSet, n, self int) bool {
	for o := range n {
		if !dual.Holds(set, o, self) {
			return false
		}
	}
	return true
}

// Scan returns up to limit live keys with the prefix, in key order, from
// the latest local state (own unapplied writes included).
func (s *Store) Scan(ctx context.Context, prefix string, limit int, o ReadOptions) ([]Version, error) {
	if err := s.available(); err != nil {
		return nil, err
	}
	ctx, cancel := s.withTimeout(ctx, o.Timeout)
	defer cancel()
	if err := s.waitSession(ctx, o.Session); err != nil {
		return nil, err
	}
	// Pending writes before the state, as in latest.
	var pending []Version
	s.mu.Lock()
	for k, p := range s.mu.pending {
		if strings.HasPrefix(k, prefix) {
			pending = append(pending, p)
		}
	}
	s.mu.Unlock()
	merged := map[string]Version{}
	var keys []string
	err := s.state.scan(prefix, 0, func(v Version) error {
		merged[v.Key] = v
		keys = append(keys, v.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		if cur, ok := merged[p.Key]; !ok || p.Newer(&cur) {
			if !ok {
				keys = append(keys, p.Key)
			}
			merged[p.Key] = p
		}
	}
	slices.Sort(keys)
	var out []Version
	for _, k := range keys {
		if v := merged[k]; !v.Deleted {
			out = append(out, v)
		}
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

var errWatchBehind = errors.New("kv: watch fell behind; start it again")
