package stabilizer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The disk guard keeps pebble from ever running out of space. Pebble treats
// a failed WAL write as fatal, and so does the node (fail): a site whose
// disk filled up would stop, whatever it was doing. So the site watches the
// free space under its directory, and once it drops below a reserve
// (Config.MinFreeBytes) the site is full: it refuses local appends with
// ErrDiskFull and drops the data frames peers send it, so that its log
// stops growing. Everything else goes on: reads, sending its own streams,
// taking acks, and persisting its ack, frontier and clock records, which are
// tiny and come out of the reserve; that is what the reserve is for. Peers
// lose nothing: an origin whose data goes unanswered reopens its channel
// after ResendTicks and resends from what the site says it holds, so once
// space is back the site catches up by itself. This is CockroachDB's
// approach (a min-free reserve), not a reaction to ENOSPC: by then it is
// too late.

// ErrDiskFull is wrapped by appends refused while the site's free disk
// space is below its reserve (Config.MinFreeBytes). The error names the
// site, the directory, the free space and the reserve; writes are taken
// again once space is freed, without a restart.
var ErrDiskFull = errors.New("stabilizer: disk full")

const (
	// DefaultMinFreeBytes is the reserve when Config.MinFreeBytes is zero,
	// capped at 5% of the filesystem's size so that a small filesystem
	// (a test's tmpfs) keeps most of its space usable.
	DefaultMinFreeBytes = 256 << 20
	// DiskCheckInterval is how often the guard reads the free space. What
	// a site writes between two checks comes out of the reserve: at 100
	// MB/s, 50 MB of 256 MiB.
	DiskCheckInterval = 500 * time.Millisecond
	// defaultReserveShare caps the default reserve: 1/20 of the size.
	defaultReserveShare = 20
	// minSlack is the least slack above the reserve a full site waits for
	// (see slack).
	minSlack = 16 << 20
)

// DiskStatus is what the disk guard last read of the site's filesystem.
type DiskStatus struct {
	// Dir is the site's data directory.
	Dir string
	// Free is the space available to unprivileged users under Dir, in
	// bytes, at the last check.
	Free int64
	// Reserve is the free space below which the site is full; 0 when the
	// guard is off (Config.MinFreeBytes -1).
	Reserve int64
	// Full: local appends are refused and peers' data dropped.
	Full bool
}

// String says how much space is free where, and the reserve: "41.2 MiB
// free under /data, reserve 256.0 MiB" ("reserve off" with the guard off).
// Whether the site is full is Full's to say.
func (s DiskStatus) String() string {
	reserve := "off"
	if s.Reserve > 0 {
		reserve = FormatBytes(s.Reserve)
	}
	return fmt.Sprintf("%s free under %s, reserve %s", FormatBytes(s.Free), s.Dir, reserve)
}

// statfsFunc returns the bytes available to unprivileged users under dir
// and the filesystem's size. Tests inject one (export_test.go).
type statfsFunc func(dir string) (free, size int64, err error)

// diskGuard decides whether the site is full. Appends and the transport's
// handler read full, an atomic, on every call; checks update it.
type diskGuard struct {
	site, dir string
	min       int64 // Config.MinFreeBytes: 0 the default, -1 off
	statfs    statfsFunc
	log       hclog.Logger
	m         *metrics
	full      atomic.Bool
	// checking serializes checks, so that a slow check never overwrites a
	// later one's reading. It is held across statfs, which reads counters
	// the kernel keeps in memory; nothing but another check waits for it.
	checking sync.Mutex
	broken   bool // the last statfs failed (logged once); under checking
	mu       struct {
		sync.Mutex
		status DiskStatus // written by checks only
	}
}

func newDiskGuard(cfg *Config, m *metrics) *diskGuard {
	g := &diskGuard{site: cfg.Site, dir: cfg.Dir, min: cfg.MinFreeBytes, statfs: cfg.statfs, log: cfg.Logger.Named("disk"), m: m}
	if g.statfs == nil {
		g.statfs = statfs
	}
	g.mu.status.Dir = cfg.Dir
	return g
}

// startDiskGuard checks the free space every DiskCheckInterval until Close.
func (n *Node) startDiskGuard() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(DiskCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-t.C:
				n.disk.check()
			}
		}
	}()
}

