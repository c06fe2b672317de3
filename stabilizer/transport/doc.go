// Package transport carries opaque frames between sites over gRPC, on three
// planes with separate connections (data, control and bulk), in order per
// peer and plane, reconnecting after failures. Bulk is dialed at the data
// address: a connection of its own, so that a file transfer filling it
// queues nothing else behind it.
//
// It moves bytes only: frames are encoded and decoded by the caller, and
// nothing here knows the stabilizer core's types.
//
// # Wire
//
// For every (local site → peer, plane) the local site keeps one gRPC
// ClientConn, so one TCP connection per plane, and one long-lived
// bidirectional stream on it, method /stabilizer.transport.v1.Peer/Stream.
// There is no protobuf: a hand-written grpc.ServiceDesc and a raw-bytes codec
// (content subtype "stabilizer-raw") carry byte slices. The stream opens with
// a handshake — magic "STBZ", ProtocolVersion, plane, cluster, sender site,
// the site it meant to reach — which the receiver answers with a code. A
// sender that is not a configured peer is refused with ErrUnknownPeer,
// another protocol version with ErrProtocolVersion (also ErrWrongCluster,
// ErrWrongSite and, under mutual TLS, ErrUnauthenticated when the client
// certificate does not name the site the handshake claims); the dialing side
// reports the sentinel in Status.LastError and keeps retrying with backoff.
// With TLS, certificates name sites: the gRPC authority of a peer's
// connection is the peer's site name, so the server's certificate is checked
// against the site dialed, not against its (possibly emulated) address.
// After the handshake only the sender writes: each gRPC message holds one or
// more frames, each preceded by its uvarint length, so that small frames
// share a message. Frames may be up to Config.MaxFrameSize (16 MiB).
//
// A site dials its peers through the Config.Dialer it is given and serves
// the listeners it is given, so an emulated WAN can sit in between.
//
// # Sessions
//
// An outbound session begins when the handshake is accepted (Handler.Up)
// and ends when the stream breaks (Handler.Down); the sender then redials
// with exponential backoff between Config.BackoffMin and BackoffMax. Frames
// sent during a session are delivered in order, each at most once; frames
// still queued when it ends are dropped, and Send fails with ErrNotConnected
// while no session is up. So after Up the owner knows a new session began
// and resends what the peer still needs; nothing of the old session arrives
// after the first frame of the new one. On the receiving side a newer
// session from the same peer and plane replaces an older one only after the
// older one delivered its last frame.
//
// # Flow control
//
// Each peer and plane has a queue bounded in bytes (DataQueueBytes 32 MiB,
// ControlQueueBytes 1 MiB by default; bulk has DataQueueBytes too), behind gRPC's own windows. Send blocks
// while the queue is full (until there is room or ctx ends), TrySend fails
// with ErrQueueFull instead, and SendLatest replaces a still-queued frame
// with the same key, for control state where only the newest version
// matters. A Handler.Frame that blocks stops its peer's plane: the sender's
// queue then fills and its Send blocks, while the other plane goes on.
//
// # Usage
//
//	t, err := transport.New(transport.Config{
//		Cluster: "prod", Site: "us-east-1",
//		Peers: map[string]transport.PeerAddr{"eu-west-1": {Data: "10.0.1.5:7000", Control: "10.0.1.5:7001"}},
//		Listeners: []net.Listener{dataLis, controlLis},
//		Logger: log.Named("transport"), Registerer: reg,
//		ClientCredentials: clientTLS, ServerCredentials: serverTLS,
//	})
//	err = t.Start(handler)
//	err = t.Send(ctx, "eu-west-1", transport.Data, frame)
//	err = t.SendLatest("eu-west-1", transport.Control, "acks", row)
//	defer t.Close()
//
// # Concurrency
//
// All methods are safe for concurrent use. Start starts, per listener, one
// serving goroutine and, per peer and plane, one sender goroutine (plus one
// receiver per live session to notice a closed stream); each inbound
// session has one goroutine that calls the Handler. Close stops them all and
// waits. Locks (Transport.mu, sender.mu) are leaves, never held across
// network IO or Handler calls.
package transport
