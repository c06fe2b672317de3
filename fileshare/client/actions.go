package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// Batches of requests to the site.
const (
	missingBatch   = 1024     // hashes per Missing request
	getChunksBatch = 16       // hashes per GetChunks request
	getChunksBytes = 64 << 20 // and at most this many bytes
)

// statLocal returns p's stat as the planner sees it; ok is false when p
// is not a regular file.
func (s *Syncer) statLocal(p string) (plan.Local, bool, error) {
	fi, err := s.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return plan.Local{}, false, nil
	}
	if err != nil {
		return plan.Local{}, false, err
	}
	if !fi.Mode().IsRegular() {
		return plan.Local{Path: p}, true, fmt.Errorf("client: %s is not a regular file", p)
	}
	return plan.Local{Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}, true, nil
}

// expectHolds says whether p is as the planner saw it: absent for a nil
// Expect, else with the same size, mtime and mode.
func (s *Syncer) expectHolds(p string, e *plan.Local) bool {
	l, ok, err := s.statLocal(p)
	if err != nil {
		return false
	}
	if e == nil {
		return !ok
	}
	return ok && l.Size == e.Size && l.MTime == e.MTime && l.Mode == e.Mode
}

// hash chunks a local file and records its chunk list with its stat;
// nothing is recorded when the file changed while it was read.
func (s *Syncer) hash(p string) error {
	_, err := s.hashFile(p)
	return err
}

func (s *Syncer) hashFile(p string) (fileInfo, error) {
	before, ok, err := s.statLocal(p)
	if err != nil || !ok {
		return fileInfo{}, fmt.Errorf("client: hash %s: %w", p, errors.Join(err, ErrChanged))
	}
	f, err := s.root.Open(p)
	if err != nil {
		return fileInfo{}, fmt.Errorf("client: hash %s: %w", p, err)
	}
	defer f.Close()
	var cs []plan.Chunk
	err = chunks.Split(f, func(c chunks.Chunk, _ []byte) error {
		cs = append(cs, plan.Chunk{Hash: c.Hash, Size: c.Size})
		return nil
	})
	if err != nil {
		return fileInfo{}, fmt.Errorf("client: hash %s: %w", p, err)
	}
	after, ok, err := s.statLocal(p)
	if err != nil || !ok || after != before {
		return fileInfo{}, fmt.Errorf("client: hash %s: %w", p, ErrChanged)
	}
	info := fileInfo{Size: after.Size, MTime: after.MTime, Mode: after.Mode, Content: plan.ContentOf(cs), Chunks: cs}
	s.ix.Files[p] = info
	s.localSrc = nil
	return info, s.ix.save(s.root)
}

