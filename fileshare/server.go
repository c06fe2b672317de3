package fileshare

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// MaxMessageBytes is the largest gRPC message of the API (a chunk and its
// framing); servers and clients must accept it.
const MaxMessageBytes = MaxChunkBytes + 64<<10

// Server serves the FileShare API of package filesharepb.
type Server struct {
	filesharepb.UnimplementedFileShareServer
	s *Service
}

// NewServer returns the gRPC service of s.
func NewServer(s *Service) *Server { return &Server{s: s} }

func (g *Server) CreateShare(ctx context.Context, r *filesharepb.CreateShareRequest) (*filesharepb.Share, error) {
	if r.Share == nil {
		return nil, status.Error(codes.InvalidArgument, "fileshare: create share: no share given")
	}
	sh, err := g.s.CreateShare(ctx, r.Share)
	return sh, toStatus(err)
}

func (g *Server) GetShare(ctx context.Context, r *filesharepb.GetShareRequest) (*filesharepb.Share, error) {
	sh, err := g.s.Share(ctx, r.Name)
	return sh, toStatus(err)
}

func (g *Server) ListShares(ctx context.Context, _ *filesharepb.ListSharesRequest) (*filesharepb.ListSharesResponse, error) {
	shs, err := g.s.Shares(ctx)
	return &filesharepb.ListSharesResponse{Shares: shs}, toStatus(err)
}

func (g *Server) Missing(ctx context.Context, r *filesharepb.MissingRequest) (*filesharepb.MissingResponse, error) {
	out := &filesharepb.MissingResponse{}
	for _, h := range r.Hashes {
		if len(h) != 32 {
			return nil, status.Errorf(codes.InvalidArgument, "fileshare: missing: hash %x is %d bytes, want 32", h, len(h))
		}
		_, ok, err := g.s.chunks.lookup([32]byte(h))
		if err != nil {
			return nil, toStatus(err)
		}
		if !ok {
			out.Missing = append(out.Missing, h)
		}
	}
	return out, nil
}

// Read-ahead of PutChunks: what one stream may hold received and not yet
// stored, and so the most one batch stores.
const (
	putAheadBytes  = 16 << 20
	putAheadChunks = 256
)

// PutChunks stores chunks in batches and answers each in order. A
// goroutine receives ahead (up to putAheadBytes) while a batch is stored,
// and the next batch is whatever arrived meanwhile: one append to the
// files transfer for all, where one per chunk would cost a round trip to
// the node's loop each. A client that sends without waiting for answers thus
// pays one round trip per batch.
func (g *Server) PutChunks(st filesharepb.FileShare_PutChunksServer) error {
	ra := newReadAhead(st)
	defer ra.close()
	for {
		rs, err := ra.next()
		if len(rs) == 0 {
			return err // nil at the end of the stream
		}
		ups := make([]putItem, 0, len(rs))
		var bad error
		for _, r := range rs {
			if len(r.Hash) != 32 {
				bad = status.Errorf(codes.InvalidArgument, "fileshare: put chunk: hash %x is %d bytes, want 32", r.Hash, len(r.Hash))
				break
			}
			ups = append(ups, putItem{Hash: [32]byte(r.Hash), Data: r.Data})
		}
		done, perr := g.s.chunks.putBatch(st.Context(), ups)
		for i, u := range done {
			g.s.metrics.uploaded(rs[i].Share, len(u.Data), u.Dup)
			err := st.Send(&filesharepb.PutChunkResponse{Hash: rs[i].Hash, Duplicate: u.Dup, Ref: chunkRef(rs[i].Hash, u.Ref)})
			if err != nil {
				return err
			}
		}
		if perr != nil {
			return toStatus(perr)
		}
		if bad != nil {
			return bad
		}
	}
}