// DiskStatus returns the free space under the site's directory, its reserve
// and whether the site is full, as of the last check (at most
// DiskCheckInterval ago).
func (n *Node) DiskStatus() DiskStatus { return n.disk.status() }

func (g *diskGuard) status() DiskStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.status
}

// check reads the free space and updates the state, logging when the site
// becomes full or recovers. When statfs fails the state stays as it was:
// a guard that cannot see is no reason to refuse or to take writes.
func (g *diskGuard) check() {
	g.checking.Lock()
	defer g.checking.Unlock()
	g.checkLocked()
}

// recheck checks again, unless a check is running: its answer will do.
func (g *diskGuard) recheck() {
	if g.checking.TryLock() {
		defer g.checking.Unlock()
		g.checkLocked()
	}
}

// checkLocked is check with g.checking held.
func (g *diskGuard) checkLocked() {
	free, size, err := g.statfs(g.dir)
	if err != nil {
		if !g.broken {
			g.log.Warn("cannot read free disk space; the disk guard keeps its last state", "site", g.site, "dir", g.dir, "error", err)
		}
		g.broken = true
		return
	}
	g.broken = false
	was := g.status()
	st := DiskStatus{Dir: g.dir, Free: free, Reserve: g.reserve(size)}
	st.Full = nextFull(was.Full, free, st.Reserve)
	g.mu.Lock()
	g.mu.status = st
	g.mu.Unlock()
	g.full.Store(st.Full)
	g.m.setDisk(st)
	switch {
	case st.Full && !was.Full:
		g.log.Warn("disk full: refusing appends and peers' data until space is freed", "site", g.site, "dir", g.dir,
			"free", FormatBytes(free), "reserve", FormatBytes(st.Reserve), "resume_above", FormatBytes(st.Reserve+slack(st.Reserve)))
	case !st.Full && was.Full:
		g.log.Info("disk space back: taking appends and peers' data again", "site", g.site, "dir", g.dir,
			"free", FormatBytes(free), "reserve", FormatBytes(st.Reserve))
	}
}

// reserve is the free space below which the site is full, on a filesystem
// of size bytes.
func (g *diskGuard) reserve(size int64) int64 {
	switch {
	case g.min < 0:
		return 0
	case g.min > 0:
		return g.min
	}
	return min(DefaultMinFreeBytes, size/defaultReserveShare)
}

// slack is how far above the reserve the free space must climb before a
// full site takes writes again: a quarter of the reserve, at least 16 MiB,
// but never more than the reserve itself (so a small filesystem's small
// reserve does not ask for much). Without it a site at the edge would flip
// at every flush and compaction, taking a few writes between each.
func slack(reserve int64) int64 { return min(max(reserve/4, minSlack), reserve) }

// nextFull says whether a site is full after reading free bytes, given
// whether it was and its reserve (0: the guard is off).
func nextFull(full bool, free, reserve int64) bool {
	switch {
	case reserve <= 0:
		return false
	case full:
		return free <= reserve+slack(reserve)
	}
	return free < reserve
}

// admit refuses n local appends while the site is full. It looks again
// first: space may have come back since the last tick.
func (g *diskGuard) admit(n int) error {
	if !g.full.Load() {
		return nil
	}
	g.recheck()
	if !g.full.Load() {
		return nil
	}
	g.m.diskRefusals.Add(float64(n))
	st := g.status()
	return fmt.Errorf("site %s: %v (writes resume above %s): %w", g.site, st, FormatBytes(st.Reserve+slack(st.Reserve)), ErrDiskFull)
}

// dropData reports whether a data frame from a peer must be dropped
// because the site is full, and counts it if so.
func (g *diskGuard) dropData() bool {
	if !g.full.Load() {
		return false
	}
	g.m.diskDropped.Inc()
	return true
}

// FormatBytes prints a size in binary units: 41.2 MiB. For status pages
// and messages.
func FormatBytes(b int64) string {
	const unit = 1 << 10
	if b < unit && b > -unit {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b)/unit, 0
	for ; (v >= unit || v <= -unit) && i < 4; i++ {
		v /= unit
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
