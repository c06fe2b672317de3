package filesharetest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
)

// MaxMessage is the gRPC message bound of the fake, as of a real site:
// room for a chunk of MaxChunk and its envelope.
const MaxMessage = 16 << 20

// DefaultCommitTimeout is how long Commit waits for stability when the
// request does not say.
const DefaultCommitTimeout = 10 * time.Second

// Server is one fake site: a gRPC server of the file-sharing API on
// 127.0.0.1, recording versions with origin Site into its Cluster.
type Server struct {
	filesharepb.UnimplementedFileShareServer
	Site string
	Addr string

	c    *Cluster
	gs   *grpc.Server
	wg   sync.WaitGroup
	once sync.Once
}

// Start starts a fake site of the cluster named site; the test's cleanup
// stops it.
func (c *Cluster) Start(t testing.TB, site string) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addSite(site)
	s := &Server{Site: site, Addr: lis.Addr().String(), c: c,
		gs: grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage))}
	filesharepb.RegisterFileShareServer(s.gs, s)
	s.wg.Go(func() { _ = s.gs.Serve(lis) })
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the site at once, as a crash would. It is idempotent.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.gs.Stop()
		s.wg.Wait()
	})
}

// HoldChunks stops chunks put at other sites from arriving here (on), so
// that GetChunks answers held = false for them, or delivers the held ones
// and lets the next arrive (off).
func (s *Server) HoldChunks(on bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mu.sites[s.Site]
	st.holdChunk = on
	if !on {
		for h, r := range st.pending {
			if owner := c.mu.sites[r.Origin]; owner != nil {
				st.chunks[h], st.refs[h] = owner.chunks[h], r
			}
		}
		clear(st.pending)
		c.changedLocked()
	}
}

// FailGetChunksAfter makes the next GetChunks stream at this site fail
// with Unavailable once it has sent n chunks.
func (s *Server) FailGetChunksAfter(n int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.mu.sites[s.Site].failAfter = n
}

// ChunksServed counts the chunks this site's GetChunks sent with data.
func (s *Server) ChunksServed() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.mu.sites[s.Site].served
}

// Lists counts the Lists of a whole share this site answered: in full,
// and with what changed since a cursor.
func (s *Server) Lists() (full, delta int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	st := s.c.mu.sites[s.Site]
	return st.fullLists, st.deltas
}

// ChunksPut counts the chunks stored through this site's PutChunks, not
// counting duplicates.
func (s *Server) ChunksPut() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.mu.sites[s.Site].put
}

func (s *Server) CreateShare(_ context.Context, r *filesharepb.CreateShareRequest) (*filesharepb.Share, error) {
	return s.c.createShare(r.Share)
}

func (s *Server) GetShare(_ context.Context, r *filesharepb.GetShareRequest) (*filesharepb.Share, error) {
	return s.c.getShare(r.Name)
}

func (s *Server) ListShares(context.Context, *filesharepb.ListSharesRequest) (*filesharepb.ListSharesResponse, error) {
	return &filesharepb.ListSharesResponse{Shares: s.c.listShares()}, nil
}

func (s *Server) Missing(_ context.Context, r *filesharepb.MissingRequest) (*filesharepb.MissingResponse, error) {
	return &filesharepb.MissingResponse{Missing: s.c.missing(s.Site, r.Hashes)}, nil
}

// HoldPutChunks makes this site's PutChunks streams hold back their
// answers (on): each stores the chunk it received and waits before it
// answers it and reads the next, until off.
func (s *Server) HoldPutChunks(on bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.sites[s.Site].holdPut = on
	c.changedLocked()
}

// PutStats describes a site's PutChunks streams.
type PutStats struct {
	Open    int // streams open now
	MaxOpen int // the most open at once so far
	// Held: streams holding an answer back now (HoldPutChunks).
	Held int
	// Unanswered: chunk bytes received and not answered yet, now and at
	// most so far.
	Unanswered, MaxUnanswered int64
}

// PutStreams reports this site's PutChunks streams.
func (s *Server) PutStreams() PutStats {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.mu.sites[s.Site].puts
}

