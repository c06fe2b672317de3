package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// States of a file in a Status.
const (
	StateSynced      = "synced"      // the local file is the share's version
	StateLocal       = "local"       // changed here, not published yet (or not settled)
	StateUploading   = "uploading"   // being published
	StatePending     = "pending"     // published, not stable yet
	StateDownloading = "downloading" // being fetched
	StateRemote      = "remote"      // a version to fetch, not started
	StateWaiting     = "waiting"     // a version elsewhere, not stable (or its chunks not here) yet
	StateRefused     = "refused"     // a path of the share not materialized here
)

// Status is what a folder's sync looks like: what the running process
// last wrote (state, transfers, mass delete) and, when read through
// Syncer.Status, per file from the site's List.
type Status struct {
	Folder     string           `json:"folder"`
	Share      string           `json:"share"`
	Site       string           `json:"site,omitempty"`
	State      string           `json:"state"` // idle, syncing, mass-delete, error, stopped
	Error      string           `json:"error,omitempty"`
	Updated    time.Time        `json:"updated"`
	MassDelete *plan.MassDelete `json:"mass_delete,omitempty"`
	Transfers  []Transfer       `json:"transfers,omitempty"`
	Refused    []string         `json:"refused,omitempty"`
	Stats      Stats            `json:"stats"`
	Files      []FileStatus     `json:"files,omitempty"`
	Conflicts  []plan.Conflict  `json:"conflicts,omitempty"`
	// Running says a stabsync run holds the folder.
	Running bool `json:"running"`
}

// FileStatus is one path's state.
type FileStatus struct {
	Path        string    `json:"path"`
	State       string    `json:"state"`
	Version     string    `json:"version,omitempty"`
	Size        int64     `json:"size"`
	Stable      bool      `json:"stable"`
	PersistedAt []string  `json:"persisted_at,omitempty"`
	Transfer    *Transfer `json:"transfer,omitempty"`
	Reason      string    `json:"reason,omitempty"`
}

func (s *Syncer) setState(state, msg string) {
	s.mu.Lock()
	s.mu.status.State, s.mu.status.Error = state, msg
	s.mu.Unlock()
	s.saveStatus(true)
}

func (s *Syncer) setMassDelete(m *plan.MassDelete) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.status.MassDelete = m
}

func (s *Syncer) startTransfer(t Transfer) {
	s.mu.Lock()
	s.mu.transfers[t.Path] = t
	s.mu.Unlock()
	s.progress.Started(t)
	s.saveStatus(true)
}

func (s *Syncer) advanceTransfer(t Transfer) {
	s.mu.Lock()
	s.mu.transfers[t.Path] = t
	s.mu.Unlock()
	s.progress.Advanced(t)
	s.saveStatus(false)
}

func (s *Syncer) finishTransfer(t Transfer, err error) {
	s.mu.Lock()
	delete(s.mu.transfers, t.Path)
	s.mu.Unlock()
	s.progress.Finished(t, err)
	s.saveStatus(true)
}

// statusEvery bounds how often transfers rewrite the status file.
const statusEvery = 250 * time.Millisecond

