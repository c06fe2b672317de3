package plan_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// synced is the Local and Base of a file synced at version v, unchanged
// since (stat size/mtime 10, mode 0644).
func synced(v plan.Version) (plan.Local, plan.Base) {
	l := plan.Local{Path: v.Path, Size: v.Size, Mode: 0o644, MTime: 10, Content: v.Content, Hashed: true, Settled: true}
	return l, plan.Base{Path: v.Path, Version: v.ID, Content: v.Content, Size: v.Size, MTime: 10, Mode: 0o644}
}

// edited is l rewritten with content (a new stat), hashed or not.
func edited(l plan.Local, content string, hashed bool) plan.Local {
	v := ver("x", 0, l.Path, content)
	l.Size, l.MTime, l.Content, l.Hashed = v.Size, l.MTime+1, v.Content, hashed
	if !hashed {
		l.Content = plan.Hash{}
	}
	return l
}

func fresh(path, content string, hashed, settled bool) plan.Local {
	l := edited(plan.Local{Path: path, Mode: 0o644, MTime: 50, Settled: settled}, content, hashed)
	return l
}

type tree struct {
	versions []plan.Version
	local    map[string]plan.Local
	base     map[string]plan.Base
}

func (tr tree) input() plan.Input {
	return plan.Input{View: plan.Resolve(tr.versions), Local: tr.local, Base: tr.base,
		Commit: plan.CommitRule{Marker: "DONE", Dirs: "ck/*"}}
}

