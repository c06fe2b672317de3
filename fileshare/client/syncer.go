package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// Options are what a program gives a Syncer beside the folder's Config.
// The zero value is the default everywhere.
type Options struct {
	// Logger gets the engine's logs (default: none).
	Logger hclog.Logger
	// Progress gets every transfer (default: none).
	Progress Progress
	// DialOptions replace the default gRPC options (plaintext); the
	// message size bounds (MaxMessage) are added to them.
	DialOptions []grpc.DialOption
	// Now is the clock of settling (default time.Now).
	Now func() time.Time
	// AllowMassDelete lets the first round that would stop for a mass
	// delete go on (stabsync run --allow-mass-delete): once.
	AllowMassDelete bool
	// SettleTime, RescanInterval and RetryInterval override the config's
	// when > 0.
	SettleTime, RescanInterval, RetryInterval time.Duration
	// CaseInsensitive treats the folder as on a case-folding filesystem
	// whatever Init's probe found.
	CaseInsensitive bool
	// Uploads is how many files push their chunks to the site at once,
	// each on a stream of its own (default DefaultUploads, 4): the files
	// of a checkpoint go up side by side.
	Uploads int
	// UploadBytes bounds the chunk bytes read for uploads and not yet
	// stored by the site, all uploads together (default
	// DefaultUploadBytes, 64 MiB), so that memory stays bounded whatever
	// the number and size of the files. A chunk larger than it still goes,
	// alone.
	UploadBytes int64
	// FullListInterval is how often the client lists its share in full
	// although the site answers only what changed since its last List
	// (default DefaultFullListInterval, 5 min): a safety net.
	FullListInterval time.Duration
}

// Syncer syncs one folder with its share. Open makes one; Run syncs until
// its ctx ends; SyncOnce runs one round; Status, Versions, Restore and
// Conflicts ask the site. Close releases it.
type Syncer struct {
	folder   string
	root     *os.Root
	cfg      Config
	log      hclog.Logger
	progress Progress
	now      func() time.Time
	r        *remote
	stats    stats
	kick     chan struct{} // a round is due; buffered 1
	upSlots  chan struct{} // one per file pushing chunks (Options.Uploads)
	upBudget *budget       // chunk bytes sent and not yet answered (Options.UploadBytes)
	staging  staging       // prestages in flight, across rounds (upload.go)

	fullListEvery time.Duration // Options.FullListInterval

	// Owned by the round (runMu).
	runMu sync.Mutex
	ix    *index
	seen  map[string]seen
	// missing: when each synced path was first found missing (deletes
	// wait for the settle time, see vanishing).
	missing   map[string]time.Time
	share     *Share
	allowOnce bool
	badLogged map[string]bool
	// pathChecks: per path of the share, why it is refused ("" if not).
	pathChecks map[string]string
	localSrc   map[plan.Hash]chunkLoc   // chunks of local files, for downloads; nil until needed
	parts      map[plan.VersionID]*part // files being assembled in place (partial.go)
	landings   map[plan.Hash]landing    // where chunks lie in parts, for the other versions that need them
	list       shareList                // the share's list as last answered (view.go)

	// saveMu serialises writes of the status file (saveStatus), from the
	// round and from its uploads; it comes after runMu and before mu, and
	// is held across the write.
	saveMu     sync.Mutex
	lastSaveAt time.Time // guarded by saveMu

	mu struct {
		sync.Mutex
		closed    bool
		running   bool
		status    Status
		transfers map[string]Transfer
	}
	wg sync.WaitGroup // the goroutines of Run
}

