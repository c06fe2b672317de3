package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	"github.com/stabilizer/stabilizer/fileshare/client"
)

// newProgress renders transfers: one bar on a terminal for all transfers
// in progress (uploads run side by side), a line per start and end
// otherwise.
func newProgress(w io.Writer) client.Progress {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return newBars(w)
	}
	return &lines{w: w}
}

// lines writes a line per transfer's start and end; calls come from the
// uploads' goroutines, so a mutex keeps lines whole.
type lines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lines) Started(t client.Transfer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s: %s to move (%d chunks, %d reused)\n", t.Dir, t.Path, bytesStr(t.Bytes), t.Chunks, t.Reused)
}

func (*lines) Advanced(client.Transfer) {}

func (l *lines) Finished(t client.Transfer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		fmt.Fprintf(l.w, "%s %s: stopped after %s of %s: %v\n", t.Dir, t.Path, bytesStr(t.Done), bytesStr(t.Bytes), err)
		return
	}
	fmt.Fprintf(l.w, "%s %s: done, %s\n", t.Dir, t.Path, bytesStr(t.Done))
}

// bars draws one bar for the transfers in progress together: their bytes
// moved over their bytes to move, described by the transfer when there is
// one and by the count when there are several. The bar lasts while any
// transfer runs; a transfer that ends keeps counting in it until then, so
// that it never goes back. A failed transfer is reported on a line of its
// own.
type bars struct {
	w      io.Writer
	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	active map[string]client.Transfer // by path
	ended  []client.Transfer          // while the bar lasts
}

func newBars(w io.Writer) *bars { return &bars{w: w, active: map[string]client.Transfer{}} }

func (b *bars) Started(t client.Transfer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active[t.Path] = t
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(t.Bytes, progressbar.OptionSetWriter(b.w), progressbar.OptionShowBytes(true), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100e6), progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }))
	}
	b.redrawLocked()
}

func (b *bars) Advanced(t client.Transfer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.active[t.Path]; ok {
		b.active[t.Path] = t
		b.redrawLocked()
	}
}

func (b *bars) Finished(t client.Transfer, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.active[t.Path]; !ok {
		return
	}
	delete(b.active, t.Path)
	b.ended = append(b.ended, t)
	if err != nil {
		_ = b.bar.Clear()
		fmt.Fprintf(b.w, "%s %s: stopped after %s of %s: %v\n", t.Dir, t.Path, bytesStr(t.Done), bytesStr(t.Bytes), err)
	}
	if len(b.active) > 0 {
		b.redrawLocked()
		return
	}
	total, done := b.sumsLocked()
	b.bar.ChangeMax64(max(total, done, 1))
	_ = b.bar.Set64(done)
	_ = b.bar.Finish()
	b.bar, b.ended = nil, nil
}

// sumsLocked adds up the bytes to move and moved of the bar's transfers.
func (b *bars) sumsLocked() (total, done int64) {
	for _, t := range b.active {
		total, done = total+t.Bytes, done+t.Done
	}
	for _, t := range b.ended {
		total, done = total+t.Bytes, done+t.Done
	}
	return total, done
}

func (b *bars) redrawLocked() {
	total, done := b.sumsLocked()
	b.bar.Describe(b.describeLocked())
	b.bar.ChangeMax64(max(total, 1))
	_ = b.bar.Set64(done)
}

func (b *bars) describeLocked() string {
	if len(b.active) == 1 {
		for _, t := range b.active {
			return fmt.Sprintf("%s %s", t.Dir, t.Path)
		}
	}
	dirs := map[client.Direction]bool{}
	for _, t := range b.active {
		dirs[t.Dir] = true
	}
	what := "transfer"
	if len(dirs) == 1 {
		for d := range dirs {
			what = string(d)
		}
	}
	return fmt.Sprintf("%s %d files", what, len(b.active))
}
