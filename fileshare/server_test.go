package fileshare

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
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

// fakePutStream is a PutChunks stream whose requests are all there at
// once; it counts the Recv calls.
type fakePutStream struct {
	grpc.ServerStream
	ctx   context.Context
	mu    sync.Mutex
	reqs  []*filesharepb.PutChunkRequest
	recvs int
	sent  []*filesharepb.PutChunkResponse
}

func (f *fakePutStream) Context() context.Context { return f.ctx }

func (f *fakePutStream) Recv() (*filesharepb.PutChunkRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recvs++
	if len(f.reqs) == 0 {
		return nil, io.EOF
	}
	r := f.reqs[0]
	f.reqs = f.reqs[1:]
	return r, nil
}

func (f *fakePutStream) Send(r *filesharepb.PutChunkResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, r)
	return nil
}

func (f *fakePutStream) received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recvs
}

// TestPutChunksAppendsWhatArrivedTogetherAtOnce: chunks that arrive while
// the site stores earlier ones are stored with one append to the files
// transfer (one round trip to the node's loop), not one each, and answered
// in order: a chunk sent twice and one the site held already are answered
// as duplicates with the ref of the stored copy.
func TestPutChunksAppendsWhatArrivedTogetherAtOnce(t *testing.T) {
	c := newCluster(t, us)
	s := c.svc(us)
	ctx := ctxT(t)
	held := []byte("a chunk the site holds already")
	heldRef, _, err := s.chunks.put(ctx, sha256.Sum256(held), held)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	st := &fakePutStream{ctx: ctx}
	var want [][]byte
	for i := range n {
		data := fmt.Appendf(nil, "chunk %d of a checkpoint shard", i)
		switch i {
		case 20:
			data = want[10] // sent twice
		case 30:
			data = held
		}
		want = append(want, data)
		h := sha256.Sum256(data)
		st.reqs = append(st.reqs, &filesharepb.PutChunkRequest{Hash: h[:], Data: data, Share: "ckpt"})
	}
	var calls []int
	var mu sync.Mutex
	s.chunks.mu.Lock()
	appendStriped := s.chunks.mu.appendStriped
	s.chunks.mu.appendStriped = func(ctx context.Context, name string, payloads [][]byte) ([]stabilizer.Appended, error) {
		mu.Lock()
		calls = append(calls, len(payloads))
		first := len(calls) == 1
		mu.Unlock()
		if first {
			// Hold the first batch until every chunk was received: the
			// rest queue behind it.
			stabilizertest.Eventually(t, 0, func() error {
				if r := st.received(); r <= n {
					return fmt.Errorf("%d of %d requests received", r, n+1)
				}
				return nil
			})
		}
		return appendStriped(ctx, name, payloads)
	}
	s.chunks.mu.Unlock()
	if err := NewServer(s).PutChunks(st); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) > 2 || len(calls) == 0 {
		t.Fatalf("%d appends (of %v chunks) for %d chunks: want the chunks queued behind the first batch appended at once", len(calls), calls, n)
	}
	stored := 0
	for _, k := range calls {
		stored += k
	}
	if stored != n-2 {
		t.Fatalf("appended %d chunks, want %d (all but the two duplicates)", stored, n-2)
	}
	if len(st.sent) != n {
		t.Fatalf("%d answers for %d chunks", len(st.sent), n)
	}
	seqs := map[Ref]int{}
	for i, r := range st.sent {
		h := sha256.Sum256(want[i])
		if [32]byte(r.Hash) != h || r.Ref == nil || r.Ref.Seq == 0 || r.Ref.Size != uint32(len(want[i])) {
			t.Fatalf("answer %d: hash %x ref %v, want hash %x", i, r.Hash[:4], r.Ref, h[:4])
		}
		switch i {
		case 20:
			if !r.Duplicate || refOf(r.Ref) != refOf(st.sent[10].Ref) {
				t.Fatalf("answer 20 (chunk 10 again): dup %v seq %d, want a duplicate at seq %d", r.Duplicate, r.Ref.Seq, st.sent[10].Ref.Seq)
			}
		case 30:
			if !r.Duplicate || refOf(r.Ref) != heldRef {
				t.Fatalf("answer 30 (held already): dup %v seq %d, want a duplicate at seq %d", r.Duplicate, r.Ref.Seq, heldRef.Seq)
			}
		default:
			if r.Duplicate {
				t.Fatalf("answer %d: a duplicate", i)
			}
			at := refOf(r.Ref)
			at.Size = 0
			if j, ok := seqs[at]; ok {
				t.Fatalf("answers %d and %d at %s seq %d", j, i, at.Stream, at.Seq)
			}
			seqs[at] = i
		}
		if _, ok, err := s.chunks.lookup(h); err != nil || !ok {
			t.Fatalf("chunk %d answered but not held: %v %v", i, ok, err)
		}
	}
}

