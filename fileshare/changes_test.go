package fileshare

import (
	"cmp"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

var changesSeed = flag.Uint64("changes.seed", 0, "seed of TestListChangesMatchFullLists (0: from the clock)")

// deltaView is what a client holds: a share's list kept by applying the
// answers of ListChanges with its cursor.
type deltaView struct {
	site   string
	cursor []byte
	vs     map[string]*filesharepb.Version // by id
	// What the answers brought: full lists, deltas, versions in deltas
	// that were new to the view, rewritten (pruned), or changed in their
	// marks, and gone ones.
	fulls, deltas, fresh, pruned, marks, gone int
}

func (d *deltaView) update(t *testing.T, s *Service, share string) {
	t.Helper()
	l, err := s.ListChanges(ctxT(t), share, d.cursor)
	if err != nil {
		t.Fatalf("list changes at %s: %v", d.site, err)
	}
	d.cursor = l.Cursor
	if !l.Delta {
		d.fulls++
		d.vs = map[string]*filesharepb.Version{}
		for _, v := range l.Versions {
			d.vs[v.Id] = v
		}
		return
	}
	d.deltas++
	for _, v := range l.Versions {
		old, ok := d.vs[v.Id]
		switch {
		case !ok:
			d.fresh++
		case v.Pruned && !old.Pruned:
			d.pruned++
		case v.Stable != old.Stable || !slices.Equal(v.PersistedAt, old.PersistedAt):
			d.marks++
		}
		d.vs[v.Id] = v
	}
	for _, id := range l.Gone {
		if _, ok := d.vs[id]; ok {
			d.gone++
		}
		delete(d.vs, id)
	}
}

func (d *deltaView) list() []*filesharepb.Version {
	out := make([]*filesharepb.Version, 0, len(d.vs))
	for _, v := range d.vs {
		out = append(out, v)
	}
	return sortByID(out)
}

func sortByID(vs []*filesharepb.Version) []*filesharepb.Version {
	slices.SortFunc(vs, func(a, b *filesharepb.Version) int { return cmp.Compare(a.Id, b.Id) })
	return vs
}

// diffLists says how two lists differ, "" if they do not.
func diffLists(a, b []*filesharepb.Version) string {
	am, bm := map[string]*filesharepb.Version{}, map[string]*filesharepb.Version{}
	for _, v := range a {
		am[v.Id] = v
	}
	for _, v := range b {
		bm[v.Id] = v
	}
	var out []string
	for id, v := range am {
		w, ok := bm[id]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("only in the first: %s %s", id, v.Path))
		case !proto.Equal(v, w):
			out = append(out, fmt.Sprintf("%s %s: stable %v/%v persisted %v/%v pruned %v/%v", id, v.Path, v.Stable, w.Stable,
				v.PersistedAt, w.PersistedAt, v.Pruned, w.Pruned))
		}
	}
	for id, v := range bm {
		if _, ok := am[id]; !ok {
			out = append(out, fmt.Sprintf("only in the second: %s %s", id, v.Path))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func toPlanAll(vs []*filesharepb.Version) []plan.Version {
	out := make([]plan.Version, len(vs))
	for i, v := range vs {
		out[i] = manifest.ToPlan(v)
	}
	return out
}

// TestListChangesMatchFullLists drives random histories through three
// sites (commits and edits on top of what each site shows, tombstones,
// commits of several files, early commits whose chunks come later,
// history retention's pruned stubs, records deleted from the KV, sites cut
// off and back) while clients at every site keep their lists by deltas.
// Whenever a site's list stood still across a delta (a full List before
// and after it are equal), the delta-kept list must be that list exactly,
// marks included, and so must what package plan makes of it. A failure
// prints the seed; -changes.seed replays the choices (not the timing).
func TestListChangesMatchFullLists(t *testing.T) {
	seed := *changesSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test -run TestListChangesMatchFullLists -changes.seed %d ./fileshare)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCluster(t, sites3...)
	const share = "ckpt"
	c.share(t, us, &filesharepb.Share{Name: share, KeepVersions: 1})
	ctx := ctxT(t)
	views := map[string][]*deltaView{}
	for _, s := range sites3 {
		views[s] = []*deltaView{{site: s}, {site: s}}
	}
	paths := []string{"a.bin", "b.bin", "dir/c.bin", "dir/d.bin"}
	cut := ""
	var early [][]byte // chunks of early commits not uploaded yet
	checked, checkedUnstable := 0, 0
	// check compares a view kept by deltas with the full list, whenever
	// the list stood still across the delta (full Lists before and after
	// it equal). The log learns what other sites wrote once its watch of
	// the KV delivers it, a moment after a full List can read it: a
	// difference must go by the next attempt (a Watch event follows each
	// record the log takes); one that stays is a failure.
	check := func(site string) {
		s := c.svc(site)
		var diff string
		for range 20 {
			before, err := s.List(ctx, share, "")
			if err != nil {
				t.Fatal(err)
			}
			d := views[site][rng.IntN(2)]
			d.update(t, s, share)
			after, err := s.List(ctx, share, "")
			if err != nil {
				t.Fatal(err)
			}
			if diffLists(before, after) != "" {
				continue // moved meanwhile: try again
			}
			if diff = diffLists(d.list(), sortByID(after)); diff != "" {
				continue
			}
			got, want := plan.Resolve(toPlanAll(d.list())), plan.Resolve(toPlanAll(after))
			if fmt.Sprint(got.Files, got.Heads, got.Conflicts, got.Pending) != fmt.Sprint(want.Files, want.Heads, want.Conflicts, want.Pending) {
				t.Fatalf("seed %d: at %s plan.Resolve differs on the list kept by deltas", seed, site)
			}
			checked++
			for _, v := range after {
				if !v.Stable || len(v.PersistedAt) < len(sites3) {
					checkedUnstable++
					break
				}
			}
			return
		}
		if diff != "" {
			t.Fatalf("seed %d: at %s the list kept by deltas differs from the full list:\n%s", seed, site, diff)
		}
	}
	chunk := func(site string, i int) *filesharepb.ChunkRef {
		data := fmt.Appendf(nil, "step %d at %s: %d", i, site, rng.Uint64())
		h := sha256.Sum256(data)
		if _, _, err := c.svc(site).chunks.put(ctx, h, data); err != nil {
			t.Fatal(err)
		}
		return &filesharepb.ChunkRef{Hash: h[:], Size: uint32(len(data))}
	}
	// heads: what a writer at site names as parents of p.
	heads := func(site, p string) []string {
		vs, err := c.svc(site).List(ctx, share, "")
		if err != nil {
			t.Fatal(err)
		}
		return idStrings(plan.Resolve(toPlanAll(vs)).Heads[p].Parents)
	}
	for i := range 160 {
		site := sites3[rng.IntN(3)]
		s := c.svc(site)
		switch op := rng.IntN(20); {
		case op < 8: // an edit (or a new file) on what the site shows
			p := paths[rng.IntN(len(paths))]
			f := &filesharepb.FileVersion{Path: p, Parents: heads(site, p), Mode: 0o644, Mtime: int64(i)}
			f.Chunks = append(f.Chunks, chunk(site, i))
			if _, err := s.Commit(ctx, share, []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true}); err != nil {
				t.Fatal(err)
			}
		case op < 10: // a delete
			p := paths[rng.IntN(len(paths))]
			if hs := heads(site, p); len(hs) > 0 {
				f := &filesharepb.FileVersion{Path: p, Parents: hs, Deleted: true}
				if _, err := s.Commit(ctx, share, []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true}); err != nil {
					t.Fatal(err)
				}
			}
		case op < 12: // a checkpoint: one commit of two files
			dir := fmt.Sprintf("step-%d", i)
			var fs []*filesharepb.FileVersion
			for _, n := range []string{"shard-0", ".metadata"} {
				fs = append(fs, &filesharepb.FileVersion{Path: dir + "/" + n, Mode: 0o644, Chunks: []*filesharepb.ChunkRef{chunk(site, i)}})
			}
			if _, err := s.Commit(ctx, share, fs, CommitOptions{NoWait: true, Commit: true}); err != nil {
				t.Fatal(err)
			}
		case op < 13: // an early commit, its chunk uploaded later
			data := fmt.Appendf(nil, "early %d: %d", i, rng.Uint64())
			h := sha256.Sum256(data)
			f := &filesharepb.FileVersion{Path: fmt.Sprintf("early-%d", i), Chunks: []*filesharepb.ChunkRef{{Hash: h[:], Size: uint32(len(data))}}}
			if _, err := s.Commit(ctx, share, []*filesharepb.FileVersion{f}, CommitOptions{Early: true}); err != nil {
				t.Fatal(err)
			}
			early = append(early, data)
		case op < 14 && len(early) > 0:
			data := early[0]
			early = early[1:]
			if _, _, err := c.svc(us).chunks.put(ctx, sha256.Sum256(data), data); err != nil {
				t.Fatal(err)
			}
		case op < 15:
			if _, err := s.Prune(ctx, share); err != nil {
				t.Fatal(err)
			}
		case op < 16: // a record deleted from the KV (by hand)
			vs, err := s.List(ctx, share, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) > 0 {
				v := vs[rng.IntN(len(vs))]
				if _, err := c.kvAt(site).Delete(ctx, versionKey(share, v.Path, v.Id), kv.WriteOptions{Wait: "none"}); err != nil {
					t.Fatal(err)
				}
			}
		case op < 17:
			if cut != "" {
				c.Isolate(cut, false)
				cut = ""
			} else {
				cut = sites3[rng.IntN(3)]
				c.Isolate(cut, true)
			}
		default:
			check(site)
		}
	}
	if cut != "" {
		c.Isolate(cut, false)
	}
	for _, data := range early {
		if _, _, err := c.svc(us).chunks.put(ctx, sha256.Sum256(data), data); err != nil {
			t.Fatal(err)
		}
	}
	// Quiet: every site's list settles; the deltas must get there too.
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			vs, err := c.svc(site).List(ctx, share, "")
			if err != nil {
				return err
			}
			for _, v := range vs {
				if !v.Stable || len(v.PersistedAt) != len(sites3) {
					return fmt.Errorf("%s: %s not stable everywhere yet", site, v.Path)
				}
			}
			return nil
		})
		for _, d := range views[site] {
			d.update(t, c.svc(site), share)
		}
		check(site)
	}
	var total deltaView
	for _, site := range sites3 {
		for _, d := range views[site] {
			total.fulls += d.fulls
			total.deltas += d.deltas
			total.fresh += d.fresh
			total.pruned += d.pruned
			total.marks += d.marks
			total.gone += d.gone
		}
	}
	t.Logf("%d exact checks (%d with versions not stable everywhere); answers: %d full, %d deltas bringing %d new versions, %d pruned, %d marks changed, %d gone",
		checked, checkedUnstable, total.fulls, total.deltas, total.fresh, total.pruned, total.marks, total.gone)
	// The test checks what it claims only if the histories did all that.
	if checked < 10 || checkedUnstable == 0 || total.deltas < 10 || total.fresh == 0 || total.pruned == 0 || total.marks == 0 || total.gone == 0 {
		t.Fatalf("seed %d: the run did not exercise deltas enough (see the counts above)", seed)
	}
	if total.fulls != 2*len(sites3) {
		t.Fatalf("%d full answers, want one per view: a cursor was refused", total.fulls)
	}
}

