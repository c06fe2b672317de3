package fileshare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/fileshare/plan"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// legacyApplier applies the files stream as a site did before transfers
// were striped: one bulk stream, "files", whose uploads it located and
// indexed in the formats of then, written out here byte by byte rather
// than with this package's encoders.
type legacyApplier struct{ ns *stabilizer.Namespace }

func (a *legacyApplier) Apply(_ context.Context, entries []stabilizer.Entry) error {
	b := a.ns.NewBatch()
	for _, e := range entries {
		h := sha256.Sum256(e.Payload)
		origin := e.Stream.Origin
		// The index: 'e', the origin (length first), the seq; flags,
		// hash, size.
		key := binary.AppendUvarint([]byte{'e'}, uint64(len(origin)))
		key = binary.BigEndian.AppendUint64(append(key, origin...), e.Seq)
		b.Set(key, binary.AppendUvarint(append([]byte{0}, h[:]...), uint64(len(e.Payload))))
		// The location: the origin (length first), the seq, the size.
		loc := append([]byte{'l'}, h[:]...)
		if _, err := a.ns.Get(loc); errors.Is(err, stabilizer.ErrNotFound) {
			rec := binary.AppendUvarint(nil, uint64(len(origin)))
			rec = binary.AppendUvarint(append(rec, origin...), e.Seq)
			b.Set(loc, binary.AppendUvarint(rec, uint64(len(e.Payload))))
		} else if err != nil {
			return err
		}
	}
	b.SetApplied(entries[0].Stream, entries[len(entries)-1].Seq)
	return b.CommitNoSync()
}

