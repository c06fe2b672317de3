package plan_test

import (
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// ver makes a stable version of path with content (a tombstone if content
// is "-") written by origin at wall time wall on top of parents.
func ver(origin string, wall int64, path, content string, parents ...plan.Version) plan.Version {
	f := fnv.New32a()
	f.Write([]byte(path))
	h := plan.HLC{Wall: wall, Logical: f.Sum32() % 1000} // ids unique per (origin, wall, path)
	v := plan.Version{ID: plan.NewVersionID(origin, h), Path: path, HLC: h, Origin: origin, Stable: true}
	for _, p := range parents {
		v.Parents = append(v.Parents, p.ID)
	}
	if content == "-" {
		v.Deleted = true
		return v
	}
	v.Chunks = []plan.Chunk{{Hash: sha256.Sum256([]byte(content)), Size: uint32(len(content))}}
	v.Content = plan.ContentOf(v.Chunks)
	v.Size = int64(len(content))
	return v
}

func keep(v plan.Version, kept ...plan.Version) plan.Version {
	for _, k := range kept {
		v.Kept = append(v.Kept, k.ID)
	}
	return v
}

func unstable(v plan.Version) plan.Version { v.Stable = false; return v }

func inCommit(c string, n int, vs ...*plan.Version) {
	for _, v := range vs {
		v.Commit, v.CommitFiles = c, n
	}
}

func ids(vs ...plan.Version) []plan.VersionID {
	var out []plan.VersionID
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

// shown is Files as path -> id, for comparing.
func shown(v plan.View) map[string]plan.VersionID {
	out := map[string]plan.VersionID{}
	for p, f := range v.Files {
		if f.Path != p {
			panic(fmt.Sprintf("Files[%q].Path = %q", p, f.Path))
		}
		out[p] = f.ID
	}
	return out
}

func TestResolve(t *testing.T) {
	v1 := ver("a", 1, "f.txt", "one")
	v2 := ver("a", 2, "f.txt", "two", v1)
	v3 := ver("b", 3, "f.txt", "three", v2)
	ea := ver("a", 4, "f.txt", "edit-a", v1) // concurrent with eb
	eb := ver("b", 5, "f.txt", "edit-b", v1)
	same := ver("a", 4, "f.txt", "edit-b", v1) // same bytes as eb
	del := ver("a", 6, "f.txt", "-", v1)
	copyA := plan.ConflictName("f.txt", ea.ID)
	after := keep(ver("c", 7, "f.txt", "after", eb, ea), ea) // saw the copy, kept it
	merged := ver("c", 7, "f.txt", "after", eb, ea)          // superseded both, kept nothing
	copyEdit := ver("c", 8, copyA, "copy edited", ea)        // the user edited the copy
	copyDel := ver("c", 8, copyA, "-", ea)                   // ... or deleted it
	stranger := ver("c", 9, copyA, "unrelated")              // written at the copy path, never saw it
	ce1 := ver("a", 10, copyA, "copy-1", ea)                 // two edits of the copy
	ce2 := ver("b", 11, copyA, "copy-2", ea)                 //
	orphan := ver("b", 3, "f.txt", "orphan", ver("x", 2, "f.txt", "never seen"))
	orphanParent := ver("b", 3, "f.txt", "p", v2)           // v2 not given below
	orphanParent2 := unstable(orphanParent)                 // known, not stable
	orphanChild := ver("b", 4, "f.txt", "c", orphanParent2) // stable, its parent known
	mid := unstable(ver("a", 2, "f.txt", "mid", v1))
	top := ver("a", 3, "f.txt", "top", mid)
	ck1, ck2 := ver("a", 2, "ck/x", "x"), ver("a", 3, "ck/DONE", "m")
	inCommit("ck@1", 2, &ck1, &ck2)
	ck3 := ck2
	ck3.CommitFiles = 3

	for _, tc := range []struct {
		name      string
		in        []plan.Version
		files     map[string]plan.VersionID
		heads     map[string]plan.Heads
		conflicts []plan.Conflict
		pending   []plan.Pending
	}{
		{
			name:  "linear history",
			in:    []plan.Version{v1, v2, v3},
			files: map[string]plan.VersionID{"f.txt": v3.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(v3)}},
		},
		{
			name:      "two concurrent edits: the later wins, the other is a copy",
			in:        []plan.Version{v1, ea, eb},
			files:     map[string]plan.VersionID{"f.txt": eb.ID, copyA: ea.ID},
			heads:     map[string]plan.Heads{"f.txt": {Parents: ids(eb, ea), Kept: ids(ea)}, copyA: {Parents: ids(ea)}},
			conflicts: []plan.Conflict{{Path: "f.txt", Copy: copyA, Winner: eb.ID, Loser: ea.ID, Kind: plan.KindEdit}},
		},
		{
			name:  "concurrent edits with equal bytes: merged, no copy",
			in:    []plan.Version{v1, same, eb},
			files: map[string]plan.VersionID{"f.txt": eb.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(eb, same)}},
		},
		{
			name:      "delete against edit: the edit wins though older",
			in:        []plan.Version{v1, eb, del},
			files:     map[string]plan.VersionID{"f.txt": eb.ID},
			heads:     map[string]plan.Heads{"f.txt": {Parents: ids(eb, del)}},
			conflicts: []plan.Conflict{{Path: "f.txt", Winner: eb.ID, Loser: del.ID, Kind: plan.KindDelete}},
		},
		{
			name:  "deleted: no file, heads still name the tombstone",
			in:    []plan.Version{v1, del},
			files: map[string]plan.VersionID{},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(del)}},
		},
		{
			name:  "kept copy stays shown after a merge",
			in:    []plan.Version{v1, ea, eb, after},
			files: map[string]plan.VersionID{"f.txt": after.ID, copyA: ea.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(after)}, copyA: {Parents: ids(ea)}},
		},
		{
			name:  "a merge that kept nothing drops the copy",
			in:    []plan.Version{v1, ea, eb, merged},
			files: map[string]plan.VersionID{"f.txt": merged.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(merged)}},
		},
		{
			name:  "an edit of the copy supersedes it there",
			in:    []plan.Version{v1, ea, eb, after, copyEdit},
			files: map[string]plan.VersionID{"f.txt": after.ID, copyA: copyEdit.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(after)}, copyA: {Parents: ids(copyEdit)}},
		},
		{
			name:      "a delete of the copy removes it",
			in:        []plan.Version{v1, ea, eb, copyDel},
			files:     map[string]plan.VersionID{"f.txt": eb.ID},
			heads:     map[string]plan.Heads{"f.txt": {Parents: ids(eb, ea), Kept: ids(ea)}, copyA: {Parents: ids(copyDel)}},
			conflicts: []plan.Conflict{{Path: "f.txt", Copy: copyA, Winner: eb.ID, Loser: ea.ID, Kind: plan.KindEdit}},
		},
		{
			name: "two edits of a copy: the loser's copy sits next to the original, not nested",
			in:   []plan.Version{v1, ea, eb, ce1, ce2},
			files: map[string]plan.VersionID{"f.txt": eb.ID, copyA: ce2.ID,
				plan.ConflictName("f.txt", ce1.ID): ce1.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(eb, ea), Kept: ids(ea)},
				copyA: {Parents: ids(ce2, ce1), Kept: ids(ce1)}, plan.ConflictName("f.txt", ce1.ID): {Parents: ids(ce1)}},
			conflicts: []plan.Conflict{
				{Path: copyA, Copy: plan.ConflictName("f.txt", ce1.ID), Winner: ce2.ID, Loser: ce1.ID, Kind: plan.KindEdit},
				{Path: "f.txt", Copy: copyA, Winner: eb.ID, Loser: ea.ID, Kind: plan.KindEdit},
			},
		},
		{
			name: "a file written at a copy path without seeing the copy loses to it",
			in:   []plan.Version{v1, ea, eb, stranger},
			files: map[string]plan.VersionID{"f.txt": eb.ID, copyA: ea.ID,
				plan.ConflictName(copyA, stranger.ID): stranger.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(eb, ea), Kept: ids(ea)},
				copyA: {Parents: ids(ea, stranger), Kept: ids(stranger)}, plan.ConflictName(copyA, stranger.ID): {Parents: ids(stranger)}},
			conflicts: []plan.Conflict{
				{Path: copyA, Copy: plan.ConflictName(copyA, stranger.ID), Winner: ea.ID, Loser: stranger.ID, Kind: plan.KindEdit},
				{Path: "f.txt", Copy: copyA, Winner: eb.ID, Loser: ea.ID, Kind: plan.KindEdit},
			},
		},
		{
			name:    "unknown parent: pending",
			in:      []plan.Version{v1, orphan},
			files:   map[string]plan.VersionID{"f.txt": v1.ID},
			heads:   map[string]plan.Heads{"f.txt": {Parents: ids(v1)}},
			pending: []plan.Pending{{ID: orphan.ID, Path: "f.txt", Reason: plan.ReasonParent}},
		},
		{
			name:    "a parent's parent unknown: pending too (else the grandparent's siblings look concurrent)",
			in:      []plan.Version{v1, orphanChild, orphanParent2},
			files:   map[string]plan.VersionID{"f.txt": v1.ID},
			heads:   map[string]plan.Heads{"f.txt": {Parents: ids(v1)}},
			pending: []plan.Pending{{ID: orphanChild.ID, Path: "f.txt", Reason: plan.ReasonParent}},
		},
		{
			name:  "unstable: not shown",
			in:    []plan.Version{v1, unstable(v2)},
			files: map[string]plan.VersionID{"f.txt": v1.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(v1)}},
		},
		{
			name:  "ancestry runs through unstable versions",
			in:    []plan.Version{v1, mid, top},
			files: map[string]plan.VersionID{"f.txt": top.ID},
			heads: map[string]plan.Heads{"f.txt": {Parents: ids(top)}},
		},
		{
			name:  "complete commit: shown together",
			in:    []plan.Version{ck1, ck2},
			files: map[string]plan.VersionID{"ck/x": ck1.ID, "ck/DONE": ck2.ID},
			heads: map[string]plan.Heads{"ck/x": {Parents: ids(ck1)}, "ck/DONE": {Parents: ids(ck2)}},
		},
		{
			name:    "commit with an unstable member: none shown",
			in:      []plan.Version{ck1, unstable(ck2)},
			files:   map[string]plan.VersionID{},
			heads:   map[string]plan.Heads{},
			pending: []plan.Pending{{ID: ck1.ID, Path: "ck/x", Reason: plan.ReasonCommit}},
		},
		{
			name:  "commit with a member not known yet: none shown",
			in:    []plan.Version{ck1, ck3},
			files: map[string]plan.VersionID{},
			heads: map[string]plan.Heads{},
			pending: []plan.Pending{{ID: ck3.ID, Path: "ck/DONE", Reason: plan.ReasonCommit},
				{ID: ck1.ID, Path: "ck/x", Reason: plan.ReasonCommit}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := plan.Resolve(tc.in)
			if got := shown(v); !reflect.DeepEqual(got, tc.files) {
				t.Errorf("files:\n got %v\nwant %v", got, tc.files)
			}
			if !reflect.DeepEqual(v.Heads, tc.heads) {
				t.Errorf("heads:\n got %v\nwant %v", v.Heads, tc.heads)
			}
			if !reflect.DeepEqual(v.Conflicts, tc.conflicts) {
				t.Errorf("conflicts:\n got %v\nwant %v", v.Conflicts, tc.conflicts)
			}
			if !reflect.DeepEqual(v.Pending, tc.pending) {
				t.Errorf("pending:\n got %v\nwant %v", v.Pending, tc.pending)
			}
			for p, f := range v.Files {
				if f.Deleted {
					t.Errorf("Files[%q] is a tombstone", p)
				}
			}
		})
	}
}

