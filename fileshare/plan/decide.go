package plan

import (
	"cmp"
	"fmt"
	"slices"
)

// Local is one file of the folder as the client sees it now.
type Local struct {
	Path    string
	Size    int64
	Mode    uint32
	MTime   int64
	Content Hash // valid when Hashed
	Hashed  bool
	Settled bool // unchanged for the settle time: safe to publish
}

// Base is what the client last synced at Path (uploaded or made visible), with the local stat right after.
//
// After an ActTombstone the executor should keep TombstoneBase(Path, id)
// (zero Content) until Decide forgets it with an ActRemove whose Expect is
// nil: it tells Decide that the client deleted the file, so the version it
// deleted is not fetched again while the tombstone is on its way to
// stable. An executor that drops the Base instead is safe too, but shows
// the deleted file again for that while.
type Base struct {
	Path    string
	Version VersionID
	Content Hash
	Size    int64
	MTime   int64
	Mode    uint32
}

// TombstoneBase is the Base the executor records after publishing the
// delete of path as version id.
func TombstoneBase(path string, id VersionID) Base { return Base{Path: path, Version: id} }

// Deleted reports whether b records a delete this client published (see
// TombstoneBase): no real content has the zero Hash.
func (b Base) Deleted() bool { return b.Content == Hash{} }

// Input is everything Decide looks at: the three trees (View = remote,
// Local, Base = last synced) and the folder's settings.
type Input struct {
	View            View
	Local           map[string]Local // the folder's files now (ignored paths already removed by the caller)
	Base            map[string]Base
	FolderMissing   bool // the folder root itself vanished
	Commit          CommitRule
	AllowMassDelete bool
	// Vanishing are synced paths missing from Local for less than the
	// settle time: their deletes wait, as an unsettled write does, so
	// that a folder being emptied (rm -rf, an unmount in progress) is
	// seen whole by the mass-delete guard before any delete leaves.
	Vanishing map[string]bool
}

// ActionKind says what an Action does.
type ActionKind int

// The actions, in the order of the const block (not the order Decide
// returns them in).
const (
	ActHash      ActionKind = iota // compute Content of Local[Path] and decide again
	ActUpload                      // publish the local file at Path with Parents/Kept (Commit: its commit dir, "" if single)
	ActTombstone                   // record the delete of Path with Parents
	ActDownload                    // make Version visible at Path (fetch its chunks, write atomically); Expect = local state decided on
	ActRemove                      // delete the local file at Path (remote tombstone won); Expect as above
	ActAdopt                       // local content already equals Version: record Base only
)

