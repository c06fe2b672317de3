// Package plan is a throwaway stand-in for the functions of fileshare/plan
// until branch plan lands; the client imports it under the name plan.
package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	real "github.com/stabilizer/stabilizer/fileshare/plan"
)

type (
	Hash      = real.Hash
	VersionID = real.VersionID
	HLC       = real.HLC
	Chunk     = real.Chunk
	Version   = real.Version
)

func NewVersionID(origin string, h HLC) VersionID {
	return VersionID(fmt.Sprintf("%016x%08x-%s", h.Wall, h.Logical, origin))
}

func ContentOf(chunks []Chunk) Hash {
	h := sha256.New()
	for _, c := range chunks {
		h.Write(c.Hash[:])
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], c.Size)
		h.Write(b[:])
	}
	var out Hash
	h.Sum(out[:0])
	return out
}

var conflictRE = regexp.MustCompile(`\.conflict-[0-9a-f]{8}(\.[^/]*)?$`)

func ConflictName(p string, loser VersionID) string {
	s := sha256.Sum256([]byte(loser))
	tag := ".conflict-" + hex.EncodeToString(s[:4])
	dir, base := path.Split(p)
	if i := strings.LastIndex(base, "."); i > 0 {
		return dir + base[:i] + tag + base[i:]
	}
	return p + tag
}

func IsConflictName(p string) bool { return conflictRE.MatchString(p) }

type View struct {
	Files     map[string]Version
	Heads     map[string]Heads
	Conflicts []Conflict
	Pending   []Pending
}
type Heads struct{ Parents, Kept []VersionID }
type Conflict struct {
	Path, Copy    string
	Winner, Loser VersionID
	Kind          string
}
type Pending struct {
	ID           VersionID
	Path, Reason string
}

func newer(a, b Version) bool {
	if a.HLC != b.HLC {
		return b.HLC.Less(a.HLC)
	}
	return a.ID > b.ID
}

func Resolve(versions []Version) View {
	v := View{Files: map[string]Version{}, Heads: map[string]Heads{}}
	commitStable := map[string]int{}
	for _, x := range versions {
		if x.Commit != "" && x.Stable {
			commitStable[x.Commit]++
		}
	}
	byPath := map[string][]Version{}
	for _, x := range versions {
		visible := x.Stable && (x.Commit == "" || commitStable[x.Commit] >= x.CommitFiles)
		if !visible {
			reason := "not stable"
			if x.Stable {
				reason = "commit incomplete"
			}
			v.Pending = append(v.Pending, Pending{ID: x.ID, Path: x.Path, Reason: reason})
			continue
		}
		byPath[x.Path] = append(byPath[x.Path], x)
	}
	for p, vs := range byPath {
		parent := map[VersionID]bool{}
		kept := map[VersionID]bool{}
		for _, x := range vs {
			for _, q := range x.Parents {
				parent[q] = true
			}
		}
		var heads []Version
		for _, x := range vs {
			if !parent[x.ID] {
				heads = append(heads, x)
			}
		}
		for _, x := range heads {
			for _, q := range x.Kept {
				kept[q] = true
			}
		}
		sort.Slice(heads, func(i, j int) bool {
			if heads[i].Deleted != heads[j].Deleted {
				return !heads[i].Deleted
			}
			return newer(heads[i], heads[j])
		})
		var h Heads
		for _, x := range heads {
			h.Parents = append(h.Parents, x.ID)
		}
		w := heads[0]
		if !w.Deleted {
			v.Files[p] = w
		} else {
			v.Files[p] = w // tombstone shown as deleted
		}
		var losers []Version
		for _, x := range heads[1:] {
			if !x.Deleted {
				losers = append(losers, x)
			}
		}
		for _, x := range vs {
			if kept[x.ID] && parent[x.ID] {
				losers = append(losers, x)
			}
		}
		for _, x := range losers {
			c := ConflictName(p, x.ID)
			if IsConflictName(p) {
				continue
			}
			cp := x
			cp.Path = c
			v.Files[c] = cp
			h.Kept = append(h.Kept, x.ID)
			kind := "edit"
			if w.Deleted {
				kind = "delete"
			}
			v.Conflicts = append(v.Conflicts, Conflict{Path: p, Copy: c, Winner: w.ID, Loser: x.ID, Kind: kind})
		}
		v.Heads[p] = h
	}
	sort.Slice(v.Conflicts, func(i, j int) bool { return v.Conflicts[i].Copy < v.Conflicts[j].Copy })
	return v
}

type CommitRule struct{ Marker, Dirs string }

func (r CommitRule) CommitDir(p string) string {
	if r.Marker == "" {
		return ""
	}
	pat := r.Dirs
	if pat == "" {
		pat = "*"
	}
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if ok, _ := path.Match(pat, d); ok {
			return d
		}
	}
	return ""
}

type Local struct {
	Path    string
	Size    int64
	Mode    uint32
	MTime   int64
	Content Hash
	Hashed  bool
	Settled bool
}
type Base struct {
	Path    string
	Version VersionID
	Content Hash
	Size    int64
	MTime   int64
	Mode    uint32
}
type Input struct {
	View            View
	Local           map[string]Local
	Base            map[string]Base
	FolderMissing   bool
	Commit          CommitRule
	AllowMassDelete bool
}
type ActionKind int

