package plan_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/plan"
)

var (
	flagSeed     = flag.Uint64("seed", 0, "TestModel: run only this seed (0: run -seeds seeds)")
	flagSeeds    = flag.Int("seeds", 300, "TestModel: number of seeds")
	flagSteps    = flag.Int("steps", 200, "TestModel: random steps per seed before quiescing")
	flagModelLog = flag.Bool("modellog", false, "TestModel: log every step of the seed run")
)

// TestModel is the randomized planner test, after Dropbox's Nucleus: a
// simulated site (the set of versions; ids from a logical HLC; records
// reach each client's site after random delays, children possibly before
// parents; versions become Stable after random delays), two or three
// clients with in-memory folders and bases, random user operations, and
// random interleaving of user operations, sync rounds (decide, then
// execute the actions a few at a time, honoring Expect) and time. Then it
// quiesces and checks that every folder is the same, that nothing a user
// uploaded was lost unless a user who had it overwrote or deleted it,
// that no unstable version and no partial commit was ever made visible,
// and that no local content was overwritten unless published or seen.
func TestModel(t *testing.T) {
	if *flagSeed != 0 {
		runModel(t, *flagSeed, *flagSteps, map[string]int{}, *flagModelLog)
		return
	}
	seeds := *flagSeeds
	if testing.Short() {
		seeds = max(1, seeds/10)
	}
	total := map[string]int{}
	start := time.Now()
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		if !runModel(t, seed, *flagSteps, total, false) {
			return
		}
	}
	t.Logf("%d seeds x %d steps in %v: %v", seeds, *flagSteps, time.Since(start).Round(time.Millisecond), total)
	if seeds < 50 {
		return
	}
	// The model must exercise what it claims to.
	for _, k := range []string{
		"op.create", "op.edit", "op.delete", "op.rename", "op.concurrent", "op.ckpt.write", "op.ckpt.mark",
		"op.ckpt.rmdir", "op.touch", "act.hash", "act.upload", "act.tombstone", "act.download", "act.remove",
		"act.adopt", "act.commit", "expect.skip", "view.conflict.edit", "view.conflict.delete",
		"view.pending.parent", "view.pending.commit", "copy.edited", "massdelete",
	} {
		if total[k] == 0 {
			t.Errorf("no seed exercised %q: %v", k, total)
		}
	}
}

const (
	settleSteps = 2 // a file is Settled this many steps after its last write
	marker      = "DONE"
)

var (
	commitRule = plan.CommitRule{Marker: marker, Dirs: "ckpt/*"}
	poolPaths  = []string{"a.txt", "b.txt", "notes", ".rc", "d/e.md", "d/f.tar.gz", "d/g/h"}
	ckptDirs   = []string{"ckpt/r1", "ckpt/r2"}
)

type mfile struct {
	content   string
	mtime     int64
	mode      uint32
	writtenAt int
}

type hkey struct {
	path  string
	mtime int64
	size  int64
}

type mclient struct {
	name      string
	folder    map[string]mfile
	base      map[string]plan.Base
	hashes    map[hkey]plan.Hash // the client's hash cache
	queue     []plan.Action      // the rest of the current round
	decidedOn plan.Input         // the input of the current round
	safe      map[string]bool    // contents this client published or was shown
	lastPub   map[string]plan.VersionID
	allowMass bool
}

type model struct {
	t        *testing.T
	rng      *rand.Rand
	now      int
	clock    int64 // HLC wall and mtimes
	versions []plan.Version
	byID     map[plan.VersionID]int
	ancMemo  map[[2]plan.VersionID]bool
	stableAt map[plan.VersionID]int
	arriveAt map[plan.VersionID][]int // per client
	groups   map[string][]plan.VersionID
	blobs    map[plan.Hash]string
	clients  []*mclient
	uploaded map[string]bool // contents published by some client
	dropped  map[string]bool // contents a user overwrote or deleted while having them
	serial   int
	counts   map[string]int
	logOn    bool
	failed   string
}

