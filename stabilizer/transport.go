package stabilizer

// Transport carries encoded frames between this site and its peers, on two
// planes whose connections are separate so acks never queue behind data.
// The gRPC transport (package transport) is the real one; package
// stabilizertest has an in-process one for tests.
type Transport interface {
	// Start begins connecting to peers and delivering what arrives to h.
	Start(h Handler) error
	// Send queues frame for peer on plane. Frames to one peer on one plane
	// arrive in order or not at all; an error means the frame was dropped
	// (the core resends what matters after the next Connected).
	Send(peer string, plane Plane, frame []byte) error
	// Close stops everything Start began and waits for it.
	Close() error
}

// Handler receives a transport's frames and connection changes. Its methods
// may block to push back on a fast sender; they are called from the
// transport's goroutines.
type Handler interface {
	Frame(from string, plane Plane, frame []byte)
	// Up and Down report that the connection to peer on plane came up or
	// broke. A peer counts as connected while all its planes are up.
	Up(peer string, plane Plane)
	Down(peer string, plane Plane, err error)
}
