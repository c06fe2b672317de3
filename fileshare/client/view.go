package client

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// DefaultFullListInterval is how often a client lists its share in full
// although its site answers what changed (Options.FullListInterval).
const DefaultFullListInterval = 5 * time.Minute

// shareList is the share's list as this client holds it: every version the
// site answered, kept up to date by asking the site only what changed
// since (ListRequest.since). The site answers in full when it does not
// know the cursor: the first time, after the client moved to another site
// (cursors are per site), after the site restarted, from an older site
// (which never gives a cursor); and the client asks in full every
// Options.FullListInterval, as a safety net. Owned by the round.
type shareList struct {
	site   string
	cursor []byte
	byID   map[string]*filesharepb.Version
	fullAt time.Time // of the last full answer
	// gen counts the changes applied; the sorted list and the view
	// resolved from it are kept until it moves.
	gen      uint64
	sorted   []plan.Version
	sortedAt uint64
	at       map[string]int // id -> its index in sorted
	// changed: ids a delta brought since sorted was made; rebuild: sorted
	// must be made again (a full answer, or a version gone).
	changed  []string
	rebuild  bool
	view     plan.View
	viewAt   uint64
	resolved bool
	// Answers so far, in full and as deltas.
	fulls, deltas int
}

// listShare brings the share's list up to date and returns it, with the
// site that answered.
func (s *Syncer) listShare(ctx context.Context) ([]plan.Version, string, error) {
	l := &s.list
	full := l.cursor == nil || s.now().Sub(l.fullAt) >= s.fullListEvery
	req := &filesharepb.ListRequest{Share: s.cfg.Share, Track: true}
	if !full {
		req.Since = l.cursor
	}
	var resp *filesharepb.ListResponse
	err := s.r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		resp, err = api.List(ctx, req)
		return err
	})
	if err != nil {
		return nil, "", s.r.explain("list share "+s.cfg.Share, err)
	}
	switch {
	case resp.Delta && resp.Site == l.site && l.byID != nil:
		for _, v := range resp.Versions {
			l.byID[v.Id] = v
			l.changed = append(l.changed, v.Id)
		}
		for _, id := range resp.Gone {
			if _, ok := l.byID[id]; ok {
				delete(l.byID, id)
				l.rebuild = true
			}
		}
		if len(resp.Versions) > 0 || l.rebuild {
			l.gen++
		}
		l.deltas++
	case resp.Delta:
		// A delta for a list this client does not hold: never from a
		// site that keeps its word. Start over.
		l.cursor, l.byID = nil, nil
		return s.listShare(ctx)
	default:
		l.byID = make(map[string]*filesharepb.Version, len(resp.Versions))
		for _, v := range resp.Versions {
			l.byID[v.Id] = v
		}
		l.fullAt = s.now()
		l.gen++
		l.fulls++
		l.rebuild, l.changed = true, l.changed[:0]
	}
	l.site, l.cursor = resp.Site, resp.Cursor
	return s.listed(), resp.Site, nil
}

// listed returns the versions held, sorted by id. Each is converted for
// the planner once, when it comes; the slice is kept, and only what a
// delta changes is replaced in it.
func (s *Syncer) listed() []plan.Version {
	l := &s.list
	if l.sorted != nil && l.sortedAt == l.gen {
		return l.sorted
	}
	if l.sorted == nil || l.rebuild {
		ids := slices.Sorted(maps.Keys(l.byID))
		l.sorted = make([]plan.Version, len(ids))
		l.at = make(map[string]int, len(ids))
		for i, id := range ids {
			l.sorted[i], l.at[id] = toPlan(l.byID[id]), i
		}
	} else {
		added := false
		for _, id := range l.changed {
			v := toPlan(l.byID[id])
			if i, ok := l.at[id]; ok {
				l.sorted[i] = v
				continue
			}
			l.sorted = append(l.sorted, v)
			added = true
		}
		if added {
			slices.SortFunc(l.sorted, func(a, b plan.Version) int { return strings.Compare(string(a.ID), string(b.ID)) })
			for i, v := range l.sorted {
				l.at[string(v.ID)] = i
			}
		}
	}
	l.changed, l.rebuild = l.changed[:0], false
	l.sortedAt = l.gen
	return l.sorted
}

// resolve returns plan.Resolve of the versions held: Resolve depends only
// on the set, so a round in which nothing changed at the site (a local
// change woke it) reuses the last one. The caller may change the View's
// Files only (filterView): it gets a copy of that map.
func (s *Syncer) resolve(versions []plan.Version) plan.View {
	l := &s.list
	if !l.resolved || l.viewAt != l.gen {
		l.view, l.viewAt, l.resolved = plan.Resolve(versions), l.gen, true
	}
	v := l.view
	v.Files = maps.Clone(v.Files)
	return v
}