const (
	ActHash ActionKind = iota
	ActUpload
	ActTombstone
	ActDownload
	ActRemove
	ActAdopt
)

type Action struct {
	Kind          ActionKind
	Path          string
	Version       Version
	Parents, Kept []VersionID
	Commit        string
	Expect        *Local
}
type Decision struct {
	Actions    []Action
	MassDelete *MassDelete
}
type MassDelete struct {
	Missing, Total int
	FolderMissing  bool
}

func (m *MassDelete) Error() string {
	if m.FolderMissing {
		return "plan: the folder is missing"
	}
	return fmt.Sprintf("plan: %d of %d files disappeared", m.Missing, m.Total)
}

func same(l Local, b Base) bool { return l.Size == b.Size && l.MTime == b.MTime && l.Mode == b.Mode }

func Decide(in Input) Decision {
	var d Decision
	if in.FolderMissing {
		d.MassDelete = &MassDelete{FolderMissing: true, Total: len(in.Base)}
		return d
	}
	missing := 0
	for p, b := range in.Base {
		if _, ok := in.Local[p]; !ok {
			if v, ok := in.View.Files[p]; ok && v.ID == b.Version && !v.Deleted {
				missing++
			}
		}
	}
	if len(in.Base) >= 4 && missing*2 > len(in.Base) && !in.AllowMassDelete {
		d.MassDelete = &MassDelete{Missing: missing, Total: len(in.Base)}
		return d
	}
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
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	// commit dirs: ready when marker present and all settled
	commitReady := map[string]bool{}
	if in.Commit.Marker != "" {
		for p, l := range in.Local {
			dir := in.Commit.CommitDir(p)
			if dir != "" && p == dir+"/"+in.Commit.Marker && l.Settled {
				commitReady[dir] = true
			}
		}
		for p, l := range in.Local {
			if dir := in.Commit.CommitDir(p); dir != "" && !l.Settled {
				commitReady[dir] = false
			}
		}
	}
	var hashes, ups, downs, removes, adopts []Action
	for _, p := range sorted {
		v, hasV := in.View.Files[p]
		l, hasL := in.Local[p]
		b, hasB := in.Base[p]
		if hasV && v.Deleted {
			hasV = false
		}
		lp := func() *Local {
			if !hasL {
				return nil
			}
			c := l
			return &c
		}
		h := in.View.Heads[p]
		localChanged := hasL != hasB || (hasL && !same(l, b))
		if hasL && localChanged && l.Settled && !l.Hashed {
			hashes = append(hashes, Action{Kind: ActHash, Path: p})
			continue
		}
		if hasL && localChanged && hasB && l.Hashed && l.Content == b.Content {
			adopts = append(adopts, Action{Kind: ActAdopt, Path: p, Version: Version{ID: b.Version, Path: p, Content: b.Content}, Expect: lp()})
			continue
		}
		commit := ""
		if dir := in.Commit.CommitDir(p); dir != "" {
			commit = dir
		}
		upload := func(parents, kept []VersionID) {
			if !l.Settled || !l.Hashed || IsConflictName(p) && !hasV && false {
				return
			}
			if commit != "" && !commitReady[commit] {
				return
			}
			ups = append(ups, Action{Kind: ActUpload, Path: p, Parents: parents, Kept: kept, Commit: commit, Expect: lp()})
		}
		remoteChanged := func() bool {
			if !hasB {
				return hasV
			}
			vv, ok := in.View.Files[p]
			return ok && vv.ID != b.Version
		}()
		switch {
		case !hasB && !hasL && hasV:
			downs = append(downs, Action{Kind: ActDownload, Path: p, Version: v})
		case !hasB && hasL && hasV:
			if l.Hashed && l.Content == v.Content {
				adopts = append(adopts, Action{Kind: ActAdopt, Path: p, Version: v, Expect: lp()})
			} else {
				upload(nil, nil)
			}
		case !hasB && hasL && !hasV:
			upload(h.Parents, h.Kept)
		case hasB && !localChanged && remoteChanged:
			if hasV {
				downs = append(downs, Action{Kind: ActDownload, Path: p, Version: v, Expect: lp()})
			} else if hasL {
				removes = append(removes, Action{Kind: ActRemove, Path: p, Version: in.View.Files[p], Expect: lp()})
			} else {
				adopts = append(adopts, Action{Kind: ActAdopt, Path: p, Version: in.View.Files[p]})
			}
		case hasB && localChanged && !remoteChanged:
			if hasL {
				upload(h.Parents, h.Kept)
			} else if vv, ok := in.View.Files[p]; ok && !vv.Deleted {
				ups = append(ups, Action{Kind: ActTombstone, Path: p, Parents: h.Parents, Kept: h.Kept})
			}
		case hasB && localChanged && remoteChanged:
			if hasL {
				upload([]VersionID{b.Version}, nil)
			} else if hasV {
				downs = append(downs, Action{Kind: ActDownload, Path: p, Version: v})
			}
		}
	}
	d.Actions = append(d.Actions, hashes...)
	if len(hashes) > 0 {
		return d
	}
	d.Actions = append(d.Actions, adopts...)
	d.Actions = append(d.Actions, ups...)
	d.Actions = append(d.Actions, downs...)
	d.Actions = append(d.Actions, removes...)
	return d
}
