package client

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	fschunks "github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/fileshare/safepath"
)

// stateBytes is what the folder's state dir takes on disk: allocated
// blocks, so that a partial file counts what was written into it, not its
// length.
func stateBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(dir, safepath.StateDir), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// interrupted publishes data at a and runs one round at b whose download
// fails after the site served n chunks. It returns the version's chunks.
func interrupted(t *testing.T, e *env, a, b *tclient, data []byte, n int) []plan.Chunk {
	t.Helper()
	a.write("big.bin", string(data))
	quiesce(t, a)
	vs := e.cl.Versions()
	if len(vs[0].Chunks) < 4 {
		t.Fatalf("%d chunks: too few for the test", len(vs[0].Chunks))
	}
	site := e.sites["eu-west-1"]
	site.FailGetChunksAfter(n)
	res, _ := b.SyncOnce(context.Background())
	if res.Failed != 1 {
		t.Fatalf("first round %+v, want the download to fail", res)
	}
	if _, ok := b.read("big.bin"); ok {
		t.Fatal("a partial download is visible")
	}
	if served := site.ChunksServed(); served != n {
		t.Fatalf("served %d chunks before the failure, want %d", served, n)
	}
	return vs[0].Chunks
}

// TestDownloadWritesEachByteOnce: a fetched chunk is written into the
// version's partial file and nowhere else: the state dir holds what was
// fetched once, not a second copy in a chunk cache.
func TestDownloadWritesEachByteOnce(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	before := stateBytes(t, b.dir)
	data := randomBytes(t, 24<<20)
	chunks := interrupted(t, e, a, b, data, 3)
	fetched := b.Stats().BytesDownloaded
	if fetched < 3*fschunks.MinSize {
		t.Fatalf("fetched %d bytes of 3 chunks", fetched)
	}
	var want int64
	for _, c := range chunks[:3] {
		want += int64(c.Size)
	}
	if fetched != want {
		t.Fatalf("fetched %d bytes, want the first 3 chunks' %d", fetched, want)
	}
	// Blocks round up, and the index and status files take a few.
	if got := stateBytes(t, b.dir) - before; got > fetched+256<<10 {
		t.Fatalf("the state dir grew by %d bytes for %d bytes fetched: a download writes its bytes more than once", got, fetched)
	}
	if _, err := os.Stat(filepath.Join(b.dir, safepath.StateDir, legacyChunkDir)); err == nil {
		t.Fatal("a chunk cache exists")
	}
	quiesce(t, b)
	if got, _ := b.read("big.bin"); got != string(data) {
		t.Fatal("big.bin differs after the resumed download")
	}
	if ents, _ := os.ReadDir(filepath.Join(b.dir, safepath.StateDir, partialDir)); len(ents) != 0 {
		t.Fatalf("%d partial files left after the download", len(ents))
	}
}

// TestDownloadResumesFromPartialFile: a download cut off resumes from the
// chunks its partial file holds, in the same process and after a restart
// (kill -9 leaves the partial file as it was), where every region is
// checked against its hash again: a damaged one is fetched again.
func TestDownloadResumesFromPartialFile(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "same process"
		if restart {
			name = "after a restart"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, &filesharepb.Share{Name: "docs"})
			a := e.client("a", "us-east-1", Options{})
			b := e.client("b", "eu-west-1", Options{})
			data := randomBytes(t, 24<<20)
			chunks := interrupted(t, e, a, b, data, 3)
			site := e.sites["eu-west-1"]
			refetch := 0
			if restart {
				_ = b.Close()
				// Damage the first chunk's region: it must not count.
				ents, err := os.ReadDir(filepath.Join(b.dir, safepath.StateDir, partialDir))
				if err != nil || len(ents) != 1 {
					t.Fatalf("partial files %v: %v", ents, err)
				}
				f, err := os.OpenFile(filepath.Join(b.dir, safepath.StateDir, partialDir, ents[0].Name()), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("torn"), 100); err != nil {
					t.Fatal(err)
				}
				f.Close()
				refetch = 1
				b = e.open("b2", b.dir, Options{})
			}
			quiesce(t, b)
			got, _ := b.read("big.bin")
			if !bytes.Equal([]byte(got), data) {
				t.Fatal("big.bin differs after the resumed download")
			}
			if served := site.ChunksServed(); served != len(chunks)+refetch {
				t.Fatalf("the site served %d chunks for %d, want %d: the resume fetched again what it held", served, len(chunks), len(chunks)+refetch)
			}
			if st := b.Stats(); st.ChunksFromPartial != int64(3-refetch) {
				t.Fatalf("%d chunks found in the partial file, want %d", st.ChunksFromPartial, 3-refetch)
			}
		})
	}
}

// TestChunkNeededTwiceIsFetchedOnce: a commit of two files with the same
// bytes, downloaded together: the second copies each chunk from the first
// one's partial file.
func TestChunkNeededTwiceIsFetchedOnce(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "ckpt", CommitMarker: ".metadata", CommitDirs: "step-*"})
	a := e.client("a", "us-east-1", Options{})
	b := e.client("b", "eu-west-1", Options{})
	data := randomBytes(t, 12<<20)
	a.write("step-1/shard-0", string(data))
	a.write("step-1/shard-1", string(data))
	a.write("step-1/.metadata", "meta")
	quiesce(t, a, b)
	for _, p := range []string{"step-1/shard-0", "step-1/shard-1"} {
		if got, _ := b.read(p); got != string(data) {
			t.Fatalf("%s differs", p)
		}
	}
	distinct := map[plan.Hash]bool{}
	for _, v := range e.cl.Versions() {
		for _, c := range v.Chunks {
			distinct[c.Hash] = true
		}
	}
	if served := e.sites["eu-west-1"].ChunksServed(); served != len(distinct) {
		t.Fatalf("the site served %d chunks, want the %d distinct ones once", served, len(distinct))
	}
	if st := b.Stats(); st.ChunksFromPartial < int64(len(distinct))-1 {
		t.Fatalf("%d chunks copied from a partial file, want about %d", st.ChunksFromPartial, len(distinct)-1)
	}
}

// TestOpenRemovesTheOldChunkCache: a folder of an earlier release keeps
// working, and its chunk cache is removed.
func TestOpenRemovesTheOldChunkCache(t *testing.T) {
	e := newEnv(t, &filesharepb.Share{Name: "docs"})
	a := e.client("a", "us-east-1", Options{})
	old := filepath.Join(a.dir, safepath.StateDir, legacyChunkDir, "ab")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "ab00"), []byte("cached"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	a = e.open("a2", a.dir, Options{})
	if _, err := os.Stat(filepath.Join(a.dir, safepath.StateDir, legacyChunkDir)); err == nil {
		t.Fatal("the old chunk cache is still there")
	}
	a.write("x", "x")
	quiesce(t, a)
}
