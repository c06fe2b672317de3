package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// Defaults of Options.
const (
	DefaultUploads     = 4
	DefaultUploadBytes = 64 << 20
)

// uploads are the uploads of one round: files push their chunks side by
// side, at most Options.Uploads at once and within Options.UploadBytes of
// chunk bytes not yet stored by the site, each file on a PutChunks stream
// of its own. The round's goroutine prepares each upload (the index is
// its own), starts it and goes on; before an action of another kind, and
// before the round ends, it waits for every upload started and records
// them (wait). Prestaged files (prestage) push through the same pool, and
// an upload of a file waits for its prestage first. A prestage outlives
// the round that started it: the next round hashes and prestages the next
// file a trainer finished while this one's chunks still go up, instead of
// waiting for them.
type uploads struct {
	s   *Syncer
	ctx context.Context
	wg  sync.WaitGroup
	// tasks: upload groups started and not yet recorded, in order.
	tasks []*uploadTask
}

// staging is, per path, the prestage in flight (closed when done), across
// rounds; its mutex is a leaf.
type staging struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// uploadTask is one group of uploads: a file, or the files of a commit.
type uploadTask struct {
	acts   []plan.Action
	commit bool
	infos  []fileInfo
	// Set by the task's goroutine, read after uploads.wg.Wait.
	versions []*filesharepb.Version
	err      error
}

func (s *Syncer) newUploads(ctx context.Context) *uploads {
	return &uploads{s: s, ctx: ctx}
}

// start prepares a group of uploads and starts pushing it.
func (u *uploads) start(acts []plan.Action, commit bool) {
	t := &uploadTask{acts: acts, commit: commit}
	u.tasks = append(u.tasks, t)
	for _, a := range acts {
		info, err := u.s.prepareUpload(a)
		if err != nil {
			t.err = err
			return
		}
		t.infos = append(t.infos, info)
	}
	waitFor := map[string]chan struct{}{}
	u.s.staging.mu.Lock()
	defer u.s.staging.mu.Unlock()
	for _, a := range acts {
		if ch, ok := u.s.staging.m[a.Path]; ok {
			waitFor[a.Path] = ch
		}
	}
	u.wg.Go(func() { t.versions, t.err = u.s.publish(u.ctx, t, waitFor) })
}

// prestage starts pushing the chunks of a settled file of a commit
// directory whose marker has not appeared yet (see Syncer.prestage).
func (u *uploads) prestage(p string) {
	s := u.s
	info, ok := s.ix.Files[p]
	if !ok {
		return
	}
	s.staging.mu.Lock()
	defer s.staging.mu.Unlock()
	if _, busy := s.staging.m[p]; busy {
		return
	}
	done := make(chan struct{})
	s.staging.m[p] = done
	ctx := u.ctx
	s.goroutine(func() {
		defer func() {
			s.staging.mu.Lock()
			delete(s.staging.m, p)
			s.staging.mu.Unlock()
			close(done)
		}()
		s.prestage(ctx, p, info)
	})
}

// wait waits for every upload started and records those that succeeded,
// calling count for each group.
func (u *uploads) wait(count func(acts []plan.Action, err error)) {
	u.wg.Wait()
	for _, t := range u.tasks {
		err := t.err
		if err == nil {
			err = u.s.recordUpload(t)
		}
		count(t.acts, err)
	}
	u.tasks = nil
}

// publish pushes the chunks of a group's files the site lacks, files side
// by side, then records their versions with one Commit request (commit
// says they are one commit).
//
// The chunks go up first, then the versions are recorded. (The site can
// also record versions before their chunks, CommitRequest.early, so that
// other sites' clients fetch the chunks while they cross; measured on the
// file bench it cost more than it saved: every List then locates each
// chunk by hash, and prefetching rounds ask for chunks not arrived yet.)
func (s *Syncer) publish(ctx context.Context, t *uploadTask, staging map[string]chan struct{}) ([]*filesharepb.Version, error) {
	start := time.Now()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
			cancel()
		}
	}
	for i, a := range t.acts {
		if ch := staging[a.Path]; ch != nil {
			select {
			case <-ch:
			case <-pctx.Done():
			}
		}
		if err := s.slot(pctx); err != nil {
			fail(err)
			break
		}
		wg.Go(func() {
			defer s.unslot()
			if err := s.pushFile(pctx, a.Path, t.infos[i]); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if first != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, first
	}
	pushed := time.Since(start)
	files := make([]*filesharepb.FileVersion, len(t.acts))
	for i, a := range t.acts {
		info := t.infos[i]
		files[i] = &filesharepb.FileVersion{Path: a.Path, Parents: idStrings(a.Parents), Kept: idStrings(a.Kept),
			Size: info.Size, Mode: info.Mode, Mtime: info.MTime, Chunks: chunkRefs(info.Chunks)}
	}
	var resp *filesharepb.CommitResponse
	err := s.r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		resp, err = api.Commit(ctx, &filesharepb.CommitRequest{Share: s.cfg.Share, Files: files, Commit: t.commit, NoWait: true})
		return err
	})
	if err != nil {
		return nil, s.r.explain("commit "+t.acts[0].Path, err)
	}
	s.log.Debug("committed", "first", t.acts[0].Path, "files", len(t.acts), "chunks_took", pushed, "commit_took", time.Since(start)-pushed)
	if len(resp.Versions) != len(t.acts) {
		return nil, fmt.Errorf("client: commit %s: the site answered %d versions for %d files", t.acts[0].Path, len(resp.Versions), len(t.acts))
	}
	return resp.Versions, nil
}

