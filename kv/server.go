package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Server serves the client API of one site over gRPC.
type Server struct {
	kvpb.UnimplementedKVServer
	kvpb.UnimplementedAdminServer
	store *Store
	node  *stabilizer.Node
	lin   *Linear
	// Observe, if set, is told each request's method, predicate and time;
	// each write of a Writes stream counts as a request "write", timed from
	// when it was read to its answer.
	Observe func(method, predicate string, d time.Duration, err error)

	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
	answers   sync.Pool // *answer, for Writes
}

// NewServer returns the gRPC service of a store.
func NewServer(s *Store) *Server {
	return &Server{store: s, node: s.node, draining: make(chan struct{})}
}

func timeout(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// observe reports a request when it returns; err points at the handler's
// named result, which is set only then.
func (s *Server) observe(method, pred string, start time.Time, err *error) {
	if s.Observe != nil {
		s.Observe(method, pred, time.Since(start), *err)
	}
}

func (s *Server) Put(ctx context.Context, r *kvpb.PutRequest) (_ *kvpb.WriteResponse, err error) {
	defer s.observe("put", r.Wait, time.Now(), &err)
	if s.isLinear(r.Key) {
		return s.linPut(ctx, r.Key, r.Value, false, r.TimeoutMs)
	}
	res, err := s.store.Put(ctx, r.Key, r.Value, WriteOptions{Wait: r.Wait, Timeout: timeout(r.TimeoutMs)})
	return writeResponse(res), toStatus(err)
}

func (s *Server) Delete(ctx context.Context, r *kvpb.DeleteRequest) (_ *kvpb.WriteResponse, err error) {
	defer s.observe("delete", r.Wait, time.Now(), &err)
	if s.isLinear(r.Key) {
		return s.linPut(ctx, r.Key, nil, true, r.TimeoutMs)
	}
	res, err := s.store.Delete(ctx, r.Key, WriteOptions{Wait: r.Wait, Timeout: timeout(r.TimeoutMs)})
	return writeResponse(res), toStatus(err)
}

// WriteBatch serves Store.WriteBatch; each op's failure travels in its
// result as the gRPC status code and message Put would have returned. Ops on
// linearizable keys go to the Raft group one by one, beside the batch. The
// request succeeds with failed ops in it; Observe is told the first op's
// error, so that a batch with failures does not count as a success.
func (s *Server) WriteBatch(ctx context.Context, r *kvpb.WriteBatchRequest) (*kvpb.WriteBatchResponse, error) {
	var failed error
	defer s.observe("write_batch", r.Wait, time.Now(), &failed)
	out := &kvpb.WriteBatchResponse{Results: make([]*kvpb.WriteOpResult, len(r.Ops))}
	var ops []Op
	var at []int // at[j]: the index in r.Ops of ops[j]
	var wg sync.WaitGroup
	for i, op := range r.Ops {
		res := &kvpb.WriteOpResult{}
		out.Results[i] = res
		if s.isLinear(op.Key) {
			wg.Go(func() {
				w, err := s.linPut(ctx, op.Key, op.Value, op.Delete, r.TimeoutMs)
				res.Write = w
				setOpError(res, err)
			})
			continue
		}
		ops = append(ops, Op{Key: op.Key, Value: op.Value, Delete: op.Delete})
		at = append(at, i)
	}
	if len(ops) > 0 {
		res, _ := s.store.WriteBatch(ctx, ops, WriteOptions{Wait: r.Wait, Timeout: timeout(r.TimeoutMs)})
		for j, i := range at {
			if res[j].Seq != 0 {
				out.Results[i].Write = writeResponse(res[j].WriteResult)
			}
			setOpError(out.Results[i], res[j].Err)
		}
	}
	wg.Wait()
	for _, res := range out.Results {
		if res.Code != 0 {
			failed = status.Error(codes.Code(res.Code), res.Error)
			break
		}
	}
	return out, nil
}

func setOpError(r *kvpb.WriteOpResult, err error) {
	if err != nil {
		st := status.Convert(toStatus(err))
		r.Code, r.Error = uint32(st.Code()), st.Message()
	}
}

func writeResponse(r WriteResult) *kvpb.WriteResponse {
	return &kvpb.WriteResponse{Origin: r.Origin, Seq: r.Seq, Hlc: toPBHLC(r.HLC)}
}

func (s *Server) Get(ctx context.Context, r *kvpb.GetRequest) (_ *kvpb.GetResponse, err error) {
	pred := r.Stable + r.Quorum + r.Snapshot
	defer s.observe("get", pred, time.Now(), &err)
	if s.isLinear(r.Key) {
		return s.linGet(ctx, r)
	}
	res, err := s.store.Get(ctx, r.Key, ReadOptions{Stable: r.Stable, Quorum: r.Quorum, Snapshot: r.Snapshot,
		Session: r.Session, Timeout: timeout(r.TimeoutMs)})
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.GetResponse{Version: toPB(&res.Version), Snapshot: toPBHLC(res.Snapshot), Answered: res.Answered}, nil
}

func (s *Server) Scan(ctx context.Context, r *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	vs, err := s.store.Scan(ctx, r.Prefix, int(r.Limit), ReadOptions{Session: r.Session, Timeout: timeout(r.TimeoutMs)})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &kvpb.ScanResponse{}
	for i := range vs {
		out.Versions = append(out.Versions, toPB(&vs[i]))
	}
	return out, nil
}

func (s *Server) Watch(r *kvpb.WatchRequest, stream kvpb.KV_WatchServer) error {
	err := s.store.Watch(stream.Context(), r.Prefix, r.Stable, func(v Version) error {
		return stream.Send(&kvpb.WatchEvent{Version: toPB(&v)})
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return toStatus(err)
}

func (s *Server) LocalGet(ctx context.Context, r *kvpb.LocalGetRequest) (*kvpb.LocalGetResponse, error) {
	v, found, err := s.store.LocalGet(ctx, r.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.LocalGetResponse{Version: toPB(&v), Found: found}, nil
}

func (s *Server) Frontier(ctx context.Context, r *kvpb.FrontierRequest) (*kvpb.FrontierResponse, error) {
	if r.Origin == "" {
		r.Origin = s.node.Site()
	}
	if r.Stream == "" {
		r.Stream = Stream
	}
	schema := s.node.Schema()
	if _, ok := schema.SiteIndex(r.Origin); !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown site %q (known: %s)", r.Origin, strings.Join(schema.Sites, ", "))
	}
	id := stabilizer.StreamID{Origin: r.Origin, Name: r.Stream}
	streams, err := s.node.Streams(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	i := slices.IndexFunc(streams, func(st stabilizer.StreamStatus) bool { return st.Stream == id })
	if i < 0 {
		return nil, status.Errorf(codes.NotFound, "stream %s: not known at %s yet", id, s.node.Site())
	}
	st := streams[i]
	out := &kvpb.FrontierResponse{Origin: id.Origin, Stream: id.Name, Sites: schema.Sites, Head: st.Head}
	n := len(schema.Sites)
	for l, level := range schema.LevelNames() {
		out.Acks = append(out.Acks, &kvpb.AckRow{Level: level, Seqs: slices.Clone(st.Acks[l*n : l*n+n])})
	}
	for _, name := range s.node.PredicateNames(ctx) {
		f := st.Frontiers[name]
		out.Frontiers = append(out.Frontiers, &kvpb.Frontier{Predicate: name, Seq: f.Seq, Version: f.Version, Hlc: toPBHLC(f.HLC)})
	}
	return out, nil
}

func (s *Server) ListPredicates(ctx context.Context, _ *kvpb.ListPredicatesRequest) (*kvpb.ListPredicatesResponse, error) {
	out := &kvpb.ListPredicatesResponse{}
	for _, d := range s.node.Predicates(ctx) {
		out.Predicates = append(out.Predicates, &kvpb.PredicateDef{Name: d.Name, Source: d.Source, Version: d.Version})
	}
	return out, nil
}

func (s *Server) SetPredicate(ctx context.Context, r *kvpb.SetPredicateRequest) (*kvpb.SetPredicateResponse, error) {
	if _, ok := frontier.Builtins[r.Name]; ok {
		return nil, status.Errorf(codes.InvalidArgument, "%q is a built-in predicate and cannot be changed", r.Name)
	}
	if _, err := frontier.Compile(r.Source, s.node.Schema()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "predicate %q: %v", r.Name, err)
	}
	v, err := s.node.SetPredicate(ctx, r.Name, r.Source)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.SetPredicateResponse{Version: v}, nil
}

func (s *Server) Status(ctx context.Context, _ *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	schema := s.node.Schema()
	out := &kvpb.StatusResponse{Site: s.node.Site(), Sites: schema.Sites, Groups: map[string]string{}}
	for g, m := range schema.Groups {
		out.Groups[g] = strings.Join(m, ",")
	}
	conn := s.node.Connected()
	for _, site := range schema.Sites {
		if site != s.node.Site() {
			out.Peers = append(out.Peers, &kvpb.PeerStatus{Site: site, Connected: conn[site]})
		}
	}
	if s.lin != nil {
		ls := s.lin.Node.Status()
		out.Lin = &kvpb.LinStatus{Prefix: s.lin.Prefix, Voters: s.lin.Voters, Leader: ls.Leader, Term: ls.Term, State: ls.State, Preferred: s.lin.Preferred}
	}
	streams, err := s.node.Streams(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	u, err := s.node.DiskUsage()
	if err != nil {
		return nil, toStatus(err)
	}
	for _, st := range streams {
		out.Streams = append(out.Streams, &kvpb.StreamSummary{Origin: st.Stream.Origin, Stream: st.Stream.Name, Head: st.Head, Persisted: st.Persisted,
			Truncated: st.Truncated, LogBytes: u.Logs[st.Stream], Behind: st.Behind})
	}
	out.DiskBytes = u.Total
	for _, ns := range slices.Sorted(maps.Keys(u.Namespaces)) {
		out.Usage = append(out.Usage, &kvpb.NamespaceUsage{Namespace: ns, Bytes: u.Namespaces[ns]})
	}
	for _, t := range s.node.Transfers() {
		out.Transfers = append(out.Transfers, &kvpb.TransferSummary{Origin: t.Stream.Origin, Stream: t.Stream.Name, Source: t.Source,
			Position: t.Position, Bytes: t.Bytes, TotalBytes: t.TotalBytes, Waiting: t.Waiting})
	}
	return out, nil
}

// toStatus maps errors to gRPC codes a client can act on, keeping the
// message whole (a wait timeout says how far the frontier got).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isOurs(err) {
		return err
	}
	code := codes.Internal
	var we *stabilizer.WaitError
	switch {
	case errors.As(err, &we), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrBadKey), errors.Is(err, ErrKeyTooLarge), errors.Is(err, ErrValueTooLarge),
		errors.Is(err, ErrBadRead), errors.Is(err, stabilizer.ErrUnknownPredicate):
		code = codes.InvalidArgument
	case errors.Is(err, ErrUnsatisfiable):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrHistoryPruned):
		code = codes.OutOfRange
	case errors.Is(err, ErrQuorum), errors.Is(err, ErrRestoring):
		code = codes.Unavailable
	case errors.Is(err, stabilizer.ErrDiskFull):
		code = codes.ResourceExhausted
	case errors.Is(err, stabilizer.ErrStopped):
		code = codes.Unavailable
	default:
		var fe *frontier.Error
		if errors.As(err, &fe) {
			code = codes.InvalidArgument
		}
	}
	return status.Error(code, err.Error())
}

