package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// ErrRestoring: the site is replacing its state of some origin's writes
// with a peer's copy (state transfer) and answers no reads until it is
// done; ask another site.
var ErrRestoring = errors.New("kv: restoring state from a peer")

// invertedHLCLen is the length of a version key's inverted HLC.
const invertedHLCLen = 12

// transferApp is the kv's side of state transfer: the state of one
// origin's kv stream is the versions that origin wrote, and a version's
// key ends with its origin (appendVersionKey).
type transferApp struct{ s *Store }

func (t transferApp) Owner(key, _ []byte) (string, bool) {
	_, n, ok := splitVersionKey(key)
	if !ok || len(key) <= n+invertedHLCLen {
		return "", false
	}
	return string(key[n+invertedHLCLen:]), true
}

// Restoring stops every read at this site: a key's winning version may be
// one of the origin's, missing until the copy is complete, and a read
// would return an older one as if it were the latest.
func (t transferApp) Restoring(id stabilizer.StreamID) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.mu.restoring == nil {
		t.s.mu.restoring = map[string]bool{}
	}
	t.s.mu.restoring[id.Origin] = true
	t.s.log.Warn("restoring the state of an origin's writes from a peer: reads refused until done", "origin", id.Origin)
}

func (t transferApp) Restored(_ context.Context, id stabilizer.StreamID) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	delete(t.s.mu.restoring, id.Origin)
	t.s.log.Info("state of an origin's writes restored: reads served again", "origin", id.Origin)
	return nil
}

// available refuses reads while a restore is in progress.
func (s *Store) available() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.restoring) == 0 {
		return nil
	}
	origins := slices.Sorted(maps.Keys(s.mu.restoring))
	return fmt.Errorf("%w: site %s is copying the writes of %s from a peer; read at another site or retry",
		ErrRestoring, s.node.Site(), strings.Join(origins, ", "))
}