// execute carries out the actions in order. Uploads of one commit go in
// one Commit request at the first one's place, downloads of one commit
// together at the first one's place. Uploads run side by side (ups): the
// next action of another kind waits until they are done, so the order
// between kinds holds.
func (s *Syncer) execute(ctx context.Context, ups *uploads, acts []plan.Action, rule plan.CommitRule, res *Result) {
	count := func(group []plan.Action, err error) {
		a := group[0]
		switch {
		case err == nil:
			res.Actions += len(group)
		case errors.Is(err, errNotHeld):
			res.Waiting += len(group)
			s.log.Debug("waiting for chunks", "path", a.Path)
		case ctx.Err() != nil:
		default:
			res.Failed += len(group)
			s.log.Warn("action failed", "path", a.Path, "error", err)
		}
	}
	defer ups.wait(count)
	done := make([]bool, len(acts))
	for i, a := range acts {
		if done[i] {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		group := []plan.Action{a}
		done[i] = true
		key := func(b plan.Action) (string, bool) {
			switch b.Kind {
			case plan.ActUpload:
				return "u" + b.Commit, b.Commit != ""
			case plan.ActDownload:
				return "d" + b.Version.Commit, b.Version.Commit != ""
			}
			return "", false
		}
		if k, ok := key(a); ok {
			for j := i + 1; j < len(acts); j++ {
				if k2, ok2 := key(acts[j]); ok2 && k2 == k && !done[j] {
					group = append(group, acts[j])
					done[j] = true
				}
			}
		}
		if a.Kind == plan.ActUpload {
			ups.start(group, a.Commit != "")
			continue
		}
		ups.wait(count)
		var err error
		switch a.Kind {
		case plan.ActTombstone:
			err = s.tombstone(ctx, a)
		case plan.ActDownload:
			err = s.download(ctx, group, rule)
		case plan.ActRemove:
			err = s.remove(a)
		case plan.ActAdopt:
			err = s.adopt(a)
		case plan.ActHash:
			err = s.hash(a.Path)
		}
		count(group, err)
		if ctx.Err() != nil {
			return
		}
	}
}

// tombstone records a local delete.
func (s *Syncer) tombstone(ctx context.Context, a plan.Action) error {
	if !s.expectHolds(a.Path, nil) {
		return fmt.Errorf("client: delete %s: %w", a.Path, ErrChanged)
	}
	var resp *filesharepb.CommitResponse
	err := s.r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		resp, err = api.Commit(ctx, &filesharepb.CommitRequest{Share: s.cfg.Share, NoWait: true,
			Files: []*filesharepb.FileVersion{{Path: a.Path, Deleted: true, Parents: idStrings(a.Parents), Kept: idStrings(a.Kept)}}})
		return err
	})
	if err != nil {
		return s.r.explain("delete "+a.Path, err)
	}
	s.log.Info("deleted", "path", a.Path, "version", resp.Versions[0].GetId())
	// Remember the delete as synced, so that the path is not fetched back
	// while the tombstone is not stable yet.
	s.ix.Base[a.Path] = plan.TombstoneBase(a.Path, plan.VersionID(resp.Versions[0].GetId()))
	delete(s.ix.Files, a.Path)
	return s.ix.save(s.root)
}

// remove deletes a local file whose remote tombstone won.
func (s *Syncer) remove(a plan.Action) error {
	if !s.expectHolds(a.Path, a.Expect) {
		return fmt.Errorf("client: remove %s: %w", a.Path, ErrChanged)
	}
	if err := checkParents(s.root, a.Path); err != nil {
		return err
	}
	if err := s.root.Remove(a.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("client: remove %s: %w", a.Path, err)
	}
	if err := syncDir(s.root, path.Dir(a.Path)); err != nil {
		return err
	}
	s.stats.removed.Add(1)
	s.log.Info("removed", "path", a.Path, "version", a.Version.ID)
	delete(s.ix.Base, a.Path)
	delete(s.ix.Files, a.Path)
	return s.ix.save(s.root)
}

// adopt records that the local file is the version.
func (s *Syncer) adopt(a plan.Action) error {
	// Decide compared the file as it was then: an edit since must be
	// published, not recorded as already synced.
	if a.Expect != nil && !s.expectHolds(a.Path, a.Expect) {
		return fmt.Errorf("client: adopt %s: %w", a.Path, ErrChanged)
	}
	l, ok, err := s.statLocal(a.Path)
	if err != nil {
		return err
	}
	if a.Version.Deleted || !ok {
		delete(s.ix.Base, a.Path)
	} else {
		s.ix.Base[a.Path] = plan.Base{Path: a.Path, Version: a.Version.ID, Content: a.Version.Content, Size: l.Size, MTime: l.MTime, Mode: l.Mode}
	}
	return s.ix.save(s.root)
}

// chunkLoc is where a chunk lies in a local file.
type chunkLoc struct {
	path string
	off  int64
	size uint32
}