func isOurs(err error) bool {
	return strings.HasPrefix(err.Error(), "kv:") || strings.HasPrefix(err.Error(), "stabilizer:")
}

func toPBHLC(h stabilizer.HLC) *kvpb.HLC {
	if h.IsZero() {
		return nil
	}
	return &kvpb.HLC{Wall: h.Wall, Logical: h.Logical}
}

func fromPBHLC(h *kvpb.HLC) stabilizer.HLC {
	if h == nil {
		return stabilizer.HLC{}
	}
	return stabilizer.HLC{Wall: h.Wall, Logical: h.Logical}
}

func toPB(v *Version) *kvpb.Version {
	return &kvpb.Version{Key: v.Key, Value: v.Value, Deleted: v.Deleted, Origin: v.Origin, Seq: v.Seq, Hlc: toPBHLC(v.HLC)}
}

func fromPB(v *kvpb.Version) Version {
	if v == nil {
		return Version{}
	}
	return Version{Key: v.Key, Value: v.Value, Deleted: v.Deleted, Origin: v.Origin, Seq: v.Seq, HLC: fromPBHLC(v.Hlc)}
}

// remoteReader asks another site for quorum reads.
type remoteReader struct{ c kvpb.KVClient }

// PeerReader returns a Reader that asks the site behind c.
func PeerReader(c kvpb.KVClient) Reader { return remoteReader{c} }

func (r remoteReader) LocalGet(ctx context.Context, key string) (Version, bool, error) {
	res, err := r.c.LocalGet(ctx, &kvpb.LocalGetRequest{Key: key})
	if err != nil {
		return Version{}, false, fmt.Errorf("%s", status.Convert(err).Message())
	}
	return fromPB(res.Version), res.Found, nil
}
