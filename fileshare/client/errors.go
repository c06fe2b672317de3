package client

import "errors"

// Sentinels; match them with errors.Is.
var (
	// ErrNoFolder: the folder does not exist or is not a directory.
	ErrNoFolder = errors.New("client: no such folder")
	// ErrNotInitialized: the folder has no config (stabsync init).
	ErrNotInitialized = errors.New("client: folder not initialized")
	// ErrInitialized: Init on a folder that has a config.
	ErrInitialized = errors.New("client: folder initialized already")
	// ErrNested: Init on a folder inside a synced folder, or holding one:
	// its files would be synced into both shares.
	ErrNested = errors.New("client: folder nested with a synced folder")
	// ErrUnknownShare: the site does not know the share.
	ErrUnknownShare = errors.New("client: unknown share")
	// ErrUnavailable: no site could be reached.
	ErrUnavailable = errors.New("client: site unavailable")
	// ErrUnknownPath: the share has no version of the path.
	ErrUnknownPath = errors.New("client: path not in the share")
	// ErrUnknownVersion: the path has no version of that id.
	ErrUnknownVersion = errors.New("client: unknown version")
	// ErrLocked: another process runs the folder's sync.
	ErrLocked = errors.New("client: folder in use by another stabsync run")
	// ErrChanged: a local file changed while it was read or replaced; the
	// next round takes it up again.
	ErrChanged = errors.New("client: file changed meanwhile")
	// errNotHeld: a chunk has not arrived at the site yet.
	errNotHeld = errors.New("client: chunk not at the site yet")
)