// localSources maps the chunks of local files whose chunk list is known
// for their current stat to where they lie.
func (s *Syncer) localSources() map[plan.Hash]chunkLoc {
	if s.localSrc != nil {
		return s.localSrc
	}
	m := map[plan.Hash]chunkLoc{}
	for p, info := range s.ix.Files {
		l, ok, err := s.statLocal(p)
		if err != nil || !ok || !info.matches(l) {
			continue
		}
		var off int64
		for _, c := range info.Chunks {
			if _, dup := m[c.Hash]; !dup {
				m[c.Hash] = chunkLoc{path: p, off: off, size: c.Size}
			}
			off += int64(c.Size)
		}
	}
	s.localSrc = m
	return m
}

// readLocal reads a chunk from a local file, checking its hash.
func (s *Syncer) readLocal(h plan.Hash, at chunkLoc) ([]byte, bool) {
	f, err := s.root.Open(at.path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b := make([]byte, at.size)
	if _, err := f.ReadAt(b, at.off); err != nil || sha256.Sum256(b) != h {
		return nil, false
	}
	return b, true
}

// fetch lands every chunk of the versions in their partial files: copied
// from where it already lies (another partial file, a local file), else
// fetched from the site. Chunks the site lacks make it return errNotHeld
// after it fetched the others. progress says whether to report transfers.
func (s *Syncer) fetch(ctx context.Context, vs []plan.Version, progress bool) error {
	local := s.localSources()
	notHeld := false
	for _, v := range vs {
		t := Transfer{Dir: Download, Path: v.Path, Size: v.Size, Chunks: len(v.Chunks)}
		p, err := s.part(v)
		if err != nil {
			return err
		}
		var need [][]byte
		sizes := map[plan.Hash]uint32{}
		for _, c := range v.Chunks {
			if _, dup := sizes[c.Hash]; dup {
				continue
			}
			sizes[c.Hash] = c.Size
			if !p.needs(c.Hash) {
				t.Reused++ // fetched before, into this partial file
				if progress {
					s.stats.fromPartial.Add(1)
				}
				continue
			}
			b, ok := s.copyLanded(c.Hash)
			if ok && progress {
				s.stats.fromPartial.Add(1)
			}
			if !ok {
				if at, found := local[c.Hash]; found {
					if b, ok = s.readLocal(c.Hash, at); ok && progress {
						s.stats.fromLocal.Add(1)
					}
				}
			}
			if ok {
				t.Reused++
				if err := s.put(p, c.Hash, b, true); err != nil {
					return fmt.Errorf("client: download %s: %w", v.Path, err)
				}
				continue
			}
			need = append(need, append([]byte(nil), c.Hash[:]...))
			t.Bytes += int64(c.Size)
		}
		if len(need) == 0 {
			continue
		}
		if progress {
			s.startTransfer(t)
		}
		err = s.getChunks(ctx, need, sizes, &t, progress, p)
		if progress {
			s.finishTransfer(t, err)
		}
		switch {
		case errors.Is(err, errNotHeld):
			notHeld = true
		case err != nil:
			return err
		}
	}
	if notHeld {
		return errNotHeld
	}
	return nil
}

// getChunks fetches chunks into a partial file, in batches.
func (s *Syncer) getChunks(ctx context.Context, need [][]byte, sizes map[plan.Hash]uint32, t *Transfer, progress bool, p *part) error {
	notHeld := false
	for len(need) > 0 {
		n, bytes := 0, int64(0)
		for n < len(need) && n < getChunksBatch && (n == 0 || bytes+int64(sizes[plan.Hash(need[n])]) <= getChunksBytes) {
			bytes += int64(sizes[plan.Hash(need[n])])
			n++
		}
		batch := need[:n]
		need = need[n:]
		api, i, _ := s.r.api()
		stream, err := api.GetChunks(ctx, &filesharepb.GetChunksRequest{Hashes: batch, Share: s.cfg.Share})
		if err != nil {
			s.r.failed(i)
			return s.r.explain("get chunks of "+t.Path, err)
		}
		for {
			cd, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				s.r.failed(i)
				return s.r.explain("get chunks of "+t.Path, err)
			}
			if !cd.Held || len(cd.Hash) != 32 {
				notHeld = true
				continue
			}
			if err := s.put(p, plan.Hash(cd.Hash), cd.Data, false); err != nil {
				return fmt.Errorf("client: download %s: %w", t.Path, err)
			}
			s.stats.chunksDown.Add(1)
			s.stats.bytesDown.Add(int64(len(cd.Data)))
			t.Done += int64(len(cd.Data))
			if progress {
				s.advanceTransfer(*t)
			}
		}
	}
	if notHeld {
		return errNotHeld
	}
	return nil
}