func runModel(t *testing.T, seed uint64, steps int, total map[string]int, logOn bool) (ok bool) {
	m := &model{
		t:        t,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stableAt: map[plan.VersionID]int{},
		byID:     map[plan.VersionID]int{},
		ancMemo:  map[[2]plan.VersionID]bool{},
		arriveAt: map[plan.VersionID][]int{},
		groups:   map[string][]plan.VersionID{},
		blobs:    map[plan.Hash]string{},
		uploaded: map[string]bool{},
		dropped:  map[string]bool{},
		counts:   map[string]int{},
		logOn:    logOn,
	}
	for i := range 2 + m.rng.IntN(2) {
		m.clients = append(m.clients, &mclient{
			name:    fmt.Sprintf("c%d", i),
			folder:  map[string]mfile{},
			base:    map[string]plan.Base{},
			hashes:  map[hkey]plan.Hash{},
			safe:    map[string]bool{},
			lastPub: map[string]plan.VersionID{},
		})
	}
	repro := fmt.Sprintf("reproduce: go test ./fileshare/plan -run 'TestModel$' -seed %d -steps %d -modellog", seed, steps)
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("seed %d: step %d: panic: %v\n%s\n%s", seed, m.now, r, debug.Stack(), repro)
			ok = false
		}
	}()
	for m.now = 1; m.now <= steps && m.failed == ""; m.now++ {
		m.step()
	}
	if m.failed == "" {
		m.quiesce()
	}
	if m.failed == "" {
		m.checkEnd()
	}
	if m.failed != "" {
		t.Errorf("seed %d: step %d: %s\n%s", seed, m.now, m.failed, repro)
		return false
	}
	for k, v := range m.counts {
		total[k] += v
	}
	return true
}

func (m *model) logf(format string, args ...any) {
	if m.logOn {
		m.t.Logf("%4d "+format, append([]any{m.now}, args...)...)
	}
}

func (m *model) fail(format string, args ...any) {
	if m.failed == "" {
		m.failed = fmt.Sprintf(format, args...)
	}
}

// step takes one random step: a user operation, part of a sync round, or
// only time passing (versions becoming stable, records arriving).
func (m *model) step() {
	c := m.clients[m.rng.IntN(len(m.clients))]
	switch x := m.rng.IntN(10); {
	case x < 4:
		m.userOp(c)
	case x < 9:
		m.syncStep(c, 1+m.rng.IntN(4))
	}
}

func (m *model) newContent(c *mclient) string {
	m.serial++
	return fmt.Sprintf("%s-%d", c.name, m.serial)
}

func (m *model) write(c *mclient, p, content string) {
	if old, ok := c.folder[p]; ok {
		m.dropped[old.content] = true
	}
	m.clock++
	c.folder[p] = mfile{content: content, mtime: m.clock, mode: 0o644, writtenAt: m.now}
}

func (m *model) del(c *mclient, p string) {
	m.dropped[c.folder[p].content] = true
	delete(c.folder, p)
}

func (m *model) randomFile(c *mclient) (string, bool) {
	if len(c.folder) == 0 {
		return "", false
	}
	ps := sortedKeys(c.folder)
	return ps[m.rng.IntN(len(ps))], true
}

