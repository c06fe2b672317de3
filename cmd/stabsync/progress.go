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

// newProgress renders transfers: bars on a terminal, a line per start and
// end otherwise.
func newProgress(w io.Writer) client.Progress {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return &bars{w: w, bars: map[string]*progressbar.ProgressBar{}}
	}
	return lines{w: w}
}

type lines struct{ w io.Writer }

func (l lines) Started(t client.Transfer) {
	fmt.Fprintf(l.w, "%s %s: %s to move (%d chunks, %d reused)\n", t.Dir, t.Path, bytesStr(t.Bytes), t.Chunks, t.Reused)
}

func (lines) Advanced(client.Transfer) {}

func (l lines) Finished(t client.Transfer, err error) {
	if err != nil {
		fmt.Fprintf(l.w, "%s %s: stopped after %s: %v\n", t.Dir, t.Path, bytesStr(t.Done), err)
		return
	}
	fmt.Fprintf(l.w, "%s %s: done, %s\n", t.Dir, t.Path, bytesStr(t.Done))
}

type bars struct {
	w    io.Writer
	mu   sync.Mutex
	bars map[string]*progressbar.ProgressBar
}

func (b *bars) Started(t client.Transfer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bars[t.Path] = progressbar.NewOptions64(t.Bytes, progressbar.OptionSetWriter(b.w), progressbar.OptionShowBytes(true),
		progressbar.OptionSetDescription(fmt.Sprintf("%s %s", t.Dir, t.Path)), progressbar.OptionThrottle(100e6),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }))
}

func (b *bars) Advanced(t client.Transfer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bar := b.bars[t.Path]; bar != nil {
		_ = bar.Set64(t.Done)
	}
}

func (b *bars) Finished(t client.Transfer, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bar := b.bars[t.Path]
	delete(b.bars, t.Path)
	if bar == nil {
		return
	}
	if err != nil {
		_ = bar.Exit()
		fmt.Fprintf(b.w, "\n%s %s: stopped: %v\n", t.Dir, t.Path, err)
		return
	}
	_ = bar.Finish()
}