func idStrings(ids []plan.VersionID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// TestOwnWritesInTheNextDelta: what this site's Commit and Prune wrote is
// in the next delta at once, before the KV applies it here (a full List
// reads it from then on).
func TestOwnWritesInTheNextDelta(t *testing.T) {
	c := newCluster(t, us, eu)
	c.share(t, us, &filesharepb.Share{Name: "cfg", KeepVersions: 1})
	s := c.svc(us)
	ctx := ctxT(t)
	d := &deltaView{site: us}
	d.update(t, s, "cfg")
	var parent []string
	for i := range 20 {
		f := upload(t, s, "train.yaml", fmt.Appendf(nil, "lr: 0.%d", i+1), 64)
		f.Parents = parent
		vs, err := s.Commit(ctx, "cfg", []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true})
		if err != nil {
			t.Fatal(err)
		}
		d.update(t, s, "cfg")
		if d.vs[vs[0].Id] == nil {
			t.Fatalf("commit %d: its version is not in the next delta", i)
		}
		parent = []string{vs[0].Id}
	}
	stabilizertest.Eventually(t, 0, func() error { // retention prunes only below a stable version
		vs, err := s.List(ctx, "cfg", "")
		if err != nil {
			return err
		}
		for _, v := range vs {
			if !v.Stable {
				return fmt.Errorf("%s not stable", v.Id)
			}
		}
		return nil
	})
	n, err := s.Prune(ctx, "cfg")
	if err != nil || n != 19 {
		t.Fatalf("pruned %d (%v), want 19", n, err)
	}
	d.update(t, s, "cfg")
	pruned := 0
	for _, v := range d.vs {
		if v.Pruned {
			pruned++
		}
	}
	if pruned != 19 {
		t.Fatalf("the delta after the prune shows %d pruned versions, want 19", pruned)
	}
}