// TestResolveCopyContent: a copy shows the loser's bytes under the copy's
// name, with the loser's id.
func TestResolveCopyContent(t *testing.T) {
	v1 := ver("a", 1, "f.txt", "one")
	ea, eb := ver("a", 4, "f.txt", "edit-a", v1), ver("b", 5, "f.txt", "edit-b", v1)
	c := plan.Resolve([]plan.Version{v1, ea, eb}).Files[plan.ConflictName("f.txt", ea.ID)]
	want := ea
	want.Path = plan.ConflictName("f.txt", ea.ID)
	if !reflect.DeepEqual(c, want) {
		t.Errorf("copy = %+v, want %+v", c, want)
	}
}

// TestResolveDeterministic: random histories (concurrent writers, deletes,
// kept copies, commits, unstable and missing versions) resolve the same in
// any order, and the input is not modified.
func TestResolveDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	paths := []string{"a", "b.txt", "d/c"}
	for iter := range 300 {
		var vs []plan.Version
		for i := range 5 + rng.IntN(30) {
			p := paths[rng.IntN(len(paths))]
			var parents []plan.Version
			for _, o := range vs {
				if o.Path == p && rng.IntN(3) == 0 {
					parents = append(parents, o)
				}
			}
			content := fmt.Sprint(rng.IntN(4))
			if rng.IntN(5) == 0 {
				content = "-"
			}
			v := ver(fmt.Sprint("o", rng.IntN(3)), int64(rng.IntN(i+1)), p, content, parents...)
			v.ID = plan.NewVersionID(fmt.Sprint("o", i), v.HLC) // unique
			if len(parents) > 1 && rng.IntN(2) == 0 {
				v = keep(v, parents[1:]...)
			}
			v.Stable = rng.IntN(6) != 0
			if rng.IntN(8) == 0 {
				inCommit(fmt.Sprint("c", rng.IntN(2)), 2, &v)
			}
			vs = append(vs, v)
		}
		if rng.IntN(3) == 0 { // a site that has not got everything yet
			vs = slices.Delete(vs, 0, 1)
		}
		want := plan.Resolve(vs)
		orig := slices.Clone(vs)
		for range 4 {
			rng.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
			if got := plan.Resolve(vs); !reflect.DeepEqual(got, want) {
				t.Fatalf("iteration %d: Resolve depends on the input order:\n%+v\nvs\n%+v", iter, got, want)
			}
		}
		slices.SortFunc(vs, func(a, b plan.Version) int {
			return slices.Index(ids(orig...), a.ID) - slices.Index(ids(orig...), b.ID)
		})
		if !reflect.DeepEqual(vs, orig) {
			t.Fatalf("iteration %d: Resolve modified its input", iter)
		}
	}
}

// TestResolvePruned: a pruned version still carries its descendants'
// ancestry, and is never shown, even where it looks like a head because
// its successor has not arrived.
func TestResolvePruned(t *testing.T) {
	v1 := ver("us", 1, "a", "one")
	v2 := ver("us", 2, "a", "two", v1)
	v1.Pruned = true
	view := plan.Resolve([]plan.Version{v1, v2})
	if got := view.Files["a"].ID; got != v2.ID || len(view.Conflicts) != 0 {
		t.Fatalf("shows %s with conflicts %v, want %s alone", got, view.Conflicts, v2.ID)
	}
	view = plan.Resolve([]plan.Version{v1})
	if _, ok := view.Files["a"]; ok {
		t.Fatal("a pruned version is shown")
	}
	if len(view.Pending) != 1 || view.Pending[0].Reason != plan.ReasonPruned {
		t.Fatalf("pending %v, want the pruned version", view.Pending)
	}
}