func (k ActionKind) String() string {
	switch k {
	case ActHash:
		return "hash"
	case ActUpload:
		return "upload"
	case ActTombstone:
		return "tombstone"
	case ActDownload:
		return "download"
	case ActRemove:
		return "remove"
	case ActAdopt:
		return "adopt"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one step for the executor.
type Action struct {
	Kind          ActionKind
	Path          string
	Version       Version     // Download/Remove/Adopt: the remote version
	Parents, Kept []VersionID // Upload/Tombstone
	// Commit (Upload and Tombstone): the commit dir when part of a commit;
	// all uploads and tombstones with the same Commit in one Decision are
	// published as one commit.
	Commit string
	// Expect (Download/Remove): the local file the decision was made on,
	// nil if absent; the executor re-checks it right before the rename and
	// skips on mismatch. Adopt: the local file found equal to Version; the
	// executor records Base with its stat, and skips if the file changed.
	Expect *Local
}

// Decision is what Decide asks the executor to do, in order.
type Decision struct {
	Actions    []Action
	MassDelete *MassDelete // non-nil: stop; no Tombstone was emitted
}

// MassDeleteMin is the number of synced files from which the mass-delete
// guard applies: with fewer, deleting most of them is ordinary work.
const MassDeleteMin = 4

// MassDelete reports that Decide stopped because most synced files (or the
// folder itself) vanished, which is far more often an unmounted disk or a
// moved folder than a user's wish.
type MassDelete struct {
	Missing       int  `json:"missing"`
	Total         int  `json:"total"`
	FolderMissing bool `json:"folder_missing"`
}

func (m *MassDelete) Error() string {
	if m.FolderMissing {
		return fmt.Sprintf("plan: the sync folder itself is missing (%d synced files): nothing was synced; "+
			"restore the folder, or allow mass deletes to delete all of them everywhere", m.Total)
	}
	return fmt.Sprintf("plan: %d of %d synced files vanished from the folder: nothing was synced; "+
		"restore them (or fetch them back from the share), or allow mass deletes to delete them everywhere", m.Missing, m.Total)
}

// Decide plans what the client must do to make its folder and the share
// agree, from the three trees in in. It does no IO; the executor runs the
// actions in the order given. See the package documentation for the rules.
func Decide(in Input) Decision {
	if md := massDelete(in); md != nil {
		return Decision{MassDelete: md}
	}
	d := decider{in: in}
	paths := map[string]bool{}
	for p := range in.View.Files {
		paths[p] = true
	}
	for p := range in.Local {
		paths[p] = true
	}
	for p := range in.Base {
		paths[p] = true
	}
	var out []Action
	dirs := map[string]*commitDir{}
	for _, p := range sortedKeys(paths) {
		cd := in.Commit.CommitDir(p)
		a, blocked := d.path(p, cd != "")
		if cd == "" {
			if a != nil {
				out = append(out, *a)
			}
			continue
		}
		c := dirs[cd]
		if c == nil {
			c = &commitDir{}
			dirs[cd] = c
		}
		c.blocked = c.blocked || blocked
		switch {
		case a == nil:
		case p == in.Commit.markerPath(cd):
			c.marker = a
		case a.Kind == ActUpload || a.Kind == ActTombstone:
			c.publish = append(c.publish, *a)
		default:
			out = append(out, *a)
		}
	}
	for _, cd := range sortedKeys(dirs) {
		out = append(out, d.commit(cd, dirs[cd])...)
	}
	slices.SortStableFunc(out, func(a, b Action) int {
		return cmp.Or(cmp.Compare(d.order(a), d.order(b)), cmp.Compare(a.Path, b.Path))
	})
	return Decision{Actions: out}
}

// massDelete applies the guard: it counts the synced files missing locally
// that the share still shows (a local delete about to be published).
func massDelete(in Input) *MassDelete {
	if in.AllowMassDelete {
		return nil
	}
	missing := 0
	total := 0
	for p, b := range in.Base {
		if b.Deleted() {
			continue // a delete already published
		}
		total++
		if _, ok := in.Local[p]; ok {
			continue
		}
		if _, shown := in.View.Files[p]; !shown && in.View.Eligible(b.Version) {
			continue // deleted remotely too: nothing to publish
		}
		missing++
	}
	if in.FolderMissing || total >= MassDeleteMin && 2*missing > total {
		return &MassDelete{Missing: missing, Total: total, FolderMissing: in.FolderMissing}
	}
	return nil
}

type decider struct{ in Input }

// commitDir collects the decisions under one commit directory: the
// marker's own, the publishes waiting for the commit, and whether any
// changed file there cannot be published yet.
type commitDir struct {
	marker  *Action
	publish []Action
	blocked bool
}

// path decides one path on its own. blocked reports a local change that
// cannot be published this round (still being written, or not hashed yet).
// inCommit asks for a hash before any upload.
func (d *decider) path(p string, inCommit bool) (a *Action, blocked bool) {
	in := d.in
	b, hasB := in.Base[p]
	l, hasL := in.Local[p]
	r, hasR := in.View.Files[p]
	if hasB && b.Deleted() { // this client published the delete of p
		switch {
		case !in.View.Eligible(b.Version) && !hasL:
			return nil, false // the delete is on its way
		case !in.View.Eligible(b.Version):
			return upload(p, l, inCommit, []VersionID{b.Version}, nil) // re-created on top of it
		case !hasL && !hasR:
			return d.remove(p, nil), false // done: forget it
		}
		hasB = false // the view has the delete: as if never synced
	}
	// Remote changed: the share shows something other than the base, and
	// the base is one the view could show (not our own upload still on
	// its way to stable, which must not be undone by the older version).
	remoteChanged := hasR
	if hasB {
		remoteChanged = in.View.Eligible(b.Version) && (!hasR || r.ID != b.Version)
	}
	switch {
	case !hasL && !hasB:
		if hasR {
			return download(r, nil), false
		}
		return nil, false
	case !hasL && in.Vanishing[p]: // deleted here, not for the settle time yet
		return nil, true
	case !hasL: // deleted here
		switch {
		case !remoteChanged:
			parents, kept := d.onTop(p)
			return &Action{Kind: ActTombstone, Path: p, Parents: parents, Kept: kept}, false
		case !hasR: // deleted there too: forget the base
			return d.remove(p, nil), false
		default: // delete against edit: record it; the edit wins everywhere
			return &Action{Kind: ActTombstone, Path: p, Parents: []VersionID{b.Version}}, false
		}
	case !hasB: // new here
		if !hasR {
			parents, kept := d.onTop(p)
			return upload(p, l, inCommit, parents, kept)
		}
		if !l.Hashed {
			return hash(l)
		}
		if l.Content == r.Content {
			return &Action{Kind: ActAdopt, Path: p, Version: r, Expect: &l}, false
		}
		return upload(p, l, inCommit, nil, nil) // concurrent with r: a conflict
	}
	statSame := l.Size == b.Size && l.MTime == b.MTime && l.Mode == b.Mode
	changed := !statSame
	if changed {
		if !l.Hashed {
			return hash(l)
		}
		changed = l.Content != b.Content || l.Mode != b.Mode
	}
	switch {
	case !changed && remoteChanged && hasR:
		return download(r, &l), false
	case !changed && remoteChanged:
		return d.remove(p, &l), false
	case !changed && !statSame && hasR && r.ID == b.Version:
		// Touched, same bytes: record the new stat so it is not hashed again.
		return &Action{Kind: ActAdopt, Path: p, Version: r, Expect: &l}, false
	case !changed:
		return nil, false
	case !remoteChanged:
		parents, kept := d.onTop(p)
		return upload(p, l, inCommit, parents, kept)
	case hasR && r.Content == l.Content:
		return &Action{Kind: ActAdopt, Path: p, Version: r, Expect: &l}, false
	default: // both changed: publish on top of the base, concurrent with r
		return upload(p, l, inCommit, []VersionID{b.Version}, nil)
	}
}

// onTop is what a write at p that supersedes what the client has must
// name: the view's heads, or the client's own base while the view cannot
// show it yet.
func (d *decider) onTop(p string) (parents, kept []VersionID) {
	if b, ok := d.in.Base[p]; ok && !d.in.View.Eligible(b.Version) {
		return []VersionID{b.Version}, nil
	}
	h := d.in.View.Heads[p]
	return slices.Clone(h.Parents), slices.Clone(h.Kept)
}

func (d *decider) remove(p string, expect *Local) *Action {
	v, ok := d.in.View.deleted[p]
	if !ok {
		v = Version{Path: p, Deleted: true}
		if h := d.in.View.Heads[p]; len(h.Parents) > 0 {
			v.ID = h.Parents[0]
		}
	}
	return &Action{Kind: ActRemove, Path: p, Version: v, Expect: expect}
}

func download(r Version, expect *Local) *Action {
	return &Action{Kind: ActDownload, Path: r.Path, Version: r, Expect: expect}
}

func hash(l Local) (*Action, bool) {
	if !l.Settled {
		return nil, true
	}
	return &Action{Kind: ActHash, Path: l.Path}, true
}

func upload(p string, l Local, inCommit bool, parents, kept []VersionID) (*Action, bool) {
	if !l.Settled {
		return nil, true
	}
	if inCommit && !l.Hashed {
		return hash(l)
	}
	return &Action{Kind: ActUpload, Path: p, Parents: parents, Kept: kept}, false
}

// commit decides what is published under commit directory dir: nothing
// until its marker is present and settled and every changed file there can
// be published; then every change at once, the marker included (last).
// Without a marker, deletes alone (a directory removed as a whole, or a
// marker removed before a rewrite) are one commit. A remote delete of the
// marker is not applied while files there wait to be published: that
// would strand them; the marker is published again instead, concurrent
// with the delete (which it beats).
func (d *decider) commit(dir string, c *commitDir) []Action {
	m := d.in.Commit.markerPath(dir)
	ml, hasM := d.in.Local[m]
	writes := c.blocked
	for _, a := range c.publish {
		writes = writes || a.Kind == ActUpload
	}
	var out []Action
	var mk *Action // the marker's publish, if any
	remote := false
	switch a := c.marker; {
	case a == nil:
	case a.Kind == ActUpload || a.Kind == ActTombstone:
		mk = a
	case a.Kind == ActRemove && writes:
		if !c.blocked && ml.Settled {
			mk = &Action{Kind: ActUpload, Path: m, Parents: []VersionID{d.in.Base[m].Version}}
		}
	case a.Kind == ActAdopt && !c.blocked && len(c.publish) > 0:
		// Replaced by the marker's upload below.
	default:
		remote = a.Kind == ActDownload || a.Kind == ActRemove
		out = append(out, *a)
	}
	switch {
	case !hasM:
		// Deletes only, and only while nothing is being written there.
		if writes || mk != nil && mk.Kind == ActUpload {
			return out
		}
	case !ml.Settled || c.blocked || remote || mk == nil && len(c.publish) == 0:
		return out
	case mk == nil:
		// Unchanged marker: publish it again, it is the commit's signature.
		parents, kept := d.onTop(m)
		mk = &Action{Kind: ActUpload, Path: m, Parents: parents, Kept: kept}
	}
	pub := c.publish
	if mk != nil {
		pub = append(pub, *mk)
	}
	for _, a := range pub {
		a.Commit = dir
		out = append(out, a)
	}
	return out
}

// order is an action's place in the plan: hashes and adopts, then
// publishes (a commit's marker last), then downloads of new paths (so a
// conflict copy is written before the file it came from is replaced), then
// downloads over existing files, then removes, then commit markers (a
// commit shows its marker only once its files are there).
func (d *decider) order(a Action) int {
	marker := d.in.Commit.isMarker(a.Path)
	switch a.Kind {
	case ActHash:
		return 0
	case ActAdopt:
		return 1
	case ActUpload, ActTombstone:
		if marker {
			return 3
		}
		return 2
	case ActDownload:
		switch {
		case marker:
			return 7
		case a.Expect == nil:
			return 4
		}
		return 5
	case ActRemove:
		return 6
	}
	return 8
}