// readAhead receives a PutChunks stream's requests in a goroutine of its
// own, so that they queue while the handler stores the ones before. The
// goroutine ends at the stream's end or error, or, when the handler
// returned first, once gRPC ends the stream (its Recv fails then): a
// handler cannot end a Recv it is blocked in, so close does not wait.
type readAhead struct {
	ch     chan *filesharepb.PutChunkRequest // closed after err is set
	err    error                             // nil at io.EOF
	queued atomic.Int64                      // bytes in ch
	room   chan struct{}                     // a request left ch; buffered 1
	quit   chan struct{}                     // the handler returned
}

func newReadAhead(st filesharepb.FileShare_PutChunksServer) *readAhead {
	ra := &readAhead{ch: make(chan *filesharepb.PutChunkRequest, putAheadChunks), room: make(chan struct{}, 1),
		quit: make(chan struct{})}
	go ra.receive(st)
	return ra
}

func (ra *readAhead) receive(st filesharepb.FileShare_PutChunksServer) {
	defer close(ra.ch)
	for {
		r, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ra.err = err
			}
			return
		}
		n := int64(len(r.Data))
		for q := ra.queued.Load(); q > 0 && q+n > putAheadBytes; q = ra.queued.Load() {
			select {
			case <-ra.room:
			case <-ra.quit:
				return
			}
		}
		ra.queued.Add(n)
		select {
		case ra.ch <- r:
		case <-ra.quit:
			return
		}
	}
}

// next waits for a request and returns it with those queued behind it, up
// to putAheadBytes; none with the stream's error (nil at its end).
func (ra *readAhead) next() ([]*filesharepb.PutChunkRequest, error) {
	r, ok := <-ra.ch
	if !ok {
		return nil, ra.err
	}
	rs := []*filesharepb.PutChunkRequest{r}
	n := int64(len(r.Data))
	for n < putAheadBytes && len(rs) < putAheadChunks {
		select {
		case r, ok := <-ra.ch:
			if !ok {
				return ra.took(rs, n), nil // the end or error comes next
			}
			rs = append(rs, r)
			n += int64(len(r.Data))
			continue
		default:
		}
		break
	}
	return ra.took(rs, n), nil
}

func (ra *readAhead) took(rs []*filesharepb.PutChunkRequest, n int64) []*filesharepb.PutChunkRequest {
	ra.queued.Add(-n)
	select {
	case ra.room <- struct{}{}:
	default:
	}
	return rs
}

func (ra *readAhead) close() { close(ra.quit) }

func (g *Server) Commit(ctx context.Context, r *filesharepb.CommitRequest) (*filesharepb.CommitResponse, error) {
	vs, err := g.s.Commit(ctx, r.Share, r.Files, CommitOptions{Commit: r.Commit, NoWait: r.NoWait, Early: r.Early,
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond})
	if err != nil {
		return nil, toStatus(err)
	}
	return &filesharepb.CommitResponse{Versions: vs}, nil
}

func (g *Server) List(ctx context.Context, r *filesharepb.ListRequest) (*filesharepb.ListResponse, error) {
	if (r.Track || len(r.Since) > 0) && r.Path == "" {
		l, err := g.s.ListChanges(ctx, r.Share, r.Since)
		if err != nil {
			return nil, toStatus(err)
		}
		return &filesharepb.ListResponse{Versions: l.Versions, Site: g.s.node.Site(), Cursor: l.Cursor, Delta: l.Delta, Gone: l.Gone}, nil
	}
	vs, err := g.s.List(ctx, r.Share, r.Path)
	if err != nil {
		return nil, toStatus(err)
	}
	return &filesharepb.ListResponse{Versions: vs, Site: g.s.node.Site()}, nil
}

// WatchEvery is the most often Watch sends an event: changes within it are
// told once, so that a transfer advancing frontiers many times a second
// costs a client a few rounds, not hundreds.
const WatchEvery = 20 * time.Millisecond

