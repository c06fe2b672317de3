package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// VersionInfo is one version of a path's history.
type VersionInfo struct {
	ID          string    `json:"id"`
	Path        string    `json:"path"`
	Time        time.Time `json:"time"` // the HLC's wall clock
	Size        int64     `json:"size"`
	Deleted     bool      `json:"deleted,omitempty"`
	Pruned      bool      `json:"pruned,omitempty"` // history retention dropped its content
	Origin      string    `json:"origin"`
	Stable      bool      `json:"stable"`
	PersistedAt []string  `json:"persisted_at,omitempty"`
	Parents     []string  `json:"parents,omitempty"`
	// Current says the share shows this version at the path.
	Current bool `json:"current"`
}

// Versions returns the history of p at the site, oldest first. A path the
// share has no version of is ErrUnknownPath.
func (s *Syncer) Versions(ctx context.Context, p string) ([]VersionInfo, error) {
	if err := safepath.Check(p); err != nil {
		return nil, fmt.Errorf("client: versions %q: %w", p, err)
	}
	pbs, err := s.listPath(ctx, p)
	if err != nil {
		return nil, err
	}
	view := plan.Resolve(toPlanAll(pbs))
	cur := view.Files[p]
	out := make([]VersionInfo, 0, len(pbs))
	for _, v := range pbs {
		out = append(out, VersionInfo{ID: v.Id, Path: v.Path, Time: time.Unix(0, v.HlcWall).UTC(), Size: v.Size, Deleted: v.Deleted, Pruned: v.Pruned,
			Origin: v.Origin, Stable: v.Stable, PersistedAt: v.PersistedAt, Parents: v.Parents, Current: plan.VersionID(v.Id) == cur.ID})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

func (s *Syncer) listPath(ctx context.Context, p string) ([]*filesharepb.Version, error) {
	pbs, _, err := s.r.list(ctx, p)
	if err != nil {
		return nil, s.r.explain("list "+p, err)
	}
	if len(pbs) == 0 {
		return nil, fmt.Errorf("client: %s: share %s has no version of it: %w", p, s.cfg.Share, ErrUnknownPath)
	}
	return pbs, nil
}

func toPlanAll(pbs []*filesharepb.Version) []plan.Version {
	out := make([]plan.Version, len(pbs))
	for i, v := range pbs {
		out[i] = toPlan(v)
	}
	return out
}

// Restore records a new version of p with the content of version id, on
// top of p's current heads: no chunk moves (the site holds them), and the
// run loop then materializes it like any other version. It returns the
// new version's id once the site recorded it.
func (s *Syncer) Restore(ctx context.Context, p, id string) (string, error) {
	if err := safepath.Check(p); err != nil {
		return "", fmt.Errorf("client: restore %q: %w", p, err)
	}
	pbs, err := s.listPath(ctx, p)
	if err != nil {
		return "", err
	}
	var old *filesharepb.Version
	for _, v := range pbs {
		if v.Id == id {
			old = v
		}
	}
	if old == nil {
		return "", fmt.Errorf("client: restore %s: version %s: %w (see stabsync versions %s)", p, id, ErrUnknownVersion, p)
	}
	if old.Deleted {
		return "", fmt.Errorf("client: restore %s: version %s is a delete: nothing to restore", p, id)
	}
	if old.Pruned {
		return "", fmt.Errorf("client: restore %s: version %s was pruned by the share's history retention (keep_versions, keep_seconds): its content is gone", p, id)
	}
	view := plan.Resolve(toPlanAll(pbs))
	h := view.Heads[p]
	fv := &filesharepb.FileVersion{Path: p, Parents: idStrings(h.Parents), Kept: idStrings(h.Kept), Size: old.Size, Mode: old.Mode,
		Mtime: time.Now().UnixNano()}
	for _, c := range old.Chunks {
		fv.Chunks = append(fv.Chunks, &filesharepb.ChunkRef{Hash: c.Hash, Size: c.Size})
	}
	var resp *filesharepb.CommitResponse
	err = s.r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		resp, err = api.Commit(ctx, &filesharepb.CommitRequest{Share: s.cfg.Share, Files: []*filesharepb.FileVersion{fv}, NoWait: true})
		return err
	})
	if err != nil {
		return "", s.r.explain("restore "+p, err)
	}
	return resp.Versions[0].Id, nil
}

// Conflicts returns the share's conflicts as the site's versions resolve.
func (s *Syncer) Conflicts(ctx context.Context) ([]plan.Conflict, error) {
	pbs, _, err := s.r.list(ctx, "")
	if err != nil {
		return nil, s.r.explain("list share "+s.cfg.Share, err)
	}
	return plan.Resolve(toPlanAll(pbs)).Conflicts, nil
}

// ShareInfo returns the share's definition at the site.
func (s *Syncer) ShareInfo(ctx context.Context) (Share, error) {
	sh, err := s.r.getShare(ctx)
	if err != nil {
		return Share{}, s.r.explain("share "+s.cfg.Share, err)
	}
	return shareFromPB(sh), nil
}

// RestoreMissing forgets the local deletes of synced files that are
// missing from the folder and not published (after a mass-delete stop:
// the share still holds them), so that the next round fetches them again
// from the share. It refuses while stabsync run holds the folder. It
// returns the paths it will fetch, sorted.
func (s *Syncer) RestoreMissing() ([]string, error) {
	f, err := s.lock()
	if err != nil {
		return nil, fmt.Errorf("%w: stop stabsync run first, then run it again after this", err)
	}
	defer f.Close()
	s.runMu.Lock()
	defer s.runMu.Unlock()
	var out []string
	for p, b := range s.ix.Base {
		if b.Deleted() {
			continue
		}
		if _, err := s.root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	for _, p := range out {
		delete(s.ix.Base, p)
	}
	slices.Sort(out)
	return out, s.ix.save(s.root)
}