// TestStripedUpgradeKeepsStoreOfBefore: sites that ran the release before
// striped transfers (one files stream, its locations, index keys and the
// chunk refs of versions written the old way, without a stream) restart with
// this one. Their version is listed stable and read back whole everywhere,
// an upload of its bytes finds them where they are, and once a newer version
// supersedes it and it is pruned, every site drops its chunks, truncates
// "files" past them and sweeps their index records.
func TestStripedUpgradeKeepsStoreOfBefore(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := &cluster{tune: func(cfg *Config) { cfg.Now, cfg.GCInterval, cfg.PruneInterval = clock.Now, time.Hour, time.Hour }}
	c.legacy = func(site string, n *stabilizer.Node, _ *kv.Store) error {
		ns, err := n.Namespace("fileshare")
		if err != nil {
			return err
		}
		return n.HandleBulk(Stream, &legacyApplier{ns: ns})
	}
	startCluster(t, c, sites3...)
	ctx := ctxT(t)

	// The earlier release: chunks appended to "files" at us and eu, and a
	// version naming them, its refs without a stream.
	const size = 4 << 10
	olds := map[string][][]byte{us: {chunkOf(1, 1, size), chunkOf(1, 2, size), chunkOf(1, 3, size)}, eu: {chunkOf(1, 4, size)}}
	v := &filesharepb.Version{Share: "ckpt", Path: "old.bin", Mode: 0o644, Origin: us, HlcWall: clock.Now().UnixNano()}
	v.Id = string(plan.NewVersionID(us, plan.HLC{Wall: v.HlcWall}))
	var content []byte
	var pcs []plan.Chunk
	for _, site := range []string{us, eu} {
		as, err := c.Node(site).AppendBatch(ctx, Stream, olds[site])
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range as {
			h := sha256.Sum256(olds[site][i])
			v.Chunks = append(v.Chunks, &filesharepb.ChunkRef{Hash: h[:], Size: size, Origin: site, Seq: a.Seq})
			pcs = append(pcs, plan.Chunk{Hash: h, Size: size})
			content = append(content, olds[site][i]...)
		}
		if err := c.Node(site).WaitFor(ctx, as[len(as)-1].Stream, "min(applied(sites))", as[len(as)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	v.Size = int64(len(content))
	ch := plan.ContentOf(pcs)
	v.Content = ch[:]
	b, err := manifest.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.kvAt(us).Put(ctx, versionKey("ckpt", v.Path, v.Id), b, kv.WriteOptions{Wait: "all"}); err != nil {
		t.Fatal(err)
	}

	// This release, on the same stores.
	for _, site := range sites3 {
		c.Stop(site)
	}
	c.mu.Lock()
	c.legacy = nil
	c.mu.Unlock()
	for _, site := range sites3 {
		c.Start(site)
	}
	// What the earlier release wrote is what this one writes for "files".
	for _, site := range sites3 {
		for _, ch := range v.Chunks {
			r, ok, err := c.svc(site).chunks.locate([32]byte(ch.Hash))
			if err != nil || !ok || r != (Ref{Origin: ch.Origin, Stream: Stream, Seq: ch.Seq, Size: size}) {
				t.Fatalf("%s locates %x at %+v (%v, %v)", site, ch.Hash[:4], r, ok, err)
			}
			es, err := c.svc(site).chunks.entries(r.id(), r.Seq-1, r.Seq)
			if err != nil || len(es) != 1 || es[0].Hash != [32]byte(ch.Hash) {
				t.Fatalf("%s indexes %s seq %d as %+v (%v)", site, r.id(), r.Seq, es, err)
			}
		}
	}
	c.share(t, us, &filesharepb.Share{Name: "ckpt", KeepVersions: 1})
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			got, err := version(t, c.svc(site), "ckpt", v.Path)
			if err != nil {
				return err
			}
			if !got.Stable {
				return fmt.Errorf("%s: the version of before is not stable", site)
			}
			return download(ctx, c.svc(site), got, content)
		})
	}
	r, dup, err := c.svc(ap).chunks.put(ctx, sha256.Sum256(olds[us][1]), olds[us][1])
	if err != nil || !dup || r != (Ref{Origin: us, Stream: Stream, Seq: 2, Size: size}) {
		t.Fatalf("an upload at ap of a chunk of before: %+v, duplicate %v, %v; want held at us's files seq 2", r, dup, err)
	}

	// A newer version supersedes it; once pruned, its chunks go.
	clock.Add(time.Second)
	newer := append(chunkOf(2, 1, size), chunkOf(2, 2, size)...)
	f := upload(t, c.svc(us), "old.bin", newer, size)
	f.Parents = []string{v.Id}
	vs, err := c.svc(us).Commit(ctx, "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.svc(us).Prune(ctx, "ckpt"); err != nil || n != 1 {
		t.Fatalf("pruned %d versions (%v), want the one of before", n, err)
	}
	for _, site := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			if got := versionByID(t, c.svc(site), "ckpt", v.Path, v.Id); got == nil || !got.Pruned {
				return fmt.Errorf("%s: the version of before not pruned yet", site)
			}
			return nil
		})
	}
	c.gc(t)
	stabilizertest.Eventually(t, 0, func() error {
		clock.Add(DefaultGCGrace)
		c.gc(t)
		for _, site := range sites3 {
			for origin, want := range map[string]uint64{us: 3, eu: 1} {
				if f := c.floors(t, site, origin)[Stream]; f < want {
					return fmt.Errorf("%s truncated %s's files stream to %d, want at least %d", site, origin, f, want)
				}
			}
		}
		return nil
	})
	for _, site := range sites3 {
		svc := c.svc(site)
		for origin, chunks := range olds {
			for _, data := range chunks {
				if held(t, svc, data) {
					t.Errorf("%s still holds a chunk of %s of before", site, origin)
				}
				if _, err := svc.chunks.data(ctx, sha256.Sum256(data)); !errors.Is(err, ErrChunkGone) {
					t.Errorf("%s: download of a collected chunk of before: %v, want ErrChunkGone", site, err)
				}
			}
			id := stabilizer.StreamID{Origin: origin, Name: Stream}
			if es, err := svc.chunks.entries(id, 0, uint64(len(chunks))); err != nil || len(es) != 0 {
				t.Errorf("%s: %d index records of %s below its floor (%v)", site, len(es), id, err)
			}
		}
		var idx int
		if err := svc.chunks.ns.ScanPrefix([]byte{prefixEntry}, func(k, _ []byte) error {
			if id, seq, ok := decodeEntryKey(k); !ok || id.Origin != us || !bytes.Equal(k, entryKey(id, seq)) {
				return fmt.Errorf("index key %x (%s seq %d)", k, id, seq)
			}
			idx++
			return nil
		}); err != nil || idx != 2 {
			t.Errorf("%s: %d index records left (%v), want the newer version's 2", site, idx, err)
		}
		stabilizertest.Eventually(t, 0, func() error { return download(ctx, svc, vs[0], newer) })
	}
}
