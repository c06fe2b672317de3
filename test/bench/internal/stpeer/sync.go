package stpeer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrBusy is returned by WaitInSync while another wait reads the same
// site's events.
var ErrBusy = errors.New("stpeer: a WaitInSync is already running at this site")

// longPoll is how long one /rest/events request waits for an event.
const longPoll = 10 * time.Second

// fileState is what WaitInSync knows of one wanted file.
type fileState struct {
	ok      bool      // on disk with the wanted hash
	at      time.Time // the ItemFinished that made it so; zero if it already was
	lastErr string    // the last ItemFinished error, for a timeout's message
}

// WaitInSync waits until every file of want (path relative to the folder,
// with "/" separators, -> SHA-256 in hex) is on disk at site with that
// content, and returns when Syncthing finished the last of them: the time
// on its ItemFinished event (see doc.go). Files that already match and see
// no event count as complete without a time; if all do, the result is the
// zero time. It returns ctx's error, naming the files still missing, if ctx
// ends first. One WaitInSync at a time per site.
func (c *Cluster) WaitInSync(ctx context.Context, site string, want map[string]string) (time.Time, error) {
	in, err := c.instance(site)
	if err != nil {
		return time.Time{}, err
	}
	in.mu.Lock()
	if in.mu.waiting {
		in.mu.Unlock()
		return time.Time{}, fmt.Errorf("%w: %s", ErrBusy, site)
	}
	in.mu.waiting = true
	cursor := in.mu.cursor
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.mu.waiting = false
		in.mu.cursor = cursor
		in.mu.Unlock()
	}()

	state := make(map[string]*fileState, len(want))
	for p, h := range want {
		ok, err := matches(in.folder, p, h)
		if err != nil {
			return time.Time{}, err
		}
		state[p] = &fileState{ok: ok}
	}
	// Read what is already there before concluding anything: a file that
	// matched above may have finished since the last wait, and its event
	// carries its time.
	timeout := time.Duration(0)
	for {
		evs, err := in.api.events(ctx, cursor, timeout)
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, fmt.Errorf("stpeer: %s: waiting for %s: %w", site, missing(state), ctx.Err())
			}
			return time.Time{}, err
		}
		finished := map[string]time.Time{}
		for _, ev := range evs {
			cursor = max(cursor, ev.ID)
			p := filepath.ToSlash(ev.Data.Item)
			st, ok := state[p]
			if ev.Type != itemEvents || ev.Data.Folder != FolderID || !ok {
				continue
			}
			if ev.Data.Error != nil {
				st.lastErr = *ev.Data.Error
				continue
			}
			finished[p] = ev.Time
		}
		for p, at := range finished {
			ok, err := matches(in.folder, p, want[p])
			if err != nil {
				return time.Time{}, err
			}
			state[p].ok, state[p].at = ok, at
		}
		if done, at := complete(state); done {
			return at, nil
		}
		timeout = longPoll
	}
}

// complete reports whether every file matches, and the latest time of
// those that were finished by an event.
func complete(state map[string]*fileState) (bool, time.Time) {
	var last time.Time
	for _, st := range state {
		if !st.ok {
			return false, time.Time{}
		}
		if st.at.After(last) {
			last = st.at
		}
	}
	return true, last
}

// missing lists the files not yet in sync, with their last error.
func missing(state map[string]*fileState) string {
	var out []string
	for p, st := range state {
		if st.ok {
			continue
		}
		if st.lastErr != "" {
			out = append(out, fmt.Sprintf("%s (last error: %s)", p, st.lastErr))
		} else {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// matches reports whether the file at rel under folder exists with the
// wanted SHA-256 (hex).
func matches(folder, rel, want string) (bool, error) {
	f, err := os.Open(filepath.Join(folder, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stpeer: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("stpeer: hashing %s: %w", f.Name(), err)
	}
	return strings.EqualFold(hex.EncodeToString(h.Sum(nil)), want), nil
}