func (m *model) userOp(c *mclient) {
	switch x := m.rng.IntN(20); {
	case x < 4: // create
		p := poolPaths[m.rng.IntN(len(poolPaths))]
		if _, ok := c.folder[p]; !ok {
			m.count("op.create")
			m.write(c, p, m.newContent(c))
			m.logf("%s create %s", c.name, p)
		}
	case x < 9: // edit any file, conflict copies included
		if p, ok := m.randomFile(c); ok {
			m.count("op.edit")
			if plan.IsConflictName(p) {
				m.count("copy.edited")
			}
			m.write(c, p, m.newContent(c))
			m.logf("%s edit %s", c.name, p)
		}
	case x < 11:
		if p, ok := m.randomFile(c); ok {
			m.count("op.delete")
			m.del(c, p)
			m.logf("%s delete %s", c.name, p)
		}
	case x < 12: // rename: delete + create
		p, ok := m.randomFile(c)
		q := poolPaths[m.rng.IntN(len(poolPaths))]
		if _, exists := c.folder[q]; ok && !exists && !strings.HasPrefix(p, "ckpt/") {
			m.count("op.rename")
			f := c.folder[p]
			delete(c.folder, p)
			m.write(c, q, f.content)
			m.logf("%s rename %s %s", c.name, p, q)
		}
	case x < 14: // the same path edited at two clients
		o := m.clients[m.rng.IntN(len(m.clients))]
		if p, ok := m.randomFile(c); ok && o != c {
			if _, there := o.folder[p]; there {
				m.count("op.concurrent")
				m.write(c, p, m.newContent(c))
				m.write(o, p, m.newContent(o))
				m.logf("%s+%s edit %s", c.name, o.name, p)
			}
		}
	case x < 16: // a checkpoint being written, one file at a time
		d := ckptDirs[m.rng.IntN(len(ckptDirs))]
		p := fmt.Sprintf("%s/f%d", d, 1+m.rng.IntN(3))
		m.count("op.ckpt.write")
		m.write(c, p, m.newContent(c))
		m.logf("%s ckpt write %s", c.name, p)
	case x < 18: // the checkpoint committed by its marker
		d := ckptDirs[m.rng.IntN(len(ckptDirs))]
		m.count("op.ckpt.mark")
		m.write(c, d+"/"+marker, m.newContent(c))
		m.logf("%s ckpt mark %s", c.name, d)
	case x < 19: // a checkpoint dir removed as a whole
		d := ckptDirs[m.rng.IntN(len(ckptDirs))]
		n := 0
		for p := range c.folder {
			if strings.HasPrefix(p, d+"/") {
				m.del(c, p)
				n++
			}
		}
		if n > 0 {
			m.count("op.ckpt.rmdir")
			m.logf("%s ckpt rmdir %s", c.name, d)
		}
	default: // touch: new mtime, same bytes
		if p, ok := m.randomFile(c); ok {
			m.count("op.touch")
			f := c.folder[p]
			m.clock++
			f.mtime = m.clock
			c.folder[p] = f
			m.logf("%s touch %s", c.name, p)
		}
	}
}

func (m *model) count(k string) { m.counts[k]++ }

func chunksOf(content string) []plan.Chunk {
	return []plan.Chunk{{Hash: sha256.Sum256([]byte(content)), Size: uint32(len(content))}}
}

func contentHash(content string) plan.Hash { return plan.ContentOf(chunksOf(content)) }

// siteVersions is what client i's site knows now, with stability as of now.
func (m *model) siteVersions(i int) []plan.Version {
	var out []plan.Version
	for _, v := range m.versions {
		if m.now < m.arriveAt[v.ID][i] {
			continue
		}
		v.Stable = m.now >= m.stableAt[v.ID]
		out = append(out, v)
	}
	return out
}

func (m *model) index(c *mclient) int { return slices.Index(m.clients, c) }

func (m *model) local(c *mclient) map[string]plan.Local {
	out := map[string]plan.Local{}
	for p, f := range c.folder {
		l := plan.Local{Path: p, Size: int64(len(f.content)), Mode: f.mode, MTime: f.mtime,
			Settled: m.now-f.writtenAt >= settleSteps}
		l.Content, l.Hashed = c.hashes[hkey{p, f.mtime, int64(len(f.content))}]
		out[p] = l
	}
	return out
}

// syncStep runs n actions of c's current round, deciding a new round first
// if the last one is done.
func (m *model) syncStep(c *mclient, n int) {
	if len(c.queue) == 0 {
		if !m.decide(c) {
			return
		}
	}
	for ; n > 0 && len(c.queue) > 0 && m.failed == ""; n-- {
		a := c.queue[0]
		c.queue = c.queue[1:]
		m.execute(c, a)
	}
}