// assemble makes a version's complete partial file the file at tmp (fsync,
// rename) and gives it the version's mode and mtime.
func (s *Syncer) assemble(v plan.Version, tmp string) error {
	done, err := s.finish(v.ID, tmp)
	if err != nil {
		return fmt.Errorf("client: download %s: %w", v.Path, err)
	}
	if !done {
		// fetch completed it in this round; only a partial file removed
		// or truncated behind our back gets here.
		if p := s.parts[v.ID]; p != nil {
			s.forget(p)
			p.f.Close()
			delete(s.parts, v.ID)
		}
		return fmt.Errorf("client: download %s: its partial file is incomplete: %w", v.Path, ErrChanged)
	}
	return s.setMeta(v, tmp)
}

// setMeta gives an assembled file the version's mode and mtime.
func (s *Syncer) setMeta(v plan.Version, tmp string) error {
	mode := fs.FileMode(v.Mode).Perm()
	if mode == 0 {
		mode = 0o644
	}
	err := s.root.Chmod(tmp, mode)
	if err == nil && v.MTime != 0 {
		mt := time.Unix(0, v.MTime)
		err = s.root.Chtimes(tmp, mt, mt)
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return fmt.Errorf("client: download %s: %w", v.Path, err)
	}
	return nil
}

// download makes versions visible: one, or the files of one commit.
func (s *Syncer) download(ctx context.Context, acts []plan.Action, rule plan.CommitRule) error {
	vs := make([]plan.Version, len(acts))
	for i, a := range acts {
		vs[i] = a.Version
		vs[i].Path = a.Path
	}
	if err := s.fetch(ctx, vs, true); err != nil {
		return err
	}
	if len(acts) > 1 {
		if ok, err := s.installDir(ctx, acts, rule); ok || err != nil {
			return err
		}
	}
	for _, a := range acts {
		v := a.Version
		v.Path = a.Path
		tmp := tmpName()
		if err := s.assemble(v, tmp); err != nil {
			return err
		}
		if err := s.install(tmp, a); err != nil {
			_ = s.root.Remove(tmp)
			return err
		}
	}
	return nil
}

// install renames an assembled file into place if the local file is as
// the planner saw it, and records it.
func (s *Syncer) install(tmp string, a plan.Action) error {
	if err := checkParents(s.root, a.Path); err != nil {
		return err
	}
	dir := path.Dir(a.Path)
	if err := s.root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("client: download %s: %w", a.Path, err)
	}
	// The stat recorded is the assembled file's, taken before the
	// rename (which keeps it): a write that lands right after the rename
	// then differs from the index and is published, not lost.
	l, _, err := s.statLocal(tmp)
	if err != nil {
		return err
	}
	if !s.expectHolds(a.Path, a.Expect) {
		return fmt.Errorf("client: download %s: %w", a.Path, ErrChanged)
	}
	if err := s.root.Rename(tmp, a.Path); err != nil {
		return fmt.Errorf("client: download %s: %w", a.Path, err)
	}
	if err := syncDir(s.root, dir); err != nil {
		return err
	}
	return s.recordDownload(a, l)
}

