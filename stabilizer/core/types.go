package core

import (
	"fmt"
	"strconv"

	"github.com/stabilizer/stabilizer/stabilizer/internal/vocab"
)

// The vocabulary the core shares with applications is defined in package
// vocab, so that package stabilizer can offer it to applications without
// exposing the core; the core names it unqualified.
type (
	StreamID        = vocab.StreamID
	HLC             = vocab.HLC
	Entry           = vocab.Entry
	Position        = vocab.Position
	Plane           = vocab.Plane
	FrontierAdvance = vocab.FrontierAdvance
	FrontierState   = vocab.FrontierState
	StableTime      = vocab.StableTime
	PredicateDef    = vocab.PredicateDef
)

// The planes, as the core names them.
const (
	PlaneData    = vocab.PlaneData
	PlaneControl = vocab.PlaneControl
	PlaneBulk    = vocab.PlaneBulk
)

// ProtocolVersion is the version of the site-to-site protocol this core
// speaks. A Hello or Positions message carrying another version is refused
// with ErrVersionMismatch rather than misread.
const ProtocolVersion uint32 = 1

func maxHLC(a, b HLC) HLC {
	if a.Less(b) {
		return b
	}
	return a
}

// entrySize is what an entry counts against byte budgets: its payload plus
// a fixed allowance for the header, so that empty payloads still cost
// something and a flood of them stays bounded.
func entrySize(e *Entry) int { return len(e.Payload) + len(e.Stream.Name) + 32 }

// MsgType is the kind of a Message.
type MsgType uint8

const (
	// MsgHello opens a session of the origin's channel to a destination
	// (origin -> destination). Carries Session, Version.
	MsgHello MsgType = iota + 1
	// MsgPositions tells the origin what the destination holds of each of
	// the origin's streams (destination -> origin): the answer to a Hello,
	// and the request to resend after the destination saw a gap.
	MsgPositions
	// MsgData carries a batch of the origin's entries, ordered per stream
	// (origin -> destination).
	MsgData
	// MsgAcks carries the sender's own row of the ack table, whole or the
	// cells changed since the last one, and the sender's clock heartbeat.
	MsgAcks
	// MsgReject refuses a Hello (wrong version); Reason says why.
	MsgReject
	// MsgTruncated tells the destination that the origin dropped entries
	// it lacks (origin -> destination): Positions holds each stream's
	// floor. The destination needs a snapshot (Core.Behind).
	MsgTruncated
)

func (t MsgType) String() string {
	switch t {
	case MsgHello:
		return "hello"
	case MsgPositions:
		return "positions"
	case MsgData:
		return "data"
	case MsgAcks:
		return "acks"
	case MsgReject:
		return "reject"
	case MsgTruncated:
		return "truncated"
	}
	return "msg(" + strconv.Itoa(int(t)) + ")"
}

// AckCell is one cell of a site's row of the ack table: Site acknowledged
// every message 1..Seq of Stream at Level. HLC is that of message Seq when
// known, else zero.
type AckCell struct {
	Stream StreamID
	Site   string
	Level  int
	Seq    uint64
	HLC    HLC
}

// Message is what cores exchange. Only the fields its Type names are set.
type Message struct {
	Type     MsgType
	From, To string
	// Session identifies the origin's current channel to the destination
	// (Hello, Positions, Data); replies echo it so that stale answers from
	// an earlier session can be told apart. In Acks it is the sender's
	// incarnation (Ready.Incarnation); 0 from a release without one.
	Session uint64
	// Version is the sender's ProtocolVersion (Hello, Positions).
	Version uint32
	// Schema fingerprints the sender's sites and levels (Hello, Positions,
	// Acks): ack cells name levels by index, so sites configured
	// differently must not exchange them.
	Schema uint64
	// Entries of Data, ordered by seq within each stream.
	Entries []Entry
	// Positions of Positions: every stream of To the sender holds.
	Positions []Position
	// Clock of Acks, when non-zero: the sender will never again issue a
	// timestamp at or below it, and Heads were its streams' heads then.
	// Heads of Positions: how far To's own row said it persisted its
	// streams, as the sender remembers (Core.Lost); Clock of Positions:
	// the latest heartbeat of To's the sender heard.
	Clock HLC
	Heads []Position
	// Cells of Acks: cells of the sender's own row.
	Cells []AckCell
	// Reason of Reject.
	Reason string
	// Bulk marks a Data message of bulk streams (Config.BulkStreams): it
	// travels on PlaneBulk. It is not encoded: a receiver treats every
	// Data message alike.
	Bulk bool
}

// Plane tells which connection the message must travel on.
func (m *Message) Plane() Plane {
	switch {
	case m.Type == MsgAcks:
		return PlaneControl
	case m.Bulk:
		return PlaneBulk
	}
	return PlaneData
}

func (m Message) String() string {
	s := fmt.Sprintf("%s->%s %s", m.From, m.To, m.Type)
	switch m.Type {
	case MsgData:
		s += fmt.Sprintf(" n=%d", len(m.Entries))
	case MsgAcks:
		s += fmt.Sprintf(" cells=%d", len(m.Cells))
		if !m.Clock.IsZero() {
			s += " clock=" + m.Clock.String()
		}
	case MsgReject:
		s += " " + m.Reason
	}
	return s
}
