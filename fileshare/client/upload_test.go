package client

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// run runs c's Run loop until the test ends.
func (c *tclient) run() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			c.t.Errorf("%s: run: %v", c.name, err)
		}
	})
	c.t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// oneChunk is the size of a file of one chunk: less than a chunk's
// minimum.
const oneChunk = chunks.MinSize * 15 / 16

// oneChunkFiles writes n files of size bytes (less than a chunk's minimum,
// so one chunk each).
func oneChunkFiles(t *testing.T, c *tclient, n, size int) {
	if size >= chunks.MinSize {
		t.Fatalf("files of %d bytes may be cut in two: at least chunks.MinSize (%d)", size, chunks.MinSize)
	}
	for i := range n {
		c.write(fmt.Sprintf("ckpt/shard-%d", i), string(randomBytes(t, size)))
	}
}

// TestUploadsRunSideBySide: files upload at once, each on a stream of its
// own, at most Options.Uploads of them, and stabsync status (another
// Syncer on the folder, as the command is) shows each one uploading.
func TestUploadsRunSideBySide(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	site := e.sites["us-east-1"]
	a := e.client("a", "us-east-1", Options{})
	oneChunkFiles(t, a, 6, oneChunk)
	site.HoldPutChunks(true)
	a.run()
	e.cl.WaitFor(t, "4 uploads at once", func() bool { return site.PutStreams().Held == DefaultUploads })
	st, err := e.open("status", a.dir, Options{}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	uploading := 0
	for _, f := range st.Files {
		if f.State == StateUploading {
			uploading++
			// Done is written at most every statusEvery.
			if f.Transfer == nil || f.Transfer.Bytes != oneChunk || f.Transfer.Done > f.Transfer.Bytes {
				t.Errorf("%s: transfer %+v, want 300 KiB to move", f.Path, f.Transfer)
			}
		}
	}
	if !st.Running || uploading != DefaultUploads || len(st.Transfers) != DefaultUploads {
		t.Fatalf("status: running %v, %d files uploading, %d transfers; want %d: %+v", st.Running, uploading, len(st.Transfers), DefaultUploads, st.Files)
	}
	site.HoldPutChunks(false)
	e.cl.WaitFor(t, "6 versions", func() bool { return len(e.cl.Versions()) == 6 })
	if ps := site.PutStreams(); ps.MaxOpen != DefaultUploads {
		t.Fatalf("%d streams open at most, want %d", ps.MaxOpen, DefaultUploads)
	}
}

// TestUploadBytesBoundsWhatIsInFlight: whatever the number of files
// uploading, the chunk bytes sent and not answered by the site stay
// within Options.UploadBytes.
func TestUploadBytesBoundsWhatIsInFlight(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	site := e.sites["us-east-1"]
	const budget, size = 7 * oneChunk / 2, oneChunk // three chunks fit, not four
	a := e.client("a", "us-east-1", Options{Uploads: 8, UploadBytes: budget})
	oneChunkFiles(t, a, 8, size)
	site.HoldPutChunks(true)
	a.run()
	e.cl.WaitFor(t, "8 streams open, 3 chunks sent", func() bool {
		ps := site.PutStreams()
		return ps.Open == 8 && ps.Held == budget/size
	})
	site.HoldPutChunks(false)
	e.cl.WaitFor(t, "8 versions", func() bool { return len(e.cl.Versions()) == 8 })
	if ps := site.PutStreams(); ps.MaxUnanswered > budget {
		t.Fatalf("%d bytes unanswered at once, more than the budget of %d", ps.MaxUnanswered, budget)
	}
}