// recordDownload records a version made visible, with the stat its file
// had when assembled.
func (s *Syncer) recordDownload(a plan.Action, l plan.Local) error {
	v := a.Version
	s.ix.Base[a.Path] = plan.Base{Path: a.Path, Version: v.ID, Content: v.Content, Size: l.Size, MTime: l.MTime, Mode: l.Mode}
	s.ix.Files[a.Path] = fileInfo{Size: l.Size, MTime: l.MTime, Mode: l.Mode, Content: v.Content, Chunks: v.Chunks}
	s.localSrc = nil
	s.stats.filesDown.Add(1)
	s.log.Info("downloaded", "path", a.Path, "version", v.ID)
	return s.ix.save(s.root)
}

// installDir makes a commit's files visible with one rename of their
// directory, when it does not exist locally; false when it does (then
// they go in one by one).
func (s *Syncer) installDir(ctx context.Context, acts []plan.Action, rule plan.CommitRule) (bool, error) {
	dir := rule.CommitDir(acts[0].Path)
	if dir == "" {
		return false, nil
	}
	for _, a := range acts {
		if rule.CommitDir(a.Path) != dir || a.Expect != nil {
			return false, nil
		}
	}
	if _, err := s.root.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := checkParents(s.root, dir+"/x"); err != nil {
		return true, err
	}
	tmp := tmpName()
	if err := s.root.Mkdir(tmp, 0o755); err != nil {
		return true, fmt.Errorf("client: download %s: %w", dir, err)
	}
	fail := func(err error) (bool, error) {
		_ = s.root.RemoveAll(tmp)
		return true, err
	}
	dirs := map[string]bool{tmp: true}
	var stats []plan.Local
	for _, a := range acts {
		rel := strings.TrimPrefix(a.Path, dir+"/")
		target := path.Join(tmp, rel)
		if d := path.Dir(target); !dirs[d] {
			if err := s.root.MkdirAll(d, 0o755); err != nil {
				return fail(fmt.Errorf("client: download %s: %w", a.Path, err))
			}
			for x := d; x != tmp && !dirs[x]; x = path.Dir(x) {
				dirs[x] = true
			}
		}
		v := a.Version
		v.Path = a.Path
		if err := s.assemble(v, target); err != nil {
			return fail(err)
		}
		l, _, err := s.statLocal(target)
		if err != nil {
			return fail(err)
		}
		stats = append(stats, l)
	}
	for d := range dirs {
		if err := syncDir(s.root, d); err != nil {
			return fail(err)
		}
	}
	parent := path.Dir(dir)
	if err := s.root.MkdirAll(parent, 0o755); err != nil {
		return fail(fmt.Errorf("client: download %s: %w", dir, err))
	}
	if _, err := s.root.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("client: download %s: %w", dir, ErrChanged))
	}
	if err := s.root.Rename(tmp, dir); err != nil {
		return fail(fmt.Errorf("client: download %s: %w", dir, err))
	}
	if err := syncDir(s.root, parent); err != nil {
		return true, err
	}
	for i, a := range acts {
		if err := s.recordDownload(a, stats[i]); err != nil {
			return true, err
		}
	}
	s.log.Info("commit downloaded", "dir", dir, "files", len(acts), "commit", acts[0].Version.Commit)
	return true, nil
}

// prefetch fetches into their partial files the chunks of versions not shown yet
// (not stable, or pending) that other sites wrote, as they reach the site.
func (s *Syncer) prefetch(ctx context.Context, versions []plan.Version, view plan.View) {
	pending := map[plan.VersionID]bool{}
	for _, p := range view.Pending {
		pending[p.ID] = true
	}
	var vs []plan.Version
	for _, v := range versions {
		if (pending[v.ID] || !v.Stable) && !v.Deleted && safepath.Check(v.Path) == nil {
			if b, ok := s.ix.Base[v.Path]; ok && b.Version == v.ID {
				continue // ours
			}
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return
	}
	if err := s.fetch(ctx, vs, false); err != nil && !errors.Is(err, errNotHeld) {
		s.log.Debug("prefetch", "error", err)
	}
}