// decide takes a Decide round for c and checks the decision; it reports
// whether there is anything to do.
func (m *model) decide(c *mclient) bool {
	view := plan.Resolve(m.siteVersions(m.index(c)))
	m.checkView(c, view)
	in := plan.Input{View: view, Local: m.local(c), Base: maps.Clone(c.base), Commit: commitRule, AllowMassDelete: c.allowMass}
	c.allowMass = false
	dec := plan.Decide(in)
	if dec.MassDelete != nil {
		m.count("massdelete")
		m.logf("%s mass delete: %v", c.name, dec.MassDelete)
		if len(dec.Actions) > 0 {
			m.fail("%s: mass delete with %d actions", c.name, len(dec.Actions))
		}
		c.allowMass = true // the user confirms
		return false
	}
	m.checkDecision(c, in, dec)
	c.queue = dec.Actions
	c.decidedOn = in
	if m.logOn && len(dec.Actions) > 0 {
		for _, a := range dec.Actions {
			m.logf("%s plan %v %s %s parents=%v kept=%v commit=%q", c.name, a.Kind, a.Path, a.Version.ID, a.Parents, a.Kept, a.Commit)
		}
	}
	return len(dec.Actions) > 0
}

// checkView: only stable versions, commits all or nothing.
func (m *model) checkView(c *mclient, view plan.View) {
	for p, v := range view.Files {
		if m.now < m.stableAt[v.ID] {
			m.fail("%s: view shows unstable %s at %s", c.name, v.ID, p)
		}
	}
	for g, ids := range m.groups {
		n := 0
		for _, id := range ids {
			if view.Eligible(id) {
				n++
			}
		}
		if n != 0 && n != len(ids) {
			m.fail("%s: view shows %d of the %d versions of commit %s", c.name, n, len(ids), g)
		}
	}
	for _, cf := range view.Conflicts {
		m.count("view.conflict." + cf.Kind)
		// No spurious conflicts: the two really are concurrent.
		if m.ancestor(cf.Loser, cf.Winner) || m.ancestor(cf.Winner, cf.Loser) {
			m.fail("%s: conflict at %s between %s and %s, which descend from each other", c.name, cf.Path, cf.Winner, cf.Loser)
		}
	}
	for _, pd := range view.Pending {
		switch pd.Reason {
		case plan.ReasonParent:
			m.count("view.pending.parent")
		case plan.ReasonCommit:
			m.count("view.pending.commit")
		}
	}
}

// checkDecision: nothing unsettled published, Expect is the local state,
// commits carry their marker last, commit downloads are complete.
func (m *model) checkDecision(c *mclient, in plan.Input, dec plan.Decision) {
	byCommit := map[string][]plan.Action{}
	lastDownload := -1
	for i, a := range dec.Actions {
		l, hasL := in.Local[a.Path]
		switch a.Kind {
		case plan.ActUpload:
			if !hasL || !l.Settled {
				m.fail("%s: upload of %s, not settled or absent (%+v)", c.name, a.Path, l)
			}
		case plan.ActDownload, plan.ActRemove:
			if hasL != (a.Expect != nil) || hasL && *a.Expect != l {
				m.fail("%s: %v %s with Expect %+v, local is %+v", c.name, a.Kind, a.Path, a.Expect, l)
			}
		}
		if a.Commit != "" {
			byCommit[a.Commit] = append(byCommit[a.Commit], a)
		}
		if a.Kind == plan.ActDownload {
			if lastDownload >= 0 && strings.HasSuffix(dec.Actions[lastDownload].Path, "/"+marker) &&
				commitRule.CommitDir(dec.Actions[lastDownload].Path) == commitRule.CommitDir(a.Path) {
				m.fail("%s: download of %s after its commit's marker", c.name, a.Path)
			}
			lastDownload = i
		}
	}
	for d, as := range byCommit {
		uploads := false
		for _, a := range as {
			uploads = uploads || a.Kind == plan.ActUpload
		}
		if last := as[len(as)-1]; uploads && (last.Path != d+"/"+marker || last.Kind != plan.ActUpload) {
			m.fail("%s: commit %s does not end with the upload of its marker: %v", c.name, d, as)
		}
	}
	for _, a := range dec.Actions {
		if d := commitRule.CommitDir(a.Path); d != "" && a.Commit != d && (a.Kind == plan.ActUpload || a.Kind == plan.ActTombstone) {
			m.fail("%s: %v %s under commit dir %s outside a commit", c.name, a.Kind, a.Path, d)
		}
	}
	// A commit shown is fetched as a whole: every member shown at its own
	// version is already here, fetched now, or blocked by a local change.
	fetched := map[string]bool{}
	for _, a := range dec.Actions {
		fetched[a.Path] = true
	}
	for _, a := range dec.Actions {
		if a.Kind != plan.ActDownload || a.Version.Commit == "" {
			continue
		}
		for _, id := range m.groups[a.Version.Commit] {
			v := m.version(id)
			sh, ok := in.View.Files[v.Path]
			b, hasB := in.Base[v.Path]
			if !ok || sh.ID != id || fetched[v.Path] || b.Version == id || hasB && !in.View.Eligible(b.Version) {
				continue // not shown at its own version, fetched, here, or our own publish pending there
			}
			if l, ok := in.Local[v.Path]; ok != hasB || ok && (l.Size != b.Size || l.MTime != b.MTime) {
				continue // a local change there (or a local delete)
			}
			m.fail("%s: fetches commit %s without its member %s at %s", c.name, a.Version.Commit, id, v.Path)
		}
	}
}