// TestListCursorFallsBackToFull: a cursor the site cannot answer from its
// log gets the full list and a cursor of its own: one of another site, one
// of a log started over (the KV watch fell behind, or a restart), one that
// is no cursor at all, and one older than the log keeps.
func TestListCursorFallsBackToFull(t *testing.T) {
	c := newCluster(t, us, eu)
	c.share(t, us, &filesharepb.Share{Name: "ckpt"})
	ctx := ctxT(t)
	f := upload(t, c.svc(us), "a.bin", []byte("weights"), 4)
	if _, err := c.svc(us).Commit(ctx, "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 0, func() error { _, err := version(t, c.svc(eu), "ckpt", "a.bin"); return err })
	atUS, err := c.svc(us).ListChanges(ctx, "ckpt", nil)
	if err != nil || atUS.Delta || len(atUS.Versions) != 1 || len(atUS.Cursor) == 0 {
		t.Fatalf("first list: %+v, %v; want the full list and a cursor", atUS, err)
	}
	again, err := c.svc(us).ListChanges(ctx, "ckpt", atUS.Cursor)
	if err != nil || !again.Delta || len(again.Versions) != 0 {
		t.Fatalf("nothing changed: %+v, %v; want an empty delta", again, err)
	}
	full := func(what string, s *Service, since []byte) []byte {
		t.Helper()
		l, err := s.ListChanges(ctx, "ckpt", since)
		if err != nil || l.Delta || len(l.Versions) != 1 || len(l.Cursor) == 0 {
			t.Fatalf("%s: %+v, %v; want the full list", what, l, err)
		}
		return l.Cursor
	}
	full("another site's cursor", c.svc(eu), atUS.Cursor)
	full("no cursor", c.svc(us), []byte("not a cursor"))
	cur := again.Cursor
	c.svc(us).dropLogs()
	cur = full("a log started over", c.svc(us), cur)
	tl, err := c.svc(us).shareLog(ctx, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	tl.mu.Lock()
	tl.mu.floor = tl.mu.gen + 1
	tl.mu.gen += 2
	tl.mu.Unlock()
	full("a cursor older than the log", c.svc(us), cur)
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(cursor{site: "us-east-1", epoch: 7, gen: 42}.encode())
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := decodeCursor(b)
		if !ok {
			return
		}
		if got, ok := decodeCursor(c.encode()); !ok || got != c {
			t.Fatalf("%x decodes to %+v, which encodes and decodes to %+v %v", b, c, got, ok)
		}
	})
}