// saveStatus writes the status file (at most every statusEvery unless
// force). Uploads call it from their goroutines: saveMu serialises the
// writes, so that an older snapshot never replaces a newer one.
func (s *Syncer) saveStatus(force bool) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	now := s.now()
	if !force && now.Sub(s.lastSaveAt) < statusEvery {
		return
	}
	s.lastSaveAt = now
	s.mu.Lock()
	st := s.mu.status
	st.Folder, st.Share, st.Updated, st.Running = s.folder, s.cfg.Share, now, true
	st.Transfers = slices.SortedFunc(maps.Values(s.mu.transfers), func(a, b Transfer) int { return cmpStr(a.Path, b.Path) })
	s.mu.Unlock()
	st.Stats = s.Stats()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return
	}
	if err := writeAtomic(s.root, path.Join(safepath.StateDir, statusFile), b); err != nil {
		s.log.Debug("status", "error", err)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeStatus records the end of a round.
func (s *Syncer) writeStatus(site string, view plan.View) {
	s.mu.Lock()
	s.mu.status.Site = site
	switch {
	case s.mu.status.MassDelete != nil:
		s.mu.status.State = "mass-delete"
		s.mu.status.Error = s.mu.status.MassDelete.Error() + ": not syncing; restore the files (stabsync restore --missing fetches them from the share), or run with --allow-mass-delete to propagate the deletes"
	default:
		s.mu.status.State, s.mu.status.Error = "idle", ""
	}
	s.mu.status.Conflicts = view.Conflicts
	s.mu.Unlock()
	s.saveStatus(true)
}

// ReadStatus returns what the running process last wrote to the folder's
// status file (no Files): zero with ok false when there is none.
func (s *Syncer) readStatusFile() (Status, bool) {
	b, err := s.root.ReadFile(path.Join(safepath.StateDir, statusFile))
	if err != nil {
		return Status{}, false
	}
	var st Status
	if json.Unmarshal(b, &st) != nil {
		return Status{}, false
	}
	return st, true
}

// running says whether a Run holds the folder's lock.
func (s *Syncer) running() bool {
	s.mu.Lock()
	if s.mu.running {
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	f, err := s.lock()
	if err != nil {
		return errors.Is(err, ErrLocked)
	}
	f.Close()
	return false
}

// Status lists every path of the share and of the folder with its state:
// from the site's List, the index, a stat of each local file, and the
// transfers and mass-delete state the running process wrote (when one
// runs).
func (s *Syncer) Status(ctx context.Context) (Status, error) {
	st, _ := s.readStatusFile()
	st.Running = s.running()
	if !st.Running {
		st.Transfers = nil
		if st.State != "mass-delete" {
			st.State = "stopped"
		}
	}
	st.Folder, st.Share = s.folder, s.cfg.Share
	pbs, site, err := s.r.list(ctx, "")
	if err != nil {
		return st, s.r.explain("list share "+s.cfg.Share, err)
	}
	st.Site = site
	versions := make([]plan.Version, len(pbs))
	byID := map[plan.VersionID]*filesharepb.Version{}
	for i, v := range pbs {
		versions[i] = toPlan(v)
		byID[plan.VersionID(v.Id)] = v
	}
	view := plan.Resolve(versions)
	st.Conflicts = view.Conflicts
	transfers := map[string]Transfer{}
	for _, t := range st.Transfers {
		transfers[t.Path] = t
	}
	s.runMu.Lock()
	base := maps.Clone(s.ix.Base)
	if ix, err := loadIndex(s.root); err == nil {
		base = ix.Base // the running process's, newer
	}
	s.runMu.Unlock()
	paths := map[string]bool{}
	for p := range view.Files {
		paths[p] = true
	}
	for p := range base {
		paths[p] = true
	}
	for _, p := range view.Pending {
		if safepath.Check(p.Path) == nil {
			paths[p.Path] = true
		}
	}
	ig := loadIgnorer(s.root)
	_ = fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		if ig.ignored(p, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			paths[p] = true
		}
		return nil
	})
	pendingAt := map[string]plan.Pending{}
	for _, p := range view.Pending {
		pendingAt[p.Path] = p
	}
	for _, v := range versions {
		if !v.Stable && safepath.Check(v.Path) == nil {
			if b, ok := base[v.Path]; !ok || b.Version != v.ID {
				pendingAt[v.Path] = plan.Pending{ID: v.ID, Path: v.Path, Reason: "not stable yet"}
				paths[v.Path] = true
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		fsx := FileStatus{Path: p}
		l, ok, _ := s.statLocal(p)
		b, hasB := base[p]
		v, hasV := view.Files[p]
		if hasV && v.Deleted {
			hasV = false
		}
		if pv := byID[b.Version]; hasB && pv != nil {
			fsx.Version, fsx.Stable, fsx.PersistedAt, fsx.Size = pv.Id, pv.Stable, pv.PersistedAt, pv.Size
		}
		inSync := hasB && ok && l.Size == b.Size && l.MTime == b.MTime && l.Mode == b.Mode
		switch t, busy := transfers[p]; {
		case busy && t.Dir == Upload:
			fsx.State, fsx.Transfer = StateUploading, &t
		case busy:
			fsx.State, fsx.Transfer = StateDownloading, &t
		case safepath.Check(p) != nil:
			fsx.State, fsx.Reason = StateRefused, safepath.Check(p).Error()
		case inSync && hasV && v.ID == b.Version:
			fsx.State = StateSynced
		case inSync && byID[b.Version] != nil && !byID[b.Version].Stable:
			fsx.State = StatePending
		case hasV && (!hasB || v.ID != b.Version) && (!ok || inSync):
			fsx.State, fsx.Version, fsx.Size, fsx.Stable = StateRemote, string(v.ID), v.Size, v.Stable
			if pv := byID[v.ID]; pv != nil {
				fsx.PersistedAt = pv.PersistedAt
			}
		case ok && !inSync:
			fsx.State, fsx.Size = StateLocal, l.Size
		case inSync:
			fsx.State = StateSynced
		default:
			if pp, isPending := pendingAt[p]; isPending {
				fsx.State, fsx.Version, fsx.Reason = StateWaiting, string(pp.ID), pp.Reason
				if pv := byID[pp.ID]; pv != nil { // where it is persisted so far
					fsx.Size, fsx.PersistedAt = pv.Size, pv.PersistedAt
				}
			} else {
				continue // deleted everywhere
			}
		}
		if pp, isPending := pendingAt[p]; isPending && fsx.State == StateSynced {
			fsx.State, fsx.Reason = StateWaiting, fmt.Sprintf("version %s elsewhere: %s", pp.ID, pp.Reason)
		}
		st.Files = append(st.Files, fsx)
	}
	return st, nil
}

// Stopped reports whether the running stabsync stopped syncing the folder:
// for a mass delete, or on an error (Error says which).
func (st Status) Stopped() bool { return st.State == "mass-delete" || st.State == "error" }

// InSync reports whether the folder and its share agree: every file synced
// (paths the folder does not materialize aside) and not Stopped. It also
// returns the files that are not, for a caller to say what it waits for.
func (st Status) InSync() (bool, []FileStatus) {
	var out []FileStatus
	for _, f := range st.Files {
		if f.State != StateSynced && f.State != StateRefused {
			out = append(out, f)
		}
	}
	return len(out) == 0 && !st.Stopped(), out
}