func (m *model) version(id plan.VersionID) plan.Version {
	i, ok := m.byID[id]
	if !ok {
		m.fail("unknown version %s", id)
		return plan.Version{}
	}
	return m.versions[i]
}

// ancestor reports whether a is an ancestor of b.
func (m *model) ancestor(a, b plan.VersionID) bool {
	k := [2]plan.VersionID{a, b}
	if r, ok := m.ancMemo[k]; ok {
		return r // versions never change: the answer does not either
	}
	r := m.ancestorWalk(a, b)
	m.ancMemo[k] = r
	return r
}

func (m *model) ancestorWalk(a, b plan.VersionID) bool {
	seen := map[plan.VersionID]bool{}
	stack := slices.Clone(m.version(b).Parents)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == a {
			return true
		}
		if !seen[id] {
			seen[id] = true
			stack = append(stack, m.version(id).Parents...)
		}
	}
	return false
}

func sameStat(f mfile, l *plan.Local) bool {
	return l.Size == int64(len(f.content)) && l.MTime == f.mtime && l.Mode == f.mode
}

// expectOK is the executor's re-check right before it writes.
func expectOK(c *mclient, a plan.Action) bool {
	f, ok := c.folder[a.Path]
	if a.Expect == nil {
		return !ok
	}
	return ok && sameStat(f, a.Expect)
}

func (m *model) execute(c *mclient, a plan.Action) {
	m.count("act." + a.Kind.String())
	switch a.Kind {
	case plan.ActHash:
		if f, ok := c.folder[a.Path]; ok {
			c.hashes[hkey{a.Path, f.mtime, int64(len(f.content))}] = contentHash(f.content)
		}
	case plan.ActUpload, plan.ActTombstone:
		group := []plan.Action{a}
		if a.Commit != "" { // the rest of the commit goes with it
			m.count("act.commit")
			rest := c.queue[:0:0]
			for _, b := range c.queue {
				if b.Commit == a.Commit {
					group = append(group, b)
				} else {
					rest = append(rest, b)
				}
			}
			c.queue = rest
		}
		m.publish(c, group)
	case plan.ActDownload:
		if !expectOK(c, a) {
			m.count("expect.skip")
			return
		}
		m.checkOverwrite(c, a)
		content, ok := m.blobs[a.Version.Chunks[0].Hash]
		if !ok || contentHash(content) != a.Version.Content {
			m.fail("%s: download %s %s: content unknown or wrong", c.name, a.Path, a.Version.ID)
			return
		}
		m.clock++
		f := mfile{content: content, mtime: m.clock, mode: a.Version.Mode, writtenAt: m.now}
		c.folder[a.Path] = f
		c.safe[content] = true
		c.base[a.Path] = plan.Base{Path: a.Path, Version: a.Version.ID, Content: a.Version.Content,
			Size: int64(len(content)), MTime: f.mtime, Mode: f.mode}
		m.logf("%s download %s %s (%s)", c.name, a.Path, a.Version.ID, content)
	case plan.ActRemove:
		if !expectOK(c, a) {
			m.count("expect.skip")
			return
		}
		m.checkOverwrite(c, a)
		delete(c.folder, a.Path)
		delete(c.base, a.Path)
		m.logf("%s remove %s", c.name, a.Path)
	case plan.ActAdopt:
		if a.Expect == nil || *a.Expect != c.decidedOn.Local[a.Path] {
			m.fail("%s: adopt %s with Expect %+v, local was %+v", c.name, a.Path, a.Expect, c.decidedOn.Local[a.Path])
			return
		}
		l := *a.Expect
		f, ok := c.folder[a.Path]
		if !ok || !sameStat(f, &l) {
			m.count("expect.skip")
			return
		}
		if contentHash(f.content) != a.Version.Content {
			m.fail("%s: adopt %s %s over different content %q", c.name, a.Path, a.Version.ID, f.content)
			return
		}
		c.safe[f.content] = true
		c.base[a.Path] = plan.Base{Path: a.Path, Version: a.Version.ID, Content: a.Version.Content,
			Size: l.Size, MTime: l.MTime, Mode: l.Mode}
		m.logf("%s adopt %s %s", c.name, a.Path, a.Version.ID)
	}
}

