package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// ProtocolVersion is the version of the handshake and framing below. A
// server accepts only streams of its own version.
const ProtocolVersion uint16 = 1

// The gRPC method: one bidirectional stream per (sender, receiver, plane).
// The sender sends a handshake, the receiver answers, then the sender sends
// frame batches and the receiver sends nothing more.
const (
	serviceName = "stabilizer.transport.v1.Peer"
	streamName  = "Stream"
	fullMethod  = "/" + serviceName + "/" + streamName
)

var streamDesc = grpc.StreamDesc{StreamName: streamName, ClientStreams: true, ServerStreams: true}

// rawCodec moves byte slices through gRPC without protobuf. Marshal takes
// *outMsg, whose buffers it hands to gRPC without copying; Unmarshal fills a
// *[]byte with one copy (gRPC reuses its receive buffers).
type rawCodec struct{}

// codecName travels in the content type; both ends force this codec.
const codecName = "stabilizer-raw"

type outMsg struct{ bufs mem.BufferSlice }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *outMsg:
		return m.bufs, nil
	case *[]byte:
		return mem.BufferSlice{mem.SliceBuffer(*m)}, nil
	}
	return nil, fmt.Errorf("transport: codec cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("transport: codec cannot unmarshal into %T", v)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return codecName }

// Frame batches: a gRPC message holds one or more frames, each preceded by
// its length as a uvarint. Small frames then share one gRPC message.

// appendFrames adds the frames to out without copying them; headers are
// carved from one allocation.
func appendFrames(out mem.BufferSlice, frames [][]byte) mem.BufferSlice {
	hdrs := make([]byte, 0, len(frames)*binary.MaxVarintLen64)
	for _, f := range frames {
		start := len(hdrs)
		hdrs = binary.AppendUvarint(hdrs, uint64(len(f)))
		out = append(out, mem.SliceBuffer(hdrs[start:len(hdrs):len(hdrs)]))
		if len(f) > 0 {
			out = append(out, mem.SliceBuffer(f))
		}
	}
	return out
}

var errBadBatch = errors.New("transport: malformed frame batch")

// decodeFrames splits a batch into frames that share b's memory. It fails on
// a truncated or oversized frame.
func decodeFrames(b []byte, maxFrame int, fn func(frame []byte)) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad length", errBadBatch)
		}
		b = b[k:]
		if n > uint64(len(b)) || n > uint64(maxFrame) {
			return fmt.Errorf("%w: frame of %d bytes, %d left, limit %d", errBadBatch, n, len(b), maxFrame)
		}
		fn(b[:n:n])
		b = b[n:]
	}
	return nil
}

// Handshake.
var magic = [4]byte{'S', 'T', 'B', 'Z'}

type hello struct {
	version  uint16
	plane    Plane
	cluster  string
	from, to string
}

func encodeHello(h hello) []byte {
	b := append([]byte(nil), magic[:]...)
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = append(b, byte(h.plane))
	for _, s := range []string{h.cluster, h.from, h.to} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

var errBadHello = errors.New("transport: malformed handshake")

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) < 7 || [4]byte(b[:4]) != magic {
		return h, errBadHello
	}
	h.version = binary.BigEndian.Uint16(b[4:6])
	h.plane = Plane(b[6])
	b = b[7:]
	var names [3]string
	for i := range names {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) || n > maxNameLen {
			return h, errBadHello
		}
		names[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) != 0 {
		return h, errBadHello
	}
	h.cluster, h.from, h.to = names[0], names[1], names[2]
	return h, nil
}

const maxNameLen = 1024

// Handshake answer codes.
const (
	codeOK byte = iota
	codeUnknownPeer
	codeProtocolVersion
	codeWrongCluster
	codeWrongSite
	codeBadHandshake
	codeUnauthenticated
)

// encodeWelcome answers a hello: magic, the server's version, a code and a
// message. Its layout never changes, so that a sender of another version can
// still read why it was rejected.
func encodeWelcome(code byte, msg string) []byte {
	b := append([]byte(nil), magic[:]...)
	b = binary.BigEndian.AppendUint16(b, ProtocolVersion)
	b = append(b, code)
	return append(b, msg...)
}

func decodeWelcome(b []byte) (version uint16, code byte, msg string, err error) {
	if len(b) < 7 || [4]byte(b[:4]) != magic {
		return 0, 0, "", errBadHello
	}
	return binary.BigEndian.Uint16(b[4:6]), b[6], string(b[7:]), nil
}

// welcomeError maps a rejection to the sentinel the dialing side returns.
func welcomeError(peer string, code byte, msg string) error {
	var sentinel error
	switch code {
	case codeOK:
		return nil
	case codeUnknownPeer:
		sentinel = ErrUnknownPeer
	case codeProtocolVersion:
		sentinel = ErrProtocolVersion
	case codeWrongCluster:
		sentinel = ErrWrongCluster
	case codeWrongSite:
		sentinel = ErrWrongSite
	case codeUnauthenticated:
		sentinel = ErrUnauthenticated
	default:
		sentinel = ErrHandshake
	}
	return fmt.Errorf("transport: %s rejected the handshake: %s: %w", peer, msg, sentinel)
}