func (s *Server) PutChunks(stream filesharepb.FileShare_PutChunksServer) error {
	c := s.c
	c.mu.Lock()
	st := c.mu.sites[s.Site]
	st.puts.Open++
	st.puts.MaxOpen = max(st.puts.MaxOpen, st.puts.Open)
	c.changedLocked()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		st.puts.Open--
		c.changedLocked()
		c.mu.Unlock()
	}()
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := c.putChunk(s.Site, r.Hash, r.Data)
		if err != nil {
			return err
		}
		n := int64(len(r.Data))
		c.mu.Lock()
		st.puts.Unanswered += n
		st.puts.MaxUnanswered = max(st.puts.MaxUnanswered, st.puts.Unanswered)
		held := false
		for st.holdPut {
			if !held {
				held = true
				st.puts.Held++
				c.changedLocked()
			}
			ch := c.mu.changed
			c.mu.Unlock()
			select {
			case <-ch:
			case <-stream.Context().Done():
			}
			c.mu.Lock()
			if stream.Context().Err() != nil {
				break
			}
		}
		if held {
			st.puts.Held--
		}
		st.puts.Unanswered -= n
		c.changedLocked()
		c.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (s *Server) Commit(ctx context.Context, r *filesharepb.CommitRequest) (*filesharepb.CommitResponse, error) {
	vs, err := s.c.commit(s.Site, r)
	if err != nil {
		return nil, err
	}
	if r.NoWait {
		out, _ := s.c.stable(vs)
		return &filesharepb.CommitResponse{Versions: out}, nil
	}
	timeout := DefaultCommitTimeout
	if r.TimeoutMs > 0 {
		timeout = time.Duration(r.TimeoutMs) * time.Millisecond
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := s.c.watch()
		out, ok := s.c.stable(vs)
		if ok {
			return &filesharepb.CommitResponse{Versions: out}, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return nil, status.Errorf(codes.DeadlineExceeded, "commit: %d version(s) recorded, not stable within %s", len(vs), timeout)
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (s *Server) List(_ context.Context, r *filesharepb.ListRequest) (*filesharepb.ListResponse, error) {
	if (r.Track || len(r.Since) > 0) && r.Path == "" && !s.c.cursorsOff() {
		resp, err := s.c.listChanges(s.Site, r.Share, r.Since)
		if err != nil {
			return nil, err
		}
		sortByHLC(resp.Versions)
		return resp, nil
	}
	if r.Path == "" {
		s.c.mu.Lock()
		s.c.mu.sites[s.Site].fullLists++
		s.c.mu.Unlock()
	}
	vs, err := s.c.list(r.Share, r.Path)
	if err != nil {
		return nil, err
	}
	sortByHLC(vs)
	return &filesharepb.ListResponse{Versions: vs, Site: s.Site}, nil
}

func (s *Server) Watch(r *filesharepb.WatchRequest, stream filesharepb.FileShare_WatchServer) error {
	if _, err := s.c.getShare(r.Share); err != nil {
		return err
	}
	for {
		ch := s.c.watch()
		select {
		case <-ch:
		case <-stream.Context().Done():
			return nil
		}
		if err := stream.Send(&filesharepb.WatchEvent{Share: r.Share}); err != nil {
			return err
		}
	}
}

func (s *Server) GetChunks(r *filesharepb.GetChunksRequest, stream filesharepb.FileShare_GetChunksServer) error {
	c := s.c
	c.mu.Lock()
	st := c.mu.sites[s.Site]
	failAfter := st.failAfter
	st.failAfter = -1
	c.mu.Unlock()
	sent := 0
	for _, h := range r.Hashes {
		if failAfter >= 0 && sent >= failAfter {
			return status.Errorf(codes.Unavailable, "%s: injected failure after %d chunks", s.Site, sent)
		}
		d, ok := c.chunkData(s.Site, h)
		if err := stream.Send(&filesharepb.ChunkData{Hash: h, Data: d, Held: ok}); err != nil {
			return err
		}
		if ok {
			sent++
			c.mu.Lock()
			st.served++
			c.mu.Unlock()
		}
	}
	return nil
}