// checkOverwrite: a download or remove replaces local content only if this
// client published it or was shown it; and it makes visible only stable
// versions.
func (m *model) checkOverwrite(c *mclient, a plan.Action) {
	if f, ok := c.folder[a.Path]; ok && !c.safe[f.content] {
		m.fail("%s: %v %s overwrites unpublished local content %q", c.name, a.Kind, a.Path, f.content)
	}
	if last, ok := c.lastPub[a.Path]; ok && a.Version.ID != "" && m.ancestor(a.Version.ID, last) {
		m.fail("%s: %v %s %s undoes its own later publish %s", c.name, a.Kind, a.Path, a.Version.ID, last)
	}
	if a.Kind == plan.ActDownload {
		if st, ok := m.stableAt[a.Version.ID]; !ok || m.now < st {
			m.fail("%s: download of unstable %s at %s", c.name, a.Version.ID, a.Path)
		}
	}
}

// publish records the versions of one upload or commit at the site: the
// executor reads each file as it is now, and skips an upload of a file
// that vanished and a tombstone of a file that came back.
func (m *model) publish(c *mclient, group []plan.Action) {
	var vs []plan.Version
	for _, a := range group {
		f, ok := c.folder[a.Path]
		v := plan.Version{Path: a.Path, Parents: a.Parents, Kept: a.Kept, Origin: c.name}
		switch {
		case a.Kind == plan.ActUpload && ok:
			v.Chunks = chunksOf(f.content)
			v.Content = contentHash(f.content)
			v.Size, v.Mode, v.MTime = int64(len(f.content)), f.mode, f.mtime
			m.blobs[v.Chunks[0].Hash] = f.content
		case a.Kind == plan.ActTombstone && !ok:
			v.Deleted = true
		default:
			continue
		}
		vs = append(vs, v)
	}
	commit := ""
	if len(group) > 1 || group[0].Commit != "" {
		commit = fmt.Sprintf("%s@%d", group[0].Commit, m.serial)
		m.serial++
	}
	i := m.index(c)
	for _, v := range vs {
		m.clock++
		v.HLC = plan.HLC{Wall: m.clock}
		v.ID = plan.NewVersionID(c.name, v.HLC)
		if commit != "" {
			v.Commit, v.CommitFiles = commit, len(vs)
			m.groups[commit] = append(m.groups[commit], v.ID)
		}
		m.versions = append(m.versions, v)
		m.byID[v.ID] = len(m.versions) - 1
		c.lastPub[v.Path] = v.ID
		m.stableAt[v.ID] = m.now + m.rng.IntN(8)
		arr := make([]int, len(m.clients))
		for j := range arr {
			switch {
			case j == i: // its own site has it at once
			case m.rng.IntN(8) == 0: // a slow record: children may overtake it
				arr[j] = m.now + m.rng.IntN(30)
			default:
				arr[j] = m.now + m.rng.IntN(6)
			}
		}
		m.arriveAt[v.ID] = arr
		if v.Deleted {
			c.base[v.Path] = plan.TombstoneBase(v.Path, v.ID)
			m.logf("%s tombstone %s %s parents=%v", c.name, v.Path, v.ID, v.Parents)
			continue
		}
		f := c.folder[v.Path]
		m.uploaded[f.content] = true
		c.safe[f.content] = true
		c.base[v.Path] = plan.Base{Path: v.Path, Version: v.ID, Content: v.Content, Size: v.Size, MTime: v.MTime, Mode: v.Mode}
		m.logf("%s upload %s %s (%s) parents=%v kept=%v commit=%q", c.name, v.Path, v.ID, f.content, v.Parents, v.Kept, v.Commit)
	}
}

