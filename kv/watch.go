package kv

import (
	"context"
	"strings"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// watcher buffers the changes one Watch has not taken yet. Changes are the
// versions that became the latest of their key when applied at this site.
type watcher struct {
	prefix string
	ch     chan Version
	behind chan struct{} // closed when the buffer overflowed
	over   bool
}

func (w *watcher) offer(vs []Version) {
	for _, v := range vs {
		if !strings.HasPrefix(v.Key, w.prefix) || w.over {
			continue
		}
		select {
		case w.ch <- v:
		default:
			// Never drop silently: the watch ends with an error and
			// the client starts again from a scan.
			w.over = true
			close(w.behind)
		}
	}
}

// WatchBuffer is how many unread changes a watch may have before it fails.
const WatchBuffer = 4096

// Watch calls fn for every change of a key with the prefix applied at this
// site from now on, each once, in the order applied. With stable set, a
// change is passed on only once it is behind its origin's frontier of that
// predicate (in the order applied, so an unstable change holds back later
// ones). It returns when ctx ends, fn fails, or the watch falls behind.
func (s *Store) Watch(ctx context.Context, prefix, stable string, fn func(Version) error) error {
	if err := s.available(); err != nil {
		return err
	}
	if stable != "" {
		// Held for the watch's life: it waits on the predicate at every
		// change.
		release, err := s.node.HoldOn(ctx, stable, Stream)
		if err != nil {
			return err
		}
		defer release()
	}
	w := &watcher{prefix: prefix, ch: make(chan Version, WatchBuffer), behind: make(chan struct{})}
	s.mu.Lock()
	s.mu.watchers[w] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.watchers, w)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case v := <-w.ch:
			if stable != "" {
				if err := s.node.WaitFor(ctx, stabilizer.StreamID{Origin: v.Origin, Name: Stream}, stable, v.Seq); err != nil {
					return err
				}
			}
			if err := fn(v); err != nil {
				return err
			}
		case <-w.behind:
			return errWatchBehind
		}
	}
}
