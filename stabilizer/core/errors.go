package core

import "errors"

// Sentinel errors. Returned errors wrap them with the operand named; match
// them with errors.Is.
var (
	// ErrUnknownPeer: a message from, or an operation on, a site that is not
	// in the configured schema.
	ErrUnknownPeer = errors.New("core: unknown peer")
	// ErrVersionMismatch: a peer speaks another ProtocolVersion.
	ErrVersionMismatch = errors.New("core: protocol version mismatch")
	// ErrSchemaMismatch: a peer is configured with other sites or levels.
	ErrSchemaMismatch = errors.New("core: schema mismatch")
	// ErrRejected: a peer refused our Hello.
	ErrRejected = errors.New("core: rejected by peer")
	// ErrUnknownStream: no such stream is known at this site.
	ErrUnknownStream = errors.New("core: unknown stream")
	// ErrUnknownPredicate: no predicate of that name.
	ErrUnknownPredicate = errors.New("core: unknown predicate")
	// ErrUnknownLevel: no level of that name, or a built-in level where a
	// custom one is required.
	ErrUnknownLevel = errors.New("core: unknown level")
	// ErrNotDelivered: an application acknowledged a seq it was not handed.
	ErrNotDelivered = errors.New("core: seq not delivered")
	// ErrBadMessage: a message is malformed or misaddressed.
	ErrBadMessage = errors.New("core: bad message")
	// ErrNamedPredicate: a transient predicate's name is taken by a named
	// one or the other way round, or a named one was to be scoped or
	// removed as transient.
	ErrNamedPredicate = errors.New("core: named predicate")
	// ErrBuiltinPredicate: built-in predicates cannot be redefined.
	ErrBuiltinPredicate = errors.New("core: built-in predicate")
	// ErrBadStreamName: a stream name is empty or too long.
	ErrBadStreamName = errors.New("core: bad stream name")
	// ErrStorage: reading the log through Config.Storage failed.
	ErrStorage = errors.New("core: storage")
	// ErrBadState: the State given to New is inconsistent, or an input
	// contradicts what the core handed out (BulkPersisted).
	ErrBadState = errors.New("core: bad state")
	// ErrNotDurable: a snapshot's position falls among a bulk stream's
	// entries this site holds but has not made durable yet; install it
	// once BulkPersisted covers it.
	ErrNotDurable = errors.New("core: entries not durable yet")
	// ErrLostEntries: peers hold entries of one of this site's own
	// streams beyond its log, which it lost (a wiped store); appending
	// would give their seqs to other messages.
	ErrLostEntries = errors.New("core: this site lost entries of its own stream")
	// ErrJoining: a site with an empty store has not heard every peer
	// yet (Core.Joining).
	ErrJoining = errors.New("core: joining: waiting to hear every peer before the first append")
)