// TestApplyTakesOwnHashes: the origin hashes an uploaded chunk once, when
// put checks it: its applier takes the hash of an entry it appended from
// the append, never hashing the entry again, while other sites hash what
// they receive. An entry appended here under a hash that is not its
// bytes' (put would refuse it) shows which: located under that hash here,
// under its bytes' elsewhere.
func TestApplyTakesOwnHashes(t *testing.T) {
	c := newCluster(t, us, eu)
	s := c.svc(us)
	ctx := ctxT(t)
	data := []byte("chunk bytes")
	claimed := sha256.Sum256([]byte("a hash the origin checked"))
	rs, err := s.chunks.appendEntries(ctx, [][32]byte{claimed}, [][]byte{data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.node.WaitFor(ctx, rs[0].id(), "min(applied(sites))", rs[0].Seq); err != nil {
		t.Fatal(err)
	}
	if !held(t, s, []byte("a hash the origin checked")) || held(t, s, data) {
		t.Errorf("the origin located the entry by hashing it again")
	}
	if held(t, c.svc(eu), []byte("a hash the origin checked")) || !held(t, c.svc(eu), data) {
		t.Errorf("another site located the entry by a hash it did not compute")
	}
	s.chunks.mu.Lock()
	defer s.chunks.mu.Unlock()
	if n := len(s.chunks.mu.own[rs[0].Stream]); n != 0 || len(s.chunks.mu.pending) != 0 || s.chunks.mu.pendingBytes != 0 {
		t.Errorf("after the apply: %d own entries, %d pending chunks of %d bytes; want none", n, len(s.chunks.mu.pending), s.chunks.mu.pendingBytes)
	}
}

// TestAppliedBeforeRecorded: an upload whose entry the site applies
// before the upload's call gets the lock back (the node's applier runs
// on its own) is stored, not left pending: no bytes stay reserved, so
// later uploads do not wait for an apply that came already.
func TestAppliedBeforeRecorded(t *testing.T) {
	c := newCluster(t, us)
	s := c.svc(us)
	ctx := ctxT(t)
	s.chunks.mu.Lock()
	appendStriped := s.chunks.mu.appendStriped
	s.chunks.mu.appendStriped = func(ctx context.Context, name string, payloads [][]byte) ([]stabilizer.Appended, error) {
		as, err := appendStriped(ctx, name, payloads)
		for _, a := range as {
			if err == nil {
				err = s.node.WaitFor(ctx, a.Stream, "applied(self)", a.Seq)
			}
		}
		return as, err
	}
	s.chunks.mu.Unlock()
	data := []byte("applied before its upload returned")
	r, dup, err := s.chunks.put(ctx, sha256.Sum256(data), data)
	if err != nil || dup {
		t.Fatalf("put: %+v, duplicate %v, %v", r, dup, err)
	}
	if got, ok, err := s.chunks.locate(sha256.Sum256(data)); err != nil || !ok || got != r {
		t.Fatalf("located at %+v (%v, %v), want %+v", got, ok, err, r)
	}
	s.chunks.mu.Lock()
	defer s.chunks.mu.Unlock()
	if len(s.chunks.mu.pending) != 0 || s.chunks.mu.pendingBytes != 0 || len(s.chunks.mu.own[r.Stream]) != 0 {
		t.Errorf("%d pending chunks of %d bytes, %d own entries left; want none", len(s.chunks.mu.pending), s.chunks.mu.pendingBytes, len(s.chunks.mu.own[r.Stream]))
	}
}
