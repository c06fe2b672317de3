package plan

import (
	"bytes"
	"cmp"
	"slices"
)

// View is what a share shows, as Resolve computes it from the versions a
// site knows.
type View struct {
	// Files: per shown path, the version shown there (never a tombstone). A conflict
	// copy is the losing version with Path set to the copy's name (its ID unchanged).
	Files map[string]Version
	// Heads: per path that has versions (shown, deleted, or a conflict copy path), what a writer
	// at that path must name: Parents (current head ids, the shown/winning one first) and Kept.
	Heads     map[string]Heads
	Conflicts []Conflict
	// Pending: Stable versions not shown yet, with why (unknown parent, incomplete commit).
	Pending []Pending

	// eligible holds the ids of every version Resolve could show (stable,
	// parents known, commit complete), shown or superseded. Decide uses it
	// to tell "my base was superseded" from "my base is not here yet". Nil
	// in a View built by hand: then every id counts as eligible.
	eligible map[VersionID]bool
	// deleted holds, per path whose winner is a tombstone, that tombstone
	// (what an ActRemove names).
	deleted map[string]Version
}

// Eligible reports whether Resolve found version id showable: stable, its
// parents known and its commit complete (it may be shown, or superseded by
// a later one). For a View not made by Resolve it reports true.
func (v View) Eligible(id VersionID) bool {
	return v.eligible == nil || v.eligible[id]
}

// Heads is what a writer at a path names: Parents, the current heads (the
// winner first), and Kept, the losing heads shown as conflict copies.
type Heads struct{ Parents, Kept []VersionID }

// Conflict reports one losing head of Path.
type Conflict struct {
	Path   string    `json:"path"`
	Copy   string    `json:"copy"` // "" for Kind "delete"
	Winner VersionID `json:"winner"`
	Loser  VersionID `json:"loser"`
	Kind   string    `json:"kind"` // "edit" (two edits: loser shown at Copy) or "delete" (delete against edit: the edit won)
}

// Conflict kinds.
const (
	KindEdit   = "edit"
	KindDelete = "delete"
)

// Pending is a Stable version that is not shown yet, and why.
type Pending struct {
	ID           VersionID
	Path, Reason string
}

// Pending reasons.
const (
	ReasonParent = "waiting for parent"
	ReasonCommit = "incomplete commit"
	// ReasonPruned: history retention pruned it where its successor is
	// known; here the successor has not arrived yet.
	ReasonPruned = "pruned by history retention"
)

// maxCopyRounds bounds the rounds Resolve spends placing conflict copies of
// conflict copies. Real histories settle in two or three; only forged ids
// (a path naming the tag of a version written after it) could need more.
const maxCopyRounds = 16

// Resolve computes the view of a share from every version a site knows for
// it, stable or not. The result depends only on the set of versions, not
// on their order: every site and client given the same set computes the
// same view. See the package documentation for the rules.
func Resolve(versions []Version) View {
	known := make(map[VersionID]*Version, len(versions))
	for i := range versions {
		v := &versions[i]
		if o, ok := known[v.ID]; !ok || preferRecord(v, o) {
			known[v.ID] = v
		}
	}

	// Which versions may be shown.
	waiting := missingAncestors(known)
	groups := map[string][]*Version{}
	for _, v := range known {
		if v.Commit != "" {
			groups[v.Commit] = append(groups[v.Commit], v)
		}
	}
	complete := map[string]bool{}
	for c, vs := range groups {
		need := 0
		ok := true
		for _, v := range vs {
			need = max(need, v.CommitFiles)
			ok = ok && v.Stable && !waiting[v.ID]
		}
		complete[c] = ok && len(vs) >= need
	}
	view := View{
		Files:    map[string]Version{},
		Heads:    map[string]Heads{},
		eligible: map[VersionID]bool{},
		deleted:  map[string]Version{},
	}
	byPath := map[string][]*Version{}
	for id, v := range known {
		switch {
		case !v.Stable:
		case v.Pruned:
			view.Pending = append(view.Pending, Pending{ID: id, Path: v.Path, Reason: ReasonPruned})
		case waiting[id]:
			view.Pending = append(view.Pending, Pending{ID: id, Path: v.Path, Reason: ReasonParent})
		case v.Commit != "" && !complete[v.Commit]:
			view.Pending = append(view.Pending, Pending{ID: id, Path: v.Path, Reason: ReasonCommit})
		default:
			view.eligible[id] = true
			byPath[v.Path] = append(byPath[v.Path], v)
		}
	}
	slices.SortFunc(view.Pending, func(a, b Pending) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.ID, b.ID))
	})

	// Resolve every path; a path's result depends only on the versions
	// stored there and the conflict copy placed there (virt), so after the
	// first round only paths whose copy changed are resolved again.
	r := resolver{known: known, eligible: view.eligible}
	results := map[string]*pathResult{}
	virt := map[string]VersionID{}
	dirty := sortedKeys(byPath)
	for round := 0; len(dirty) > 0 && round < maxCopyRounds; round++ {
		for _, p := range dirty {
			var cv *Version
			if id, ok := virt[p]; ok {
				c := *known[id]
				c.Path = p
				cv = &c
			}
			if res := r.resolvePath(p, byPath[p], cv); res != nil {
				results[p] = res
			} else {
				delete(results, p)
			}
		}
		next := map[string]VersionID{}
		for _, res := range results {
			for _, c := range res.copies {
				if old, ok := next[c.path]; !ok || c.loser.ID > old {
					next[c.path] = c.loser.ID
				}
			}
		}
		dirty = dirty[:0]
		for p, id := range next {
			if old, ok := virt[p]; !ok || old != id {
				dirty = append(dirty, p)
			}
		}
		for p := range virt {
			if _, ok := next[p]; !ok {
				dirty = append(dirty, p)
			}
		}
		slices.Sort(dirty)
		virt = next
	}

	for p, res := range results {
		w := res.heads[0]
		h := Heads{}
		for _, v := range res.heads {
			h.Parents = append(h.Parents, v.ID)
		}
		for _, c := range res.copies {
			if c.head {
				h.Kept = append(h.Kept, c.loser.ID)
			}
		}
		view.Heads[p] = h
		if w.Deleted {
			view.deleted[p] = *w
		} else {
			view.Files[p] = *w
		}
		view.Conflicts = append(view.Conflicts, res.conflicts...)
	}
	slices.SortFunc(view.Conflicts, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Loser, b.Loser))
	})
	return view
}