// Open opens an initialized folder. It starts no goroutine and does not
// reach the site.
func Open(folder string, o Options) (*Syncer, error) {
	fi, err := os.Stat(folder)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("client: folder %s does not exist: %w", folder, ErrNoFolder)
		}
		return nil, fmt.Errorf("client: folder %s: %w", folder, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("client: folder %s is not a directory: %w", folder, ErrNoFolder)
	}
	root, err := os.OpenRoot(folder)
	if err != nil {
		return nil, fmt.Errorf("client: folder %s: %w", folder, err)
	}
	cfg, err := readConfig(root, folder)
	if err != nil {
		root.Close()
		return nil, err
	}
	cfg = cfg.withDefaults()
	if o.SettleTime > 0 {
		cfg.SettleTime = Duration(o.SettleTime)
	}
	if o.RescanInterval > 0 {
		cfg.RescanInterval = Duration(o.RescanInterval)
	}
	if o.RetryInterval > 0 {
		cfg.RetryInterval = Duration(o.RetryInterval)
	}
	cfg.CaseInsensitive = cfg.CaseInsensitive || o.CaseInsensitive
	if err := root.MkdirAll(path.Join(safepath.StateDir, tmpDir), 0o755); err != nil {
		root.Close()
		return nil, fmt.Errorf("client: %w", err)
	}
	// Leftovers of a process that died, unless a stabsync run holds the
	// folder (stabsync status opens it too): its temp files, never renamed
	// into place, and the chunk cache of earlier releases (downloads
	// resume from partial files now).
	if lock, err := lockRoot(root, folder); err == nil {
		if ents, err := fs.ReadDir(root.FS(), path.Join(safepath.StateDir, tmpDir)); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), tmpPrefix) {
					_ = root.RemoveAll(path.Join(safepath.StateDir, tmpDir, e.Name()))
				}
			}
		}
		err := root.RemoveAll(path.Join(safepath.StateDir, legacyChunkDir))
		lock.Close()
		if err != nil {
			root.Close()
			return nil, fmt.Errorf("client: remove the chunk cache of an earlier release: %w", err)
		}
	}
	ix, err := loadIndex(root)
	if err != nil {
		root.Close()
		return nil, err
	}
	r, err := dialRemote(cfg.Sites, cfg.Share, o.DialOptions)
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &Syncer{folder: folder, root: root, cfg: cfg, log: o.Logger, progress: o.Progress, now: o.Now, r: r,
		kick: make(chan struct{}, 1), ix: ix, seen: map[string]seen{},
		allowOnce: o.AllowMassDelete, badLogged: map[string]bool{}, pathChecks: map[string]string{}, parts: map[plan.VersionID]*part{},
		landings: map[plan.Hash]landing{}}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	if s.progress == nil {
		s.progress = nopProgress{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if o.Uploads <= 0 {
		o.Uploads = DefaultUploads
	}
	if o.UploadBytes <= 0 {
		o.UploadBytes = DefaultUploadBytes
	}
	s.upSlots, s.upBudget = make(chan struct{}, o.Uploads), newBudget(o.UploadBytes)
	s.staging.m = map[string]chan struct{}{}
	s.fullListEvery = o.FullListInterval
	if s.fullListEvery <= 0 {
		s.fullListEvery = DefaultFullListInterval
	}
	s.mu.transfers = map[string]Transfer{}
	return s, nil
}

// Folder is the folder synced; Config its configuration with defaults.
func (s *Syncer) Folder() string { return s.folder }

// Config returns the folder's configuration, defaults filled in.
func (s *Syncer) Config() Config { return s.cfg }

// Stats returns what the syncer moved so far.
func (s *Syncer) Stats() Stats { return s.stats.snapshot() }

// Close releases the folder and the connections. It waits for Run to
// return if one runs (cancel its ctx first). It is idempotent.
func (s *Syncer) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.runMu.Lock() // waits for a round or a Run in progress
	defer s.runMu.Unlock()
	s.wg.Wait()
	s.r.close()
	s.closeParts()
	return s.root.Close()
}

