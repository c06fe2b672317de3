package stabilizer

import (
	"context"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer/transport"
)

// GRPCTransport adapts the gRPC transport to the node. Data frames wait a
// bounded time for queue room (the core bounds bytes in flight well below
// the queue, so this is rare); control frames are dropped when the queue is
// full, since the core sends the whole ack row again periodically.
func GRPCTransport(t *transport.Transport) Transport { return grpcTransport{t} }

type grpcTransport struct{ t *transport.Transport }

func (g grpcTransport) Start(h Handler) error { return g.t.Start(grpcHandler{h}) }

func (g grpcTransport) Send(peer string, plane Plane, frame []byte) error {
	if plane == PlaneControl {
		return g.t.TrySend(peer, transport.Control, frame)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return g.t.Send(ctx, peer, toTransportPlane(plane), frame)
}

func (g grpcTransport) Close() error { return g.t.Close() }

type grpcHandler struct{ h Handler }

func toCorePlane(p transport.Plane) Plane {
	switch p {
	case transport.Control:
		return PlaneControl
	case transport.Bulk:
		return PlaneBulk
	}
	return PlaneData
}

func toTransportPlane(p Plane) transport.Plane {
	switch p {
	case PlaneControl:
		return transport.Control
	case PlaneBulk:
		return transport.Bulk
	}
	return transport.Data
}

func (g grpcHandler) Frame(peer string, p transport.Plane, frame []byte) {
	g.h.Frame(peer, toCorePlane(p), frame)
}
func (g grpcHandler) Up(peer string, p transport.Plane) { g.h.Up(peer, toCorePlane(p)) }
func (g grpcHandler) Down(peer string, p transport.Plane, err error) {
	g.h.Down(peer, toCorePlane(p), err)
}
