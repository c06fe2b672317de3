package segment

import (
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// blockSyncs is an injector that holds every fdatasync until released,
// telling the test when the first one started.
type blockSyncs struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *blockSyncs) String() string { return "blockSyncs" }

func (b *blockSyncs) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpFileSyncData {
		b.once.Do(func() { close(b.entered) })
		<-b.release
	}
	return nil
}

// TestWritersRunDuringSync: while a Sync waits for its fdatasync, Append,
// Read, Streams and a Truncate deleting a segment that Sync holds to sync
// all complete (they would deadlock if Sync held a lock they need); the Sync
// then reports what was appended before it started, and the next Sync the
// rest.
func TestWritersRunDuringSync(t *testing.T) {
	b := &blockSyncs{entered: make(chan struct{}), release: make(chan struct{})}
	s := openTest(t, errorfs.Wrap(vfs.NewMem(), b), segmentBytes(4096))
	mustAppend(t, s, "o", "t", recs("t", 1, 2, 100)...) // a second stream, truncated below
	mustAppend(t, s, "o", "s", recs("s", 1, 3, 1000)...)
	type result struct {
		d   []Durable
		err error
	}
	done := make(chan result)
	go func() {
		d, err := s.Sync()
		done <- result{d, err}
	}()
	<-b.entered // the Sync is inside an fdatasync now

	mustAppend(t, s, "o", "s", recs("s", 4, 9, 1000)...) // new segments too
	if got, err := s.Read("o", "s", 1, 0, 0); err != nil || got != nil {
		t.Fatalf("read during the sync: %d records, %v; nothing is durable yet", len(got), err)
	}
	if si, _ := info(s, "o", "s"); si.Head != 9 || si.Durable != 0 {
		t.Fatalf("during the sync: %+v", si)
	}
	if err := s.Truncate("o", "t", 2); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	r := <-done
	if r.err != nil || !slices.Equal(r.d, []Durable{{"o", "s", 3}, {"o", "t", 2}}) {
		t.Fatalf("sync: %v, %v; want what was appended before it", r.d, r.err)
	}
	if d := mustSync(t, s); !slices.Equal(d, []Durable{{"o", "s", 9}}) {
		t.Fatalf("next sync: %v", d)
	}
	got, err := s.Read("o", "s", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, got, "s", 1, 9, 1000)
}