// goroutine starts f as one of Run's goroutines.
func (s *Syncer) goroutine(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

func (s *Syncer) trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run syncs both ways until ctx ends, then returns nil after the file
// write in progress is finished or abandoned (a file is only ever renamed
// into place complete). It takes the folder's lock: one Run per folder.
// Rounds run on notifications of the folder, on the site's Watch events,
// on every rescan interval, when an unsettled file settles and, after a
// failure or while chunks have not arrived, on every retry interval. A
// mass delete stops syncing (status says so) until the files come back
// or a Syncer opened with AllowMassDelete runs.
func (s *Syncer) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closed || s.mu.running {
		s.mu.Unlock()
		return fmt.Errorf("client: run %s: closed or running already", s.folder)
	}
	s.mu.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.mu.running = false
		s.mu.Unlock()
	}()
	lock, err := s.lock()
	if err != nil {
		return err
	}
	defer lock.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("no notifications; rescans only", "error", err)
	} else {
		s.goroutine(func() { s.notifications(ctx, w) })
	}
	s.goroutine(func() { s.watchSite(ctx) })

	rescan := time.Duration(s.cfg.RescanInterval)
	retry := time.Duration(s.cfg.RetryInterval)
	watched := map[string]bool{}
	for {
		res, err := s.SyncOnce(ctx)
		if ctx.Err() != nil {
			s.setState("stopped", "")
			return nil
		}
		wait := rescan
		switch {
		case err != nil:
			s.log.Warn("round failed", "error", err)
			s.setState("error", err.Error())
			wait = retry
		case res.Actions > 0 && res.Failed == 0:
			wait = 0 // see what the actions changed
		case res.Waiting > 0 || res.Failed > 0:
			wait = retry
		}
		if !res.Wake.IsZero() {
			if d := res.Wake.Sub(s.now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		if w != nil {
			for _, d := range res.dirs {
				if !watched[d] {
					if err := w.Add(path.Join(s.folder, d)); err == nil {
						watched[d] = true
						// What changed in d before the watch went unseen.
						wait = 0
					}
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			s.setState("stopped", "")
			return nil
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// lock takes the folder's lock file, so that one Run syncs a folder.
func (s *Syncer) lock() (*os.File, error) { return lockRoot(s.root, s.folder) }

func lockRoot(root *os.Root, folder string) (*os.File, error) {
	f, err := root.OpenFile(path.Join(safepath.StateDir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("client: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("client: %s: %w", folder, ErrLocked)
	}
	return f, nil
}

// notifications kicks a round on every change under the folder (not its
// state dir) and watches new directories at once; the round after adds
// the rest.
func (s *Syncer) notifications(ctx context.Context, w *fsnotify.Watcher) {
	defer w.Close()
	state := path.Join(s.folder, safepath.StateDir)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Name == state || len(ev.Name) > len(state) && ev.Name[:len(state)+1] == state+"/" {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					_ = w.Add(ev.Name)
				}
			}
			s.trigger()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			s.log.Warn("notifications", "error", err) // an overflow: rescan
			s.trigger()
		}
	}
}

// watchSite kicks a round on every event of the share's Watch stream,
// opening it again after the retry interval when it ends.
func (s *Syncer) watchSite(ctx context.Context) {
	retry := time.Duration(s.cfg.RetryInterval)
	for ctx.Err() == nil {
		api, i, addr := s.r.api()
		stream, err := api.Watch(ctx, &filesharepb.WatchRequest{Share: s.cfg.Share})
		if err == nil {
			for {
				if _, err = stream.Recv(); err != nil {
					break
				}
				s.trigger()
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Debug("watch ended", "site", addr, "error", err)
		s.r.failed(i)
		s.trigger()
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Result says what one round did.
type Result struct {
	Actions    int              // actions carried out
	Failed     int              // actions that failed (retried next round)
	Waiting    int              // downloads waiting for chunks to reach the site
	Unsettled  int              // local files not settled yet
	Refused    []string         // paths of the share not materialized, with why
	MassDelete *plan.MassDelete // set when the round stopped for a mass delete
	Wake       time.Time        // when the next unsettled file settles
	dirs       []string
}

// commitRule fetches the share's definition once.
func (s *Syncer) shareDef(ctx context.Context) (*Share, error) {
	if s.share != nil {
		return s.share, nil
	}
	sh, err := s.r.getShare(ctx)
	if err != nil {
		return nil, s.r.explain("share "+s.cfg.Share, err)
	}
	d := shareFromPB(sh)
	s.share = &d
	return s.share, nil
}

// SyncOnce runs one round: scan, List, Resolve, Decide, carry out the
// actions in order (hashing first and deciding again).
func (s *Syncer) SyncOnce(ctx context.Context) (Result, error) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	s.stats.rounds.Add(1)
	var res Result
	sh, err := s.shareDef(ctx)
	if err != nil {
		return res, err
	}
	rule := plan.CommitRule{Marker: sh.CommitMarker, Dirs: sh.CommitDirs}
	// The round's uploads: prestages started by a pass go on while the
	// next pass decides again, and the uploads of the last one wait for
	// them (uploads.start).
	ups := s.newUploads(ctx)
	defer ups.wg.Wait()
	for range 8 {
		s.localSrc = nil
		missing := s.folderMissing()
		var sc scanResult
		if !missing {
			if sc, err = s.scan(s.now()); err != nil {
				missing = true
			}
		}
		res.dirs, res.Wake = sc.dirs, sc.wake
		versions, site, err := s.listShare(ctx)
		if err != nil {
			return res, err
		}
		view := s.resolve(versions)
		res.Refused = s.filterView(&view, loadIgnorer(s.root))
		in := plan.Input{View: view, Local: sc.local, Base: s.ix.Base, FolderMissing: missing, Commit: rule}
		if !missing {
			var wake time.Time
			in.Vanishing, wake = s.vanishing(sc.local, s.now())
			if !wake.IsZero() && (res.Wake.IsZero() || wake.Before(res.Wake)) {
				res.Wake = wake
			}
		}
		dec := plan.Decide(in)
		if md := dec.MassDelete; md != nil && s.allowOnce && !missing {
			in.AllowMassDelete = true
			dec = plan.Decide(in)
			// The allowance is spent by the round whose deletes leave,
			// not by one where they still wait for the settle time.
			if len(in.Vanishing) == 0 {
				s.log.Warn("mass delete allowed once", "missing", md.Missing, "total", md.Total)
				s.allowOnce = false
			}
		}
		if dec.MassDelete != nil {
			res.MassDelete = dec.MassDelete
			s.log.Error("stopped: mass delete", "folder", s.folder, "error", dec.MassDelete.Error())
			s.setMassDelete(dec.MassDelete)
			s.writeStatus(site, view)
			return res, nil
		}
		s.setMassDelete(nil)
		hashed := false
		for _, a := range dec.Actions {
			if a.Kind == plan.ActHash {
				hashed = true
				if err := s.hash(a.Path); err != nil {
					s.log.Info("hash", "path", a.Path, "error", err)
				} else if rule.CommitDir(a.Path) != "" {
					ups.prestage(a.Path)
				}
			}
		}
		if hashed {
			continue
		}
		for _, l := range sc.local {
			if !l.Settled {
				res.Unsettled++
			}
		}
		res.Unsettled += len(in.Vanishing) // deletes waiting to settle
		s.execute(ctx, ups, dec.Actions, rule, &res)
		if ctx.Err() == nil {
			s.prefetch(ctx, versions, view)
			if res.Waiting == 0 && res.Failed == 0 && len(view.Pending) == 0 && !anyUnstable(versions) {
				s.dropParts()
			}
		}
		s.stats.conflicts.Store(int64(len(view.Conflicts)))
		s.writeStatus(site, view)
		return res, nil
	}
	return res, nil
}

// filterView drops from the view the paths the folder must not
// materialize: bad ones (safepath.Check), ignored ones, and on a
// case-folding filesystem all but the lexically first of paths that fold
// to the same name. It returns them with why, and logs each once.
func (s *Syncer) filterView(v *plan.View, ig ignorer) []string {
	type refusal struct{ p, why string }
	var refusals []refusal
	for p := range v.Files {
		if why := s.checkPath(p); why != "" {
			refusals = append(refusals, refusal{p, why})
		} else if ig.ignored(p, false) {
			delete(v.Files, p) // ignored here: not an error
		}
	}
	if s.cfg.CaseInsensitive {
		var shown []string
		for p, x := range v.Files {
			if !x.Deleted && s.checkPath(p) == "" {
				shown = append(shown, p)
			}
		}
		for _, g := range safepath.Collisions(shown) {
			sort.Strings(g)
			for _, p := range g[1:] {
				refusals = append(refusals, refusal{p, "case-fold collision with " + g[0]})
			}
		}
	}
	slices.SortFunc(refusals, func(a, b refusal) int { return strings.Compare(a.p, b.p) })
	refused := make([]string, 0, len(refusals))
	for _, r := range refusals {
		delete(v.Files, r.p)
		refused = append(refused, r.p+": "+r.why)
		if !s.badLogged[r.p] {
			s.badLogged[r.p] = true
			s.log.Warn("refusing a path of the share", "path", fmt.Sprintf("%q", r.p), "why", r.why)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return refused
}

// checkPath says why a path of the share is not one to materialize
// (safepath.Check), "" if it is; remembered per path, as a share's paths
// come back every round.
func (s *Syncer) checkPath(p string) string {
	why, ok := s.pathChecks[p]
	if !ok {
		if err := safepath.Check(p); err != nil {
			why = err.Error()
		}
		s.pathChecks[p] = why
	}
	return why
}

func anyUnstable(vs []plan.Version) bool {
	for _, v := range vs {
		if !v.Stable {
			return true
		}
	}
	return false
}
