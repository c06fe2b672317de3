package client

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// IgnoreFile is the name of a folder's ignore file, at its top, in
// gitignore syntax. It is synced like any file.
const IgnoreFile = ".stabignore"

// ignorer says which paths the folder does not sync: the state dir, and
// what the ignore file names.
type ignorer struct{ m gitignore.Matcher }

func loadIgnorer(root *os.Root) ignorer {
	b, err := root.ReadFile(IgnoreFile)
	if err != nil {
		return ignorer{}
	}
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, nil))
	}
	return ignorer{m: gitignore.NewMatcher(ps)}
}

// ignored says whether p (slash-separated) is not synced; dir says p is
// a directory.
func (ig ignorer) ignored(p string, dir bool) bool {
	first, _, _ := strings.Cut(p, "/")
	if first == safepath.StateDir {
		return true
	}
	if ig.m == nil {
		return false
	}
	parts := strings.Split(p, "/")
	// A file is ignored also when one of its directories is.
	for i := 1; i < len(parts); i++ {
		if ig.m.Match(parts[:i], true) {
			return true
		}
	}
	return ig.m.Match(parts, dir)
}

// seen is the stat a file had when first seen so, for settling.
type seen struct {
	size, mtime int64
	since       time.Time
}

// scanResult is one walk of the folder.
type scanResult struct {
	local   map[string]plan.Local
	dirs    []string  // every directory walked, for notifications
	wake    time.Time // when the next unsettled file settles; zero for none
	skipped []string  // paths not synced, with why
}

// scan walks the folder through root (never following a symlink) and
// returns its regular files as the planner sees them. A file is Settled
// once its size and mtime stayed the same for settle, or when they are
// the ones the index knows; Hashed when the index holds a chunk list for
// that stat.
func (s *Syncer) scan(now time.Time) (scanResult, error) {
	res := scanResult{local: map[string]plan.Local{}}
	ig := loadIgnorer(s.root)
	settle := time.Duration(s.cfg.SettleTime)
	alive := map[string]bool{}
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			res.skipped = append(res.skipped, p+": "+err.Error())
			return nil
		}
		if p == "." {
			res.dirs = append(res.dirs, ".")
			return nil
		}
		if ig.ignored(p, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			res.dirs = append(res.dirs, p)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks, devices: not synced
		}
		if err := safepath.Check(p); err != nil {
			res.skipped = append(res.skipped, p+": "+err.Error())
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		l := plan.Local{Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}
		info, known := s.ix.Files[p]
		if known && info.matches(l) {
			l.Content, l.Hashed, l.Settled = info.Content, true, true
		}
		if !l.Settled {
			sn, ok := s.seen[p]
			switch {
			case ok && sn.size == l.Size && sn.mtime == l.MTime:
				if now.Sub(sn.since) >= settle {
					l.Settled = true
				} else if w := sn.since.Add(settle); res.wake.IsZero() || w.Before(res.wake) {
					res.wake = w
				}
			default:
				s.seen[p] = seen{size: l.Size, mtime: l.MTime, since: now}
				if w := now.Add(settle); res.wake.IsZero() || w.Before(res.wake) {
					res.wake = w
				}
			}
		}
		alive[p] = true
		res.local[p] = l
		return nil
	})
	for p := range s.seen {
		if !alive[p] {
			delete(s.seen, p)
		}
	}
	return res, err
}

// vanishing returns the synced paths missing from local for less than the
// settle time (see plan.Input.Vanishing), and when the next of them
// settles. s.missing keeps when each synced path still missing was first
// missed; it is rebuilt each round, so paths that came back, whose delete
// was published or that left the index drop out of it.
func (s *Syncer) vanishing(local map[string]plan.Local, now time.Time) (map[string]bool, time.Time) {
	settle := time.Duration(s.cfg.SettleTime)
	var out map[string]bool
	var wake time.Time
	missing := map[string]time.Time{}
	for p, b := range s.ix.Base {
		if _, ok := local[p]; ok || b.Deleted() {
			continue
		}
		since, ok := s.missing[p]
		if !ok {
			since = now
		}
		missing[p] = since
		if w := since.Add(settle); w.After(now) {
			if out == nil {
				out = map[string]bool{}
			}
			out[p] = true
			if wake.IsZero() || w.Before(wake) {
				wake = w
			}
		}
	}
	s.missing = missing
	return out, wake
}

// folderMissing says whether the folder is gone or was replaced by
// another directory since it was opened.
func (s *Syncer) folderMissing() bool {
	fi, err := os.Stat(s.folder)
	if err != nil {
		return true
	}
	rfi, err := s.root.Stat(".")
	if err != nil {
		return true
	}
	if !os.SameFile(fi, rfi) {
		return true
	}
	_, err = s.root.Stat(safepath.StateDir)
	return err != nil
}
