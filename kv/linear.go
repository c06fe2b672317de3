package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/kv/lin"
)

// LinOrigin is the origin reported for versions of linearizable keys
// (kvpb.LinOrigin).
const LinOrigin = kvpb.LinOrigin

// Linear routes the keys under Prefix to the linearizable mode.
type Linear struct {
	Prefix    string
	Node      *lin.Node
	Voters    []string
	Preferred string
}

// EnableLinear makes the server send keys under l.Prefix to the Raft group.
func (s *Server) EnableLinear(l *Linear) { s.lin = l }

func (s *Server) isLinear(key string) bool {
	return s.lin != nil && strings.HasPrefix(key, s.lin.Prefix)
}

func linCtx(ctx context.Context, ms int64, def time.Duration) (context.Context, context.CancelFunc) {
	if ms > 0 {
		return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	}
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, def)
}

func (s *Server) linPut(ctx context.Context, key string, value []byte, del bool, ms int64) (*kvpb.WriteResponse, error) {
	ctx, cancel := linCtx(ctx, ms, s.store.cfg.DefaultTimeout)
	defer cancel()
	var v uint64
	var err error
	if del {
		v, err = s.lin.Node.Delete(ctx, key)
	} else {
		v, err = s.lin.Node.Put(ctx, key, value)
	}
	if err != nil {
		return nil, linStatus(err)
	}
	return &kvpb.WriteResponse{Origin: LinOrigin, Seq: v}, nil
}

func (s *Server) linGet(ctx context.Context, r *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if r.Stable != "" || r.Quorum != "" || r.Snapshot != "" {
		return nil, status.Errorf(codes.InvalidArgument, "%q is under %s, the linearizable namespace: reads there are always linearizable; drop --stable, --quorum and --snapshot", r.Key, s.lin.Prefix)
	}
	ctx, cancel := linCtx(ctx, r.TimeoutMs, s.store.cfg.DefaultTimeout)
	defer cancel()
	it, err := s.lin.Node.Get(ctx, r.Key)
	if err != nil {
		return nil, linStatus(err)
	}
	return &kvpb.GetResponse{Version: &kvpb.Version{Key: it.Key, Value: it.Value, Origin: LinOrigin, Seq: it.Version}}, nil
}

// CompareAndSwap serves compare-and-swap on linearizable keys.
func (s *Server) CompareAndSwap(ctx context.Context, r *kvpb.CASRequest) (*kvpb.WriteResponse, error) {
	if !s.isLinear(r.Key) {
		return nil, status.Errorf(codes.InvalidArgument, "compare-and-swap needs a key of the linearizable namespace%s; %q is not", s.prefixHint(), r.Key)
	}
	var conds []lin.Condition
	if r.IfAbsent {
		conds = append(conds, lin.IfAbsent())
	}
	if r.IfVersion > 0 {
		conds = append(conds, lin.IfVersion(r.IfVersion))
	}
	if r.HasIfValue {
		conds = append(conds, lin.IfValue(r.IfValue))
	}
	if r.LeaseJob != "" {
		conds = append(conds, lin.IfLeaseHeld(r.LeaseJob, r.LeaseToken))
	}
	if len(conds) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "compare-and-swap of %q takes exactly one condition (if absent, if version, if value, or a lease), got %d", r.Key, len(conds))
	}
	ctx, cancel := linCtx(ctx, r.TimeoutMs, s.store.cfg.DefaultTimeout)
	defer cancel()
	var v uint64
	var err error
	if r.Delete {
		v, err = s.lin.Node.CompareAndDelete(ctx, r.Key, conds[0])
	} else {
		v, err = s.lin.Node.CompareAndSwap(ctx, r.Key, conds[0], r.Value)
	}
	if err != nil {
		return nil, linStatus(err)
	}
	return &kvpb.WriteResponse{Origin: LinOrigin, Seq: v}, nil
}

// Lease serves job leases.
func (s *Server) Lease(ctx context.Context, r *kvpb.LeaseRequest) (*kvpb.LeaseResponse, error) {
	if s.lin == nil {
		return nil, status.Error(codes.FailedPrecondition, "this site runs without the linearizable mode (lin.disabled in its config)")
	}
	ctx, cancel := linCtx(ctx, r.TimeoutMs, s.store.cfg.DefaultTimeout)
	defer cancel()
	start := time.Now()
	var l lin.Lease
	var err error
	switch r.Op {
	case "grant":
		l, err = s.lin.Node.Grant(ctx, r.Job, r.Holder, time.Duration(r.TtlMs)*time.Millisecond)
	case "renew":
		l, err = s.lin.Node.Renew(ctx, r.Job, r.Holder, r.Token)
	case "revoke":
		err = s.lin.Node.Revoke(ctx, r.Job, r.Holder, r.Token)
		if err == nil {
			l, err = s.lin.Node.GetLease(ctx, r.Job)
		}
	case "get":
		l, err = s.lin.Node.GetLease(ctx, r.Job)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "lease op %q: want grant, renew, revoke or get", r.Op)
	}
	if err != nil {
		return nil, linStatus(err)
	}
	out := &kvpb.LeaseResponse{Job: l.Job, Holder: l.Holder, Token: l.Token, TtlMs: l.TTL.Milliseconds()}
	if !l.ValidUntil.IsZero() {
		out.ValidForMs = l.ValidUntil.Sub(start).Milliseconds()
	}
	return out, nil
}

func (s *Server) prefixHint() string {
	if s.lin == nil {
		return " (disabled at this site)"
	}
	return " " + s.lin.Prefix
}

// linStatus maps the linearizable mode's errors to codes, keeping their
// messages (the current version of a failed CAS, the last leader and term).
func linStatus(err error) error {
	var ce *lin.CompareError
	var le *lin.LeaseError
	var nl *lin.NoLeaderError
	var nq *lin.NoQuorumError
	code := codes.Internal
	switch {
	case errors.As(err, &ce), errors.As(err, &le):
		code = codes.FailedPrecondition
	case errors.Is(err, lin.ErrNotFound):
		code = codes.NotFound
	case errors.As(err, &nl), errors.As(err, &nq), errors.Is(err, lin.ErrStopped):
		code = codes.Unavailable
	case errors.Is(err, lin.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, lin.ErrUnknownOutcome):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, fmt.Sprint(err))
}
