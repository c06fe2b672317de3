package fileshare

import (
	"crypto/sha256"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// TestPutChunksAnswersInOrder: chunks sent on one stream without waiting
// are answered in the order they were sent, each with its own hash and a
// ref to where it is held; a bad chunk fails the stream after the chunks
// before it were answered and stored.
func TestPutChunksAnswersInOrder(t *testing.T) {
	c := newCluster(t, us)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	filesharepb.RegisterFileShareServer(srv, NewServer(c.svc(us)))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := ctxT(t)
	st, err := filesharepb.NewFileShareClient(conn).PutChunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n, bad = 12, 9
	var hashes [][32]byte
	for i := range n {
		data := fmt.Appendf(nil, "chunk %d of a checkpoint shard", i)
		h := sha256.Sum256(data)
		if i == bad {
			data = []byte("not what the hash says")
		}
		hashes = append(hashes, h)
		if err := st.Send(&filesharepb.PutChunkRequest{Hash: h[:], Data: data, Share: "ckpt"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	_ = st.CloseSend()
	seqs := map[uint64]bool{}
	for i := range bad {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if [32]byte(r.Hash) != hashes[i] || r.Ref == nil || r.Ref.Origin != us || r.Ref.Seq == 0 || seqs[r.Ref.Seq] {
			t.Fatalf("answer %d: hash %x ref %v, want hash %x and a new ref at %s", i, r.Hash[:4], r.Ref, hashes[i][:4], us)
		}
		seqs[r.Ref.Seq] = true
	}
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("after the bad chunk: %v, want InvalidArgument", err)
	}
	for i := range bad {
		if _, ok, err := c.svc(us).chunks.lookup(hashes[i]); err != nil || !ok {
			t.Errorf("chunk %d answered but not held: %v %v", i, ok, err)
		}
	}
}