// recordUpload records a group's versions in the index, from the round's
// goroutine.
func (s *Syncer) recordUpload(t *uploadTask) error {
	for i, v := range t.versions {
		a, info := t.acts[i], t.infos[i]
		s.ix.Base[a.Path] = plan.Base{Path: a.Path, Version: plan.VersionID(v.Id), Content: info.Content,
			Size: info.Size, MTime: info.MTime, Mode: info.Mode}
		s.stats.filesUp.Add(1)
		s.log.Info("uploaded", "path", a.Path, "version", v.Id)
	}
	return s.ix.save(s.root)
}

// slot waits for one of the Options.Uploads files that may push at once.
func (s *Syncer) slot(ctx context.Context) error {
	select {
	case s.upSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Syncer) unslot() { <-s.upSlots }

// prepareUpload returns a local file's chunk list, as the index has it for
// the file's stat or chunking it again.
func (s *Syncer) prepareUpload(a plan.Action) (fileInfo, error) {
	l, ok, err := s.statLocal(a.Path)
	if err != nil || !ok {
		return fileInfo{}, fmt.Errorf("client: upload %s: %w", a.Path, errors.Join(err, ErrChanged))
	}
	if a.Expect != nil && (l.Size != a.Expect.Size || l.MTime != a.Expect.MTime || l.Mode != a.Expect.Mode) {
		return fileInfo{}, fmt.Errorf("client: upload %s: %w", a.Path, ErrChanged)
	}
	info, known := s.ix.Files[a.Path]
	if !known || !info.matches(l) {
		if info, err = s.hashFile(a.Path); err != nil {
			return fileInfo{}, err
		}
	}
	return info, nil
}

// prestage puts the chunks of a settled file of a commit directory whose
// marker has not appeared yet. The site appends them to its files stream,
// so they cross to the other sites while the trainer writes the rest of
// the checkpoint; at the commit only what changed since is left to move
// (the commit's upload asks the site what it lacks again). Nothing becomes
// visible: no version names the chunks until the commit, and a checkpoint
// abandoned half-way leaves chunks the site's collector drops after its
// grace period. A failure here only costs the time it would have saved.
func (s *Syncer) prestage(ctx context.Context, p string, info fileInfo) {
	if err := s.slot(ctx); err != nil {
		return
	}
	defer s.unslot()
	start := time.Now()
	err := s.pushFile(ctx, p, info)
	if err != nil && ctx.Err() == nil {
		s.log.Debug("prestage", "path", p, "error", err)
		return
	}
	s.log.Debug("prestaged", "path", p, "took", time.Since(start))
}

// pushFile puts the chunks of a local file the site lacks and checks the
// file did not change meanwhile.
func (s *Syncer) pushFile(ctx context.Context, p string, info fileInfo) error {
	// Which distinct chunks the site lacks.
	var hashes [][]byte
	seenH := map[plan.Hash]bool{}
	for _, c := range info.Chunks {
		if !seenH[c.Hash] {
			seenH[c.Hash] = true
			hashes = append(hashes, append([]byte(nil), c.Hash[:]...))
		}
	}
	lack := map[plan.Hash]bool{}
	for i := 0; i < len(hashes); i += missingBatch {
		batch := hashes[i:min(i+missingBatch, len(hashes))]
		var resp *filesharepb.MissingResponse
		err := s.r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
			var err error
			resp, err = api.Missing(ctx, &filesharepb.MissingRequest{Hashes: batch, Share: s.cfg.Share})
			return err
		})
		if err != nil {
			return s.r.explain("missing chunks of "+p, err)
		}
		for _, h := range resp.Missing {
			lack[plan.Hash(h)] = true
		}
	}
	s.stats.deduped.Add(int64(len(hashes) - len(lack)))
	t := Transfer{Dir: Upload, Path: p, Size: info.Size, Chunks: len(info.Chunks), Reused: len(hashes) - len(lack)}
	for _, c := range info.Chunks {
		if lack[c.Hash] {
			t.Bytes += int64(c.Size)
		}
	}
	if len(lack) > 0 {
		s.startTransfer(t)
		err := s.putChunks(ctx, p, info, lack, &t)
		s.finishTransfer(t, err)
		if err != nil {
			return err
		}
	}
	after, ok, err := s.statLocal(p)
	if err != nil || !ok || !info.matches(after) {
		return fmt.Errorf("client: upload %s: %w", p, errors.Join(err, ErrChanged))
	}
	return nil
}