// Watch sends an event after every change of the share's versions applied
// here and every frontier advance of the share's visibility predicate on
// the kv stream and the files streams, every stripe (a version may have
// become stable), at most one per WatchEvery. Changes of records come from
// the share's change log, so an event is sent once the log holds what it
// announces: a List after it sees the change, whole or as a delta.
func (g *Server) Watch(r *filesharepb.WatchRequest, st filesharepb.FileShare_WatchServer) error {
	ctx := st.Context()
	sh, err := g.s.Share(ctx, r.Share)
	if err != nil {
		return toStatus(err)
	}
	_, named := g.s.node.PredicateSource(sh.Visibility)
	if !named {
		// An inline predicate is evaluated only while held.
		for _, stream := range append([]string{kv.Stream}, g.s.stripes...) {
			release, err := g.s.node.HoldOn(ctx, sh.Visibility, stream)
			if err != nil {
				return toStatus(err)
			}
			defer release()
		}
	}
	t, err := g.s.shareLog(ctx, r.Share)
	if err != nil {
		return toStatus(err)
	}
	w := g.s.node.WatchFrontiers(256, func(a stabilizer.FrontierAdvance) bool {
		return (isStripe(a.Stream.Name) || a.Stream.Name == kv.Stream) && (!named || a.Predicate == sh.Visibility)
	})
	defer w.Stop()
	if err := st.Send(&filesharepb.WatchEvent{Share: r.Share}); err != nil {
		return err
	}
	tick := time.NewTicker(WatchEvery)
	defer tick.Stop()
	dirty := false
	changed := t.changes()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.s.ctx.Done():
			return status.Error(codes.Unavailable, "fileshare: site shutting down")
		case <-changed:
			dirty, changed = true, t.changes()
		case <-t.dead:
			// The log starts over: clients List in full.
			dirty = true
			if t, err = g.s.shareLog(ctx, r.Share); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return toStatus(err)
			}
			changed = t.changes()
		case <-w.C:
			dirty = true
		case <-tick.C:
			if !dirty {
				continue
			}
			dirty = false
			if err := st.Send(&filesharepb.WatchEvent{Share: r.Share}); err != nil {
				return err
			}
		}
	}
}

// GetChunks streams the chunks asked for, in order.
func (g *Server) GetChunks(r *filesharepb.GetChunksRequest, st filesharepb.FileShare_GetChunksServer) error {
	for _, h := range r.Hashes {
		if len(h) != 32 {
			return status.Errorf(codes.InvalidArgument, "fileshare: get chunks: hash %x is %d bytes, want 32", h, len(h))
		}
		data, err := g.s.chunks.data(st.Context(), [32]byte(h))
		if err != nil {
			return toStatus(err)
		}
		if data != nil {
			g.s.metrics.downloaded(r.Share, len(data))
		}
		if err := st.Send(&filesharepb.ChunkData{Hash: h, Data: data, Held: data != nil}); err != nil {
			return err
		}
	}
	return nil
}

func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !strings.HasPrefix(err.Error(), "fileshare:") &&
		!strings.HasPrefix(err.Error(), "stabilizer:") && !strings.HasPrefix(err.Error(), "kv:") {
		return err
	}
	code := codes.Internal
	var we *stabilizer.WaitError
	var fe *frontier.Error
	switch {
	case errors.As(err, &we), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, ErrUnknownShare), errors.Is(err, ErrChunkGone):
		code = codes.NotFound
	case errors.Is(err, ErrShareExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrMissingChunk):
		code = codes.FailedPrecondition
	case errors.Is(err, stabilizer.ErrDiskFull):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrBadShare), errors.Is(err, ErrBadChunk), errors.Is(err, ErrBadVersion),
		errors.Is(err, stabilizer.ErrUnknownPredicate), errors.As(err, &fe), errors.Is(err, kv.ErrValueTooLarge):
		code = codes.InvalidArgument
	case errors.Is(err, ErrClosed), errors.Is(err, stabilizer.ErrStopped):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}