// quiesce stops the users, lets everything arrive and become stable, and
// runs whole rounds until no client has anything to do.
func (m *model) quiesce() {
	for _, c := range m.clients {
		for len(c.queue) > 0 && m.failed == "" {
			m.syncStep(c, len(c.queue))
		}
	}
	// The jobs finish: a checkpoint being written gets its marker.
	for _, c := range m.clients {
		for _, d := range ckptDirs {
			_, done := c.folder[d+"/"+marker]
			for p := range c.folder {
				if !done && strings.HasPrefix(p, d+"/") {
					m.write(c, d+"/"+marker, m.newContent(c))
					m.logf("%s ckpt mark %s (quiesce)", c.name, d)
					done = true
				}
			}
		}
	}
	for round := 0; round < 40 && m.failed == ""; round++ {
		m.now += 40 // everything arrives, is stable and settled
		busy := false
		for _, c := range m.clients {
			if m.decide(c) || c.allowMass {
				busy = true
				m.syncStep(c, len(c.queue))
			}
		}
		if !busy {
			return
		}
	}
	m.fail("no convergence after 40 quiet rounds")
}

func (m *model) checkEnd() {
	first := m.clients[0]
	for _, c := range m.clients[1:] {
		if !reflect.DeepEqual(contents(first), contents(c)) {
			if m.logOn {
				for _, c := range m.clients {
					view := plan.Resolve(m.siteVersions(m.index(c)))
					for _, p := range sortedKeys(view.Files) {
						m.logf("%s view %s %s heads=%v base=%+v", c.name, p, view.Files[p].ID, view.Heads[p], c.base[p])
					}
					m.logf("%s pending %v", c.name, view.Pending)
				}
			}
			m.fail("folders differ:\n%s: %v\n%s: %v", first.name, contents(first), c.name, contents(c))
			return
		}
	}
	view := plan.Resolve(m.siteVersions(0))
	if len(view.Pending) > 0 {
		m.fail("pending after quiescing: %v", view.Pending)
	}
	shown := map[string]string{}
	for p, v := range view.Files {
		shown[p] = m.blobs[v.Chunks[0].Hash]
	}
	if !reflect.DeepEqual(shown, contents(first)) {
		m.fail("folders differ from the view:\nview: %v\n%s: %v", shown, first.name, contents(first))
	}
	have := map[string]bool{}
	for _, s := range contents(first) {
		have[s] = true
	}
	for _, s := range sortedKeys(m.uploaded) {
		if !have[s] && !m.dropped[s] {
			m.fail("lost %q: uploaded, never overwritten or deleted by a user, gone from every folder", s)
		}
	}
	// Determinism: the same set in any order resolves the same.
	vs := m.siteVersions(0)
	for range 3 {
		m.rng.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
		if !reflect.DeepEqual(plan.Resolve(vs), view) {
			m.fail("Resolve depends on the order of its input")
		}
	}
}

func contents(c *mclient) map[string]string {
	out := map[string]string{}
	for p, f := range c.folder {
		out[p] = f.content
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