// missingAncestors is the set of known versions with an ancestor that is
// not known: a parent, or a parent's parent, not arrived yet. Without it a
// site cannot tell which older versions such a version supersedes.
func missingAncestors(known map[VersionID]*Version) map[VersionID]bool {
	missing := map[VersionID]bool{}
	children := map[VersionID][]VersionID{}
	var queue []VersionID
	for id, v := range known {
		for _, p := range v.Parents {
			if known[p] == nil {
				if !missing[id] {
					missing[id] = true
					queue = append(queue, id)
				}
			} else {
				children[p] = append(children[p], id)
			}
		}
	}
	// Down to every descendant: a fixpoint, whatever the order.
	for len(queue) > 0 {
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range children[id] {
			if !missing[c] {
				missing[c] = true
				queue = append(queue, c)
			}
		}
	}
	return missing
}

// preferRecord picks between two records with one id (a site that lists a
// version twice): the stable one, else a fixed order, so the choice does
// not depend on the order of the input.
func preferRecord(a, b *Version) bool {
	if a.Stable != b.Stable {
		return a.Stable
	}
	return cmp.Or(cmp.Compare(a.Path, b.Path), bytes.Compare(a.Content[:], b.Content[:])) < 0
}

type resolver struct {
	known    map[VersionID]*Version
	eligible map[VersionID]bool
}

// pathResult is one path resolved: its heads, winner first; the conflict
// copies it places (losing heads, then copies kept by earlier writers); and
// the conflicts among its heads.
type pathResult struct {
	heads     []*Version
	copies    []copyOf
	conflicts []Conflict
}

type copyOf struct {
	loser *Version
	path  string
	head  bool // a losing head (else kept by an earlier writer)
}

// resolvePath resolves path p from the eligible versions stored there and
// the conflict copy placed there (cv, or nil). It returns nil when p has no
// head.
func (r *resolver) resolvePath(p string, stored []*Version, cv *Version) *pathResult {
	cands := stored
	if cv != nil {
		cands = append(slices.Clip(stored), cv)
	}
	anc := r.ancestors(cands)
	var heads []*Version
	for _, v := range cands {
		if !anc[v.ID] {
			heads = append(heads, v)
		}
	}
	if len(heads) == 0 {
		return nil
	}
	slices.SortFunc(heads, func(a, b *Version) int { return -rank(a, b, cv) })
	w := heads[0]
	res := &pathResult{heads: heads}
	seen := map[VersionID]bool{w.ID: true}
	for _, l := range heads[1:] {
		seen[l.ID] = true
		switch {
		case l.Deleted && !w.Deleted:
			res.conflicts = append(res.conflicts, Conflict{Path: p, Winner: w.ID, Loser: l.ID, Kind: KindDelete})
		case l.Deleted, l.Content == w.Content:
			// Two deletes, or the same bytes written twice: nothing to keep.
		default:
			c := ConflictName(p, l.ID)
			if c == p {
				continue // only a forged id can name its own copy's path
			}
			res.copies = append(res.copies, copyOf{loser: l, path: c, head: true})
			res.conflicts = append(res.conflicts, Conflict{Path: p, Copy: c, Winner: w.ID, Loser: l.ID, Kind: KindEdit})
		}
	}
	// Sticky copies: what earlier writers kept stays shown.
	var kept []VersionID
	for _, v := range stored {
		kept = append(kept, v.Kept...)
	}
	slices.Sort(kept)
	for _, k := range slices.Compact(kept) {
		kv := r.known[k]
		if seen[k] || kv == nil || !r.eligible[k] || kv.Deleted {
			continue
		}
		seen[k] = true
		if c := ConflictName(p, k); c != p {
			res.copies = append(res.copies, copyOf{loser: kv, path: c})
		}
	}
	return res
}

// ancestors is the set of ids reachable through Parents from any of vs,
// over every known version.
func (r *resolver) ancestors(vs []*Version) map[VersionID]bool {
	anc := map[VersionID]bool{}
	var stack []VersionID
	for _, v := range vs {
		stack = append(stack, v.Parents...)
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if anc[id] {
			continue
		}
		anc[id] = true
		if v := r.known[id]; v != nil {
			stack = append(stack, v.Parents...)
		}
	}
	return anc
}

// rank orders two heads of a path, greater wins: the conflict copy placed
// at the path (cv) beats a version written there without having seen it;
// then a file beats a tombstone; then the higher HLC, the greater origin,
// the greater id.
func rank(a, b, cv *Version) int {
	if cv != nil && (a == cv) != (b == cv) {
		if a == cv {
			return 1
		}
		return -1
	}
	if a.Deleted != b.Deleted {
		if b.Deleted {
			return 1
		}
		return -1
	}
	if a.HLC != b.HLC {
		if b.HLC.Less(a.HLC) {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.ID, b.ID))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