// putChunks streams the chunks in lack, read from the file at their
// offsets and checked against their hashes, to the site. Each chunk's
// bytes count against the uploads' budget (Options.UploadBytes) from
// before it is read until the site answers it.
func (s *Syncer) putChunks(ctx context.Context, p string, info fileInfo, lack map[plan.Hash]bool, t *Transfer) error {
	f, err := s.root.Open(p)
	if err != nil {
		return fmt.Errorf("client: upload %s: %w", p, err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api, i, _ := s.r.api()
	stream, err := api.PutChunks(ctx)
	if err != nil {
		s.r.failed(i)
		return s.r.explain("put chunks of "+p, err)
	}
	// inFlight: the sizes of the chunks sent and not answered, in order;
	// the answers come in the order sent.
	var flight struct {
		sync.Mutex
		sizes []int64
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			_, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				recvErr <- err
				return
			}
			flight.Lock()
			if len(flight.sizes) > 0 {
				s.upBudget.release(flight.sizes[0])
				flight.sizes = flight.sizes[1:]
			}
			flight.Unlock()
		}
	}()
	defer func() {
		flight.Lock()
		for _, n := range flight.sizes {
			s.upBudget.release(n)
		}
		flight.sizes = nil
		flight.Unlock()
	}()
	var off int64
	sending := map[plan.Hash]bool{}
	var sendErr error
	for _, c := range info.Chunks {
		o := off
		off += int64(c.Size)
		if !lack[c.Hash] || sending[c.Hash] {
			continue
		}
		sending[c.Hash] = true
		if err := s.upBudget.acquire(ctx, int64(c.Size)); err != nil {
			sendErr = err
			break
		}
		flight.Lock()
		flight.sizes = append(flight.sizes, int64(c.Size))
		flight.Unlock()
		buf := make([]byte, c.Size)
		if _, err := f.ReadAt(buf, o); err != nil {
			sendErr = fmt.Errorf("client: upload %s: %w", p, errors.Join(err, ErrChanged))
			break
		}
		if sha256.Sum256(buf) != c.Hash {
			sendErr = fmt.Errorf("client: upload %s: %w", p, ErrChanged)
			break
		}
		if err := stream.Send(&filesharepb.PutChunkRequest{Hash: append([]byte(nil), c.Hash[:]...), Data: buf, Share: s.cfg.Share}); err != nil {
			break // the receiver sees why
		}
		s.stats.chunksUp.Add(1)
		s.stats.bytesUp.Add(int64(c.Size))
		t.Done += int64(c.Size)
		s.advanceTransfer(*t)
	}
	if sendErr != nil {
		cancel()
		<-recvErr
		return sendErr
	}
	_ = stream.CloseSend()
	err = <-recvErr
	if err != nil {
		s.r.failed(i)
		return s.r.explain("put chunks of "+p, err)
	}
	return nil
}

// budget bounds the bytes held by a group of goroutines: acquire waits
// until n more fit (n alone always fits when nothing is held), release
// gives them back.
type budget struct {
	max int64
	mu  struct {
		sync.Mutex
		used int64
		wake chan struct{} // closed and replaced on every release
	}
}

func newBudget(max int64) *budget {
	b := &budget{max: max}
	b.mu.wake = make(chan struct{})
	return b
}

func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.mu.used == 0 || b.mu.used+n <= b.max {
			b.mu.used += n
			b.mu.Unlock()
			return nil
		}
		wake := b.mu.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.used -= n
	close(b.mu.wake)
	b.mu.wake = make(chan struct{})
}
