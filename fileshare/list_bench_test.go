package fileshare

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/fileshare/client"
	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// benchHistory is how many versions the share holds in the benchmarks of
// one change.
const benchHistory = 10_000

// historyCluster is a cluster of two sites whose share "ckpt" holds n
// versions recorded at us-east-1 under hist/, each naming one to three of
// 32 small chunks, all stable everywhere.
func historyCluster(b *testing.B, n int) *cluster {
	c := newCluster(b, us, eu)
	ctx := ctxT(b)
	if _, err := c.svc(us).CreateShare(ctx, &filesharepb.Share{Name: "ckpt"}); err != nil {
		b.Fatal(err)
	}
	var refs []*filesharepb.ChunkRef
	for i := range 32 {
		data := fmt.Appendf(nil, "chunk %d of a small file of the history", i)
		h := sha256.Sum256(data)
		if _, _, err := c.svc(us).chunks.put(ctx, h, data); err != nil {
			b.Fatal(err)
		}
		refs = append(refs, &filesharepb.ChunkRef{Hash: h[:], Size: uint32(len(data))})
	}
	const batch = 500
	for i := 0; i < n; i += batch {
		var files []*filesharepb.FileVersion
		for j := i; j < min(i+batch, n); j++ {
			f := &filesharepb.FileVersion{Path: fmt.Sprintf("hist/job-%d/step-%d/shard-%d", j%7, j/70, j%10), Mode: 0o644, Mtime: 1}
			for k := range 1 + j%3 {
				f.Chunks = append(f.Chunks, refs[(j+k)%len(refs)])
			}
			files = append(files, f)
		}
		if _, err := c.svc(us).Commit(ctx, "ckpt", files, CommitOptions{NoWait: true}); err != nil {
			b.Fatal(err)
		}
	}
	stabilizertest.Eventually(b, time.Minute, func() error {
		vs, err := c.svc(us).List(ctx, "ckpt", "")
		if err != nil {
			return err
		}
		for _, v := range vs {
			if !v.Stable || len(v.PersistedAt) != 2 {
				return fmt.Errorf("%d versions, %s not stable and persisted everywhere yet", len(vs), v.Path)
			}
		}
		if len(vs) < n {
			return fmt.Errorf("%d of %d versions", len(vs), n)
		}
		return nil
	})
	return c
}

// serveTB starts the FileShare API of a site on 127.0.0.1.
func (c *cluster) serveTB(tb testing.TB, site string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(64<<20))
	filesharepb.RegisterFileShareServer(g, NewServer(c.svc(site)))
	go func() { _ = g.Serve(l) }()
	tb.Cleanup(g.Stop)
	return l.Addr().String()
}

// BenchmarkRoundAfterOneChange measures what one change of a share of
// benchHistory versions costs a client that is in sync: the site records
// one version (as another writer's commit would, then Watch tells the
// client), and the client runs one round (scan, List, Resolve, Decide).
// The history is under hist/, which the folder ignores, so the round
// downloads nothing: what it measures is the List and the planning.
func BenchmarkRoundAfterOneChange(b *testing.B) {
	c := historyCluster(b, benchHistory)
	dir := b.TempDir()
	if _, err := client.Init(ctxT(b), dir, client.Config{Sites: []string{c.serveTB(b, us)}, Share: "ckpt"}, client.InitOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, client.IgnoreFile), []byte("hist/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := client.Open(dir, client.Options{SettleTime: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for range 3 {
		if _, err := s.SyncOnce(ctxT(b)); err != nil {
			b.Fatal(err)
		}
	}
	data := []byte("one more small file")
	h := sha256.Sum256(data)
	if _, _, err := c.svc(us).chunks.put(ctxT(b), h, data); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		f := &filesharepb.FileVersion{Path: fmt.Sprintf("hist/new/%d", i), Mode: 0o644, Mtime: 1,
			Chunks: []*filesharepb.ChunkRef{{Hash: h[:], Size: uint32(len(data))}}}
		if _, err := c.svc(us).Commit(ctxT(b), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.SyncOnce(ctxT(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListAfterOneChange measures one List over gRPC after one change
// of a share of benchHistory versions, as a client in sync asks it: the
// whole list (full), or what changed since its cursor (delta).
func BenchmarkListAfterOneChange(b *testing.B) {
	c := historyCluster(b, benchHistory)
	conn, err := grpc.NewClient(c.serveTB(b, us), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	api := filesharepb.NewFileShareClient(conn)
	data := []byte("one more small file")
	h := sha256.Sum256(data)
	if _, _, err := c.svc(us).chunks.put(ctxT(b), h, data); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, kind := range []string{"full", "delta"} {
		b.Run(kind, func(b *testing.B) {
			held := map[string]*filesharepb.Version{}
			var cursor []byte
			list := func() int {
				r, err := api.List(ctxT(b), &filesharepb.ListRequest{Share: "ckpt", Track: kind == "delta", Since: cursor})
				if err != nil {
					b.Fatal(err)
				}
				if !r.Delta {
					clear(held)
				}
				for _, v := range r.Versions {
					held[v.Id] = v
				}
				for _, id := range r.Gone {
					delete(held, id)
				}
				cursor = r.Cursor
				return len(r.Versions)
			}
			list()
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for range b.N {
				b.StopTimer()
				n++
				f := &filesharepb.FileVersion{Path: fmt.Sprintf("hist/new/%d", n), Mode: 0o644, Mtime: 1,
					Chunks: []*filesharepb.ChunkRef{{Hash: h[:], Size: uint32(len(data))}}}
				if _, err := c.svc(us).Commit(ctxT(b), "ckpt", []*filesharepb.FileVersion{f}, CommitOptions{NoWait: true}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				sent += list()
			}
			b.ReportMetric(float64(sent)/float64(b.N), "versions/op")
			if len(held) < benchHistory {
				b.Fatalf("the client holds %d versions of %d", len(held), benchHistory)
			}
		})
	}
}