// brief renders actions as "kind path" with parents, commit and expect.
func brief(as []plan.Action) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString(a.Kind.String() + " " + a.Path)
		if a.Version.ID != "" {
			b.WriteString(" v=" + string(a.Version.ID))
		}
		if len(a.Parents) > 0 {
			b.WriteString(" parents=" + strings.Trim(strings.Join(strs(a.Parents), ","), " "))
		}
		if len(a.Kept) > 0 {
			b.WriteString(" kept=" + strings.Join(strs(a.Kept), ","))
		}
		if a.Commit != "" {
			b.WriteString(" commit=" + a.Commit)
		}
		if a.Kind == plan.ActDownload || a.Kind == plan.ActRemove {
			if a.Expect == nil {
				b.WriteString(" expect=absent")
			} else {
				b.WriteString(" expect=present")
			}
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func strs(ids []plan.VersionID) []string {
	var out []string
	for _, id := range ids {
		out = append(out, string(id))
	}
	return out
}

func TestDecide(t *testing.T) {
	v1 := ver("a", 1, "f", "one")
	v2 := ver("b", 2, "f", "two", v1)
	del := ver("b", 2, "f", "-", v1)
	ea, eb := ver("a", 3, "f", "edit-a", v1), ver("b", 4, "f", "edit-b", v1)
	l1, b1 := synced(v1)
	l2, b2 := synced(v2)
	leb, beb := synced(eb)
	copyA := plan.ConflictName("f", ea.ID)
	lcopy, bcopy := synced(func() plan.Version { v := ea; v.Path = copyA; return v }())
	id := func(v plan.Version) string { return string(v.ID) }
	own := unstable(ver("c", 5, "f", "mine", v1)) // this client's upload, not stable yet
	_, bown := synced(own)
	ownDel := unstable(ver("c", 5, "f", "-", v1)) // this client's delete, not stable yet
	ownDelStable := ownDel
	ownDelStable.Stable = true

	for _, tc := range []struct {
		name string
		tr   tree
		want string
	}{
		{"in sync", tree{[]plan.Version{v1}, map[string]plan.Local{"f": l1}, map[string]plan.Base{"f": b1}}, ""},
		{"new local file", tree{nil, map[string]plan.Local{"f": fresh("f", "x", false, true)}, nil}, "upload f"},
		{"new local file still being written", tree{nil, map[string]plan.Local{"f": fresh("f", "x", true, false)}, nil}, ""},
		{"re-create over a delete names the tombstone",
			tree{[]plan.Version{v1, del}, map[string]plan.Local{"f": fresh("f", "x", false, true)}, nil},
			"upload f parents=" + id(del)},
		{"changed, not hashed: hash", tree{[]plan.Version{v1}, map[string]plan.Local{"f": edited(l1, "new", false)}, map[string]plan.Base{"f": b1}}, "hash f"},
		{"changed, not settled: left alone", tree{[]plan.Version{v1}, map[string]plan.Local{"f": func() plan.Local { l := edited(l1, "new", false); l.Settled = false; return l }()}, map[string]plan.Base{"f": b1}}, ""},
		{"changed: upload on the heads", tree{[]plan.Version{v1}, map[string]plan.Local{"f": edited(l1, "new", true)}, map[string]plan.Base{"f": b1}},
			"upload f parents=" + id(v1)},
		{"changed under a conflict: upload names both heads and keeps the copy",
			tree{[]plan.Version{v1, ea, eb}, map[string]plan.Local{"f": edited(leb, "new", true), copyA: lcopy}, map[string]plan.Base{"f": beb, copyA: bcopy}},
			"upload f parents=" + id(eb) + "," + id(ea) + " kept=" + id(ea)},
		{"touched, same bytes: adopt the new stat", tree{[]plan.Version{v1}, map[string]plan.Local{"f": edited(l1, "one", true)}, map[string]plan.Base{"f": b1}},
			"adopt f v=" + id(v1)},
		{"deleted here: tombstone on the heads", tree{[]plan.Version{v1}, nil, map[string]plan.Base{"f": b1}}, "tombstone f parents=" + id(v1)},
		{"changed there: download over the unchanged file", tree{[]plan.Version{v1, v2}, map[string]plan.Local{"f": l1}, map[string]plan.Base{"f": b1}},
			"download f v=" + id(v2) + " expect=present"},
		{"new there: download", tree{[]plan.Version{v1}, nil, nil}, "download f v=" + id(v1) + " expect=absent"},
		{"deleted there: remove", tree{[]plan.Version{v1, del}, map[string]plan.Local{"f": l1}, map[string]plan.Base{"f": b1}},
			"remove f v=" + id(del) + " expect=present"},
		{"deleted on both sides: forget", tree{[]plan.Version{v1, del}, nil, map[string]plan.Base{"f": b1}},
			"remove f v=" + id(del) + " expect=absent"},
		{"both changed, same bytes: adopt", tree{[]plan.Version{v1, v2}, map[string]plan.Local{"f": edited(l1, "two", true)}, map[string]plan.Base{"f": b1}},
			"adopt f v=" + id(v2)},
		{"both changed: upload on the base, never download over it", tree{[]plan.Version{v1, v2}, map[string]plan.Local{"f": edited(l1, "mine", true)}, map[string]plan.Base{"f": b1}},
			"upload f parents=" + id(v1)},
		{"edited here, deleted there: upload on the base (the edit wins)", tree{[]plan.Version{v1, del}, map[string]plan.Local{"f": edited(l1, "mine", true)}, map[string]plan.Base{"f": b1}},
			"upload f parents=" + id(v1)},
		{"deleted here, edited there: record the delete (the edit wins)", tree{[]plan.Version{v1, v2}, nil, map[string]plan.Base{"f": b1}},
			"tombstone f parents=" + id(v1)},
		{"no base, same bytes there: adopt", tree{[]plan.Version{v1}, map[string]plan.Local{"f": fresh("f", "one", true, true)}, nil}, "adopt f v=" + id(v1)},
		{"no base, not hashed: hash", tree{[]plan.Version{v1}, map[string]plan.Local{"f": fresh("f", "one", false, true)}, nil}, "hash f"},
		{"no base, other bytes: concurrent upload", tree{[]plan.Version{v1}, map[string]plan.Local{"f": fresh("f", "mine", true, true)}, nil}, "upload f"},
		{"own upload not stable yet: the older version is not fetched", tree{[]plan.Version{v1, own}, map[string]plan.Local{"f": func() plan.Local { l, _ := synced(own); return l }()}, map[string]plan.Base{"f": bown}}, ""},
		{"own upload not stable yet, edited again: upload on top of it", tree{[]plan.Version{v1, own}, map[string]plan.Local{"f": func() plan.Local { l, _ := synced(own); return edited(l, "again", true) }()}, map[string]plan.Base{"f": bown}},
			"upload f parents=" + id(own)},
		{"own delete not stable yet: the deleted file is not fetched again", tree{[]plan.Version{v1, ownDel}, nil, map[string]plan.Base{"f": plan.TombstoneBase("f", ownDel.ID)}}, ""},
		{"own delete stable: forget it", tree{[]plan.Version{v1, ownDelStable}, nil, map[string]plan.Base{"f": plan.TombstoneBase("f", ownDel.ID)}},
			"remove f v=" + id(ownDel) + " expect=absent"},
		{"own delete lost to an edit: fetch the edit", tree{[]plan.Version{v1, ownDelStable, v2}, nil, map[string]plan.Base{"f": plan.TombstoneBase("f", ownDel.ID)}},
			"download f v=" + id(v2) + " expect=absent"},
		{"conflict: the copy is written before the file is replaced",
			tree{[]plan.Version{v1, ea, eb}, map[string]plan.Local{"f": l1}, map[string]plan.Base{"f": b1}},
			"download " + copyA + " v=" + id(ea) + " expect=absent; download f v=" + id(eb) + " expect=present"},
		{"order: publishes, new files, replacements, removes",
			tree{[]plan.Version{v1, v2, ver("a", 1, "g", "g1"), ver("a", 1, "h", "h"), ver("b", 2, "h", "-", ver("a", 1, "h", "h"))},
				map[string]plan.Local{"f": l1, "h": func() plan.Local { l, _ := synced(ver("a", 1, "h", "h")); return l }(), "n": fresh("n", "new", false, true)},
				map[string]plan.Base{"f": b1, "h": func() plan.Base { _, b := synced(ver("a", 1, "h", "h")); return b }()}},
			"upload n; download g v=" + id(ver("a", 1, "g", "g1")) + " expect=absent; download f v=" + id(v2) + " expect=present; remove h v=" + id(ver("b", 2, "h", "-")) + " expect=present"},
		{"the other copy of a synced file is an ordinary path", tree{[]plan.Version{v1, v2}, map[string]plan.Local{"f": l2}, map[string]plan.Base{"f": b2}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := plan.Decide(tc.tr.input())
			if d.MassDelete != nil {
				t.Fatalf("mass delete: %v", d.MassDelete)
			}
			if got := brief(d.Actions); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			for _, a := range d.Actions {
				if a.Kind != plan.ActDownload && a.Kind != plan.ActRemove {
					continue
				}
				l, ok := tc.tr.local[a.Path]
				if ok != (a.Expect != nil) || ok && !reflect.DeepEqual(*a.Expect, l) {
					t.Errorf("%v %s: Expect %+v, local %+v", a.Kind, a.Path, a.Expect, l)
				}
			}
		})
	}
}

func TestDecideMassDelete(t *testing.T) {
	var vs []plan.Version
	local, base := map[string]plan.Local{}, map[string]plan.Base{}
	for _, p := range []string{"a", "b", "c", "d"} {
		v := ver("a", 1, p, p)
		vs = append(vs, v)
		local[p], base[p] = synced(v)
	}
	in := plan.Input{View: plan.Resolve(vs), Local: map[string]plan.Local{"a": local["a"]}, Base: base}
	d := plan.Decide(in)
	if d.MassDelete == nil || len(d.Actions) != 0 || *d.MassDelete != (plan.MassDelete{Missing: 3, Total: 4}) {
		t.Fatalf("3 of 4 gone: got %+v", d)
	}
	if msg := d.MassDelete.Error(); !strings.Contains(msg, "3 of 4") || !strings.Contains(msg, "allow mass deletes") {
		t.Errorf("message %q: want the counts and the way out", msg)
	}
	in.AllowMassDelete = true
	if got := brief(plan.Decide(in).Actions); strings.Count(got, "tombstone") != 3 {
		t.Errorf("allowed: got %s, want 3 tombstones", got)
	}
	in.AllowMassDelete = false
	in.Local = map[string]plan.Local{"a": local["a"], "b": local["b"]}
	if d := plan.Decide(in); d.MassDelete != nil || strings.Count(brief(d.Actions), "tombstone") != 2 {
		t.Errorf("half gone is not a mass delete: got %+v", d)
	}
	// Deleted remotely as well: not counted.
	in.Local = map[string]plan.Local{"a": local["a"]}
	in.View = plan.Resolve(append(vs[:1:1], vs[1], vs[2], vs[3], ver("b", 2, "b", "-", vs[1]), ver("b", 2, "c", "-", vs[2])))
	if d := plan.Decide(in); d.MassDelete != nil {
		t.Errorf("deletes from elsewhere counted: %v", d.MassDelete)
	}
	// Fewer than MassDeleteMin files: ordinary work.
	in = plan.Input{View: plan.Resolve(vs[:3]), Local: nil, Base: map[string]plan.Base{"a": base["a"], "b": base["b"], "c": base["c"]}}
	if d := plan.Decide(in); d.MassDelete != nil || len(d.Actions) != 3 {
		t.Errorf("3 files deleted: got %+v", d)
	}
	in.FolderMissing = true
	d = plan.Decide(in)
	if d.MassDelete == nil || !d.MassDelete.FolderMissing || len(d.Actions) != 0 {
		t.Errorf("folder missing: got %+v", d)
	}
	if msg := d.MassDelete.Error(); !strings.Contains(msg, "folder itself is missing") {
		t.Errorf("message %q", msg)
	}
}

func TestDecideCommit(t *testing.T) {
	old := ver("a", 1, "ck/r/DONE", "m0")
	inCommit("ck/r@0", 1, &old)
	lm, bm := synced(old)
	gone := ver("a", 1, "ck/r/gone", "g")
	inCommit("ck/r@0", 2, &old, &gone)
	lgone, bgone := synced(gone)
	settled := func(p, c string) plan.Local { return fresh(p, c, true, true) }
	for _, tc := range []struct {
		name  string
		local map[string]plan.Local
		base  map[string]plan.Base
		want  string
	}{
		{"files without a marker wait", map[string]plan.Local{"ck/r/a": settled("ck/r/a", "a"), "ck/r/b": settled("ck/r/b", "b")}, nil, ""},
		{"marker still being written", map[string]plan.Local{"ck/r/a": settled("ck/r/a", "a"), "ck/r/DONE": fresh("ck/r/DONE", "m", true, false)}, nil, ""},
		{"a file not hashed: hash, publish nothing", map[string]plan.Local{"ck/r/a": fresh("ck/r/a", "a", false, true), "ck/r/DONE": settled("ck/r/DONE", "m")}, nil, "hash ck/r/a"},
		{"a file still being written: publish nothing", map[string]plan.Local{"ck/r/a": fresh("ck/r/a", "a", true, false), "ck/r/b": settled("ck/r/b", "b"), "ck/r/DONE": settled("ck/r/DONE", "m")}, nil, ""},
		{"marker there: one commit, marker last",
			map[string]plan.Local{"ck/r/b": settled("ck/r/b", "b"), "ck/r/a": settled("ck/r/a", "a"), "ck/r/DONE": settled("ck/r/DONE", "m"), "top": settled("top", "t")}, nil,
			"upload ck/r/a commit=ck/r; upload ck/r/b commit=ck/r; upload top; upload ck/r/DONE commit=ck/r"},
		{"unchanged marker is published again with the change",
			map[string]plan.Local{"ck/r/a": settled("ck/r/a", "a"), "ck/r/DONE": lm, "ck/r/gone": lgone}, map[string]plan.Base{"ck/r/DONE": bm, "ck/r/gone": bgone},
			"upload ck/r/a commit=ck/r; upload ck/r/DONE parents=" + string(old.ID) + " commit=ck/r"},
		{"a delete under the dir is part of a commit",
			map[string]plan.Local{"ck/r/DONE": lm}, map[string]plan.Base{"ck/r/DONE": bm, "ck/r/gone": bgone},
			"tombstone ck/r/gone parents=" + string(gone.ID) + " commit=ck/r; upload ck/r/DONE parents=" + string(old.ID) + " commit=ck/r"},
		{"the dir removed as a whole: its deletes are one commit",
			nil, map[string]plan.Base{"ck/r/DONE": bm, "ck/r/gone": bgone},
			"tombstone ck/r/gone parents=" + string(gone.ID) + " commit=ck/r; tombstone ck/r/DONE parents=" + string(old.ID) + " commit=ck/r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tree{[]plan.Version{old, gone}, tc.local, tc.base}
			if tc.base == nil {
				tr.versions = nil
			}
			if got := brief(plan.Decide(tr.input()).Actions); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// Receiving a commit: its marker is made visible last.
	f := ver("b", 2, "ck/r/a", "a")
	m := ver("b", 2, "ck/r/DONE", "m1", old)
	inCommit("ck/r@1", 2, &f, &m)
	tr := tree{[]plan.Version{old, gone, f, m}, map[string]plan.Local{"ck/r/DONE": lm}, map[string]plan.Base{"ck/r/DONE": bm}}
	want := "download ck/r/a v=" + string(f.ID) + " expect=absent; download ck/r/gone v=" + string(gone.ID) + " expect=absent; download ck/r/DONE v=" + string(m.ID) + " expect=present"
	if got := brief(plan.Decide(tr.input()).Actions); got != want {
		t.Errorf("receiving a commit:\ngot  %s\nwant %s", got, want)
	}
}
