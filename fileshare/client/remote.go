package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/fileshare/filesharepb"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// MaxMessage bounds gRPC messages both ways: a chunk of at most 8 MiB and
// its envelope.
const MaxMessage = 16 << 20

// remote is the connection to a folder's sites: one address at a time,
// the next after the one in use fails with Unavailable.
type remote struct {
	addrs []string
	share string
	opts  []grpc.DialOption

	mu struct {
		sync.Mutex
		cur   int
		conns []*grpc.ClientConn
	}
}

func dialRemote(addrs []string, share string, opts []grpc.DialOption) (*remote, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		// Chunks of up to 8 MiB: windows and buffers of that order, not
		// gRPC's 64 KiB stream window (see the site's server options).
		grpc.WithReadBufferSize(256<<10), grpc.WithWriteBufferSize(256<<10),
		grpc.WithInitialWindowSize(8<<20), grpc.WithInitialConnWindowSize(32<<20))
	r := &remote{addrs: append([]string(nil), addrs...), share: share, opts: opts}
	r.mu.conns = make([]*grpc.ClientConn, len(addrs))
	for i, a := range addrs {
		c, err := grpc.NewClient(a, opts...)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("client: site address %q: %w", a, err)
		}
		r.mu.conns[i] = c
	}
	return r, nil
}

func (r *remote) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.mu.conns {
		if c != nil {
			_ = c.Close()
			r.mu.conns[i] = nil
		}
	}
}

// api returns the client of the site in use and its index.
func (r *remote) api() (filesharepb.FileShareClient, int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return filesharepb.NewFileShareClient(r.mu.conns[r.mu.cur]), r.mu.cur, r.addrs[r.mu.cur]
}

// failed moves to the next address if i is still the one in use.
func (r *remote) failed(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.cur == i {
		r.mu.cur = (i + 1) % len(r.addrs)
	}
}

// call runs fn against the site in use, and again at each other address
// while it fails with Unavailable.
func (r *remote) call(ctx context.Context, fn func(context.Context, filesharepb.FileShareClient) error) error {
	var err error
	for range r.addrs {
		api, i, _ := r.api()
		err = fn(ctx, api)
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
		r.failed(i)
	}
	return err
}

func (r *remote) getShare(ctx context.Context) (*filesharepb.Share, error) {
	var sh *filesharepb.Share
	err := r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		sh, err = api.GetShare(ctx, &filesharepb.GetShareRequest{Name: r.share})
		return err
	})
	return sh, err
}

// list returns every version of the share (of p only when p is set) and
// the site that answered.
func (r *remote) list(ctx context.Context, p string) ([]*filesharepb.Version, string, error) {
	var resp *filesharepb.ListResponse
	err := r.call(ctx, func(ctx context.Context, api filesharepb.FileShareClient) error {
		var err error
		resp, err = api.List(ctx, &filesharepb.ListRequest{Share: r.share, Path: p})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return resp.Versions, resp.Site, nil
}

// explain turns a site's error into one that says what was asked and
// wraps a sentinel where one fits.
func (r *remote) explain(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("client: %s: %s: %w", what, st.Message(), ErrUnknownShare)
	case codes.Unavailable:
		return fmt.Errorf("client: %s: no site reachable at %s (%s): %w", what, strings.Join(r.addrs, ", "), st.Message(), ErrUnavailable)
	case codes.Canceled:
		return context.Canceled
	}
	return fmt.Errorf("client: %s: %s: %s", what, st.Code(), st.Message())
}

// toPlan converts a version of the API to the planner's.
func toPlan(v *filesharepb.Version) plan.Version {
	out := plan.Version{ID: plan.VersionID(v.Id), Path: v.Path, Deleted: v.Deleted, Size: v.Size, Mode: v.Mode, MTime: v.Mtime,
		HLC: plan.HLC{Wall: v.HlcWall, Logical: v.HlcLogical}, Origin: v.Origin, Commit: v.Commit, CommitFiles: int(v.CommitFiles),
		Stable: v.Stable}
	copy(out.Content[:], v.Content)
	for _, p := range v.Parents {
		out.Parents = append(out.Parents, plan.VersionID(p))
	}
	for _, p := range v.Kept {
		out.Kept = append(out.Kept, plan.VersionID(p))
	}
	out.Chunks = make([]plan.Chunk, 0, len(v.Chunks))
	for _, c := range v.Chunks {
		var ch plan.Chunk
		copy(ch.Hash[:], c.Hash)
		ch.Size = c.Size
		out.Chunks = append(out.Chunks, ch)
	}
	return out
}

func idStrings(ids []plan.VersionID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

func chunkRefs(cs []plan.Chunk) []*filesharepb.ChunkRef {
	out := make([]*filesharepb.ChunkRef, len(cs))
	for i, c := range cs {
		out[i] = &filesharepb.ChunkRef{Hash: append([]byte(nil), c.Hash[:]...), Size: c.Size}
	}
	return out
}
