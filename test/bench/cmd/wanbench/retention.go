package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the retention benches (soak.go, wipe.go) read of a site: its
// status.json (the retention table, the store's own estimate of its disk
// use, state transfers in progress) and the bytes under its data
// directories.

// siteStatus is the part of a site's /status.json the benches read.
type siteStatus struct {
	Retention []retentionRow
	// DiskTotal is the store's estimate of its disk use, as text ("41.2
	// MiB"); see parseBytesText.
	DiskTotal string
	Transfers []transferRow
}

// retentionRow is one stream of the status page's Retention table.
type retentionRow struct {
	Stream          string // "origin/name"
	Head, Truncated uint64
	Retained        uint64
	LogBytes        string
	Behind          bool
}

// transferRow is a state transfer in progress, as status.json lists it.
type transferRow struct {
	Stream            struct{ Origin, Name string }
	Source            string
	Keys, TotalKeys   uint64
	Bytes, TotalBytes uint64
	Started           time.Time
	Waiting           string
}

// kvStreams are the rows of the kv streams ("<origin>/kv").
func (s *siteStatus) kvStreams() []retentionRow {
	var out []retentionRow
	for _, r := range s.Retention {
		if strings.HasSuffix(r.Stream, "/kv") {
			out = append(out, r)
		}
	}
	return out
}

// readStatus gets http://addr/status.json.
func readStatus(ctx context.Context, addr string) (*siteStatus, error) {
	b, err := fetchStatus(ctx, addr)
	if err != nil {
		return nil, err
	}
	var st siteStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s/status.json: %w", addr, err)
	}
	return &st, nil
}

// fetchStatus gets the body of http://addr/status.json.
func fetchStatus(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status.json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/status.json: %s: %s", addr, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// parseBytesText reads back what stabilizer.FormatBytes prints: "512 B",
// "41.2 MiB". The result is as precise as the text (three digits).
func parseBytesText(s string) (int64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return 0, fmt.Errorf("bytes %q: no unit", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bytes %q: %w", s, err)
	}
	shift := map[string]uint{"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40, "PiB": 50}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("bytes %q: unknown unit %q", s, unit)
	}
	return int64(v * float64(uint64(1)<<sh)), nil
}

// dirUsage is what the files under some directories take: Apparent is
// the sum of their sizes (ls -l, du --apparent-size), Allocated the
// blocks the filesystem gave them (st_blocks × 512, as du counts), WAL
// the blocks of pebble's write-ahead logs (*.log) among them.
type dirUsage struct {
	Apparent, Allocated int64
	WAL                 int64
	Files               int
}

// diskUsage walks dirs (a missing one counts nothing) and sums what their
// regular files take. Files that vanish during the walk (pebble deletes
// obsolete tables and logs at any time) are skipped. Hard links to one
// file are counted once, as du does: a snapshot that a site keeps as a
// pebble checkpoint shares its tables with the store.
func diskUsage(dirs ...string) (dirUsage, error) {
	var u dirUsage
	seen := map[[2]uint64]bool{}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !e.Type().IsRegular() {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			alloc := info.Size()
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				id := [2]uint64{uint64(st.Dev), st.Ino}
				if seen[id] {
					return nil
				}
				seen[id] = true
				alloc = st.Blocks * 512
			}
			u.Allocated += alloc
			if strings.HasSuffix(e.Name(), ".log") {
				u.WAL += alloc
			}
			u.Apparent += info.Size()
			u.Files++
			return nil
		})
		if err != nil {
			return u, err
		}
	}
	return u, nil
}
