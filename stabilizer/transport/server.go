package transport

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// inSession is one peer's stream towards us on one plane.
type inSession struct {
	superseded chan struct{} // closed when a newer session of the same peer and plane arrives
	done       chan struct{} // closed when this session delivers no more frames
}

// serve runs one inbound stream: check the handshake, then deliver frames in
// order until the stream ends or a newer session from the same peer and
// plane replaces it.
func (t *Transport) serve(ss grpc.ServerStream) error {
	var b []byte
	if err := ss.RecvMsg(&b); err != nil {
		return err
	}
	h, err := decodeHello(b)
	code, reason := codeOK, ""
	switch {
	case err != nil:
		code, reason = codeBadHandshake, "malformed handshake"
	case h.version != t.cfg.protocolVersion:
		code, reason = codeProtocolVersion, fmt.Sprintf("protocol version %d, want %d", h.version, t.cfg.protocolVersion)
	case h.cluster != t.cfg.Cluster:
		code, reason = codeWrongCluster, fmt.Sprintf("cluster %q, want %q", h.cluster, t.cfg.Cluster)
	case h.to != t.cfg.Site:
		code, reason = codeWrongSite, fmt.Sprintf("dialed site %q, this is %q", h.to, t.cfg.Site)
	case t.senders[planeKey{h.from, Data}] == nil:
		code, reason = codeUnknownPeer, fmt.Sprintf("site %q is not a configured peer of %q", h.from, t.cfg.Site)
	case h.plane != Data && h.plane != Control && h.plane != Bulk:
		code, reason = codeBadHandshake, fmt.Sprintf("unknown plane %d", h.plane)
	default:
		if err := verifyClientName(ss, h.from); err != nil {
			code, reason = codeUnauthenticated, err.Error()
		}
	}
	ans := encodeWelcome(code, reason)
	if err := ss.SendMsg(&ans); err != nil {
		return err
	}
	if code != codeOK {
		t.log.Warn("rejected handshake", "from", h.from, "reason", reason)
		return status.Error(codes.FailedPrecondition, "transport: "+reason)
	}
	peer, plane := h.from, h.plane
	key := planeKey{peer, plane}

	// Replace an older session of the same peer and plane (its connection
	// may be half dead) and wait until it delivers nothing more, so frames
	// of the two sessions never interleave.
	sess := &inSession{superseded: make(chan struct{}), done: make(chan struct{})}
	t.mu.Lock()
	old := t.mu.inbound[key]
	t.mu.inbound[key] = sess
	handler := t.mu.handler
	t.mu.Unlock()
	if old != nil {
		close(old.superseded)
		select {
		case <-old.done:
		case <-ss.Context().Done():
			t.removeInbound(key, sess)
			close(sess.done)
			return ss.Context().Err()
		}
	}
	m := t.metrics.peer(peer, plane)
	ih, _ := handler.(InboundHandler)

	// Receive on a goroutine of our own so that a superseded session can
	// return from this handler, which ends the stream and with it the
	// pending RecvMsg. That goroutine reports InboundDown and releases a
	// successor only after its last Frame call.
	recvErr := make(chan error, 1)
	recv := func() {
		defer func() {
			t.removeInbound(key, sess)
			close(sess.done)
		}()
		if ih != nil {
			ih.InboundUp(peer, plane)
		}
		t.log.Debug("inbound session up", "peer", peer, "plane", plane.String())
		var err error
		for err == nil {
			var batch []byte
			if err = ss.RecvMsg(&batch); err != nil {
				break
			}
			n, size := 0, 0
			err = decodeFrames(batch, t.cfg.MaxFrameSize, func(f []byte) {
				n++
				size += len(f)
				handler.Frame(peer, plane, f)
			})
			m.recvFrames.Add(float64(n))
			m.recvBytes.Add(float64(size))
		}
		recvErr <- err
		if isEOF(err) {
			err = nil // the sender closed the stream
		}
		t.log.Debug("inbound session down", "peer", peer, "plane", plane.String(), "error", err)
		if ih != nil {
			ih.InboundDown(peer, plane, err)
		}
	}
	t.mu.Lock()
	started := t.goLocked(recv)
	t.mu.Unlock()
	if !started {
		t.removeInbound(key, sess)
		close(sess.done)
		return status.Error(codes.Unavailable, "transport: closing")
	}
	select {
	case err := <-recvErr:
		if isEOF(err) {
			return nil
		}
		if errors.Is(err, errBadBatch) {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return err
	case <-sess.superseded:
		return status.Error(codes.Aborted, "transport: replaced by a newer session")
	}
}

// verifyClientName checks, when the connection carries a verified TLS
// client certificate, that it names the site the handshake claims.
func verifyClientName(ss grpc.ServerStream, site string) error {
	p, ok := peer.FromContext(ss.Context())
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	if err := info.State.VerifiedChains[0][0].VerifyHostname(site); err != nil {
		return fmt.Errorf("client certificate does not name site %q", site)
	}
	return nil
}

func (t *Transport) removeInbound(key planeKey, sess *inSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.inbound[key] == sess {
		delete(t.mu.inbound, key)
	}
}
