package core

import (
	"fmt"
	"strconv"
)

// ProtocolVersion is the version of the site-to-site protocol this core
// speaks. A Hello or Positions message carrying another version is refused
// with ErrVersionMismatch rather than misread.
const ProtocolVersion uint32 = 1

// StreamID names a stream: its origin site and its name at that site.
type StreamID struct {
	Origin string
	Name   string
}

func (s StreamID) String() string { return s.Origin + "/" + s.Name }

// HLC is a hybrid logical clock timestamp: physical nanoseconds, and a
// logical counter that orders timestamps sharing a physical part.
type HLC struct {
	Wall    int64
	Logical uint32
}

// Less reports whether h orders before o.
func (h HLC) Less(o HLC) bool {
	return h.Wall < o.Wall || (h.Wall == o.Wall && h.Logical < o.Logical)
}

// IsZero reports whether h is the zero timestamp, which orders before every
// timestamp a clock issues.
func (h HLC) IsZero() bool { return h == HLC{} }

func (h HLC) String() string {
	return strconv.FormatInt(h.Wall, 10) + "." + strconv.FormatUint(uint64(h.Logical), 10)
}

func maxHLC(a, b HLC) HLC {
	if a.Less(b) {
		return b
	}
	return a
}

// Entry is one message of a stream.
type Entry struct {
	Stream  StreamID
	Seq     uint64
	HLC     HLC
	Payload []byte
}

// size is what an entry counts against byte budgets: its payload plus a
// fixed allowance for the header, so that empty payloads still cost
// something and a flood of them stays bounded.
func (e *Entry) size() int { return len(e.Payload) + len(e.Stream.Name) + 32 }

// Plane is the connection a message travels on. Control messages never share
// a connection with data so that acknowledgements never queue behind a
// saturated data stream.
type Plane uint8

const (
	// PlaneData carries Hello, Positions, Data and Reject messages on the
	// ordered channel between an origin and one destination.
	PlaneData Plane = iota
	// PlaneControl carries Acks messages.
	PlaneControl
)

func (p Plane) String() string {
	if p == PlaneControl {
		return "control"
	}
	return "data"
}

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
	}
	return "msg(" + strconv.Itoa(int(t)) + ")"
}

// Position is how far a site holds a stream: every seq up to Seq.
type Position struct {
	Stream StreamID
	Seq    uint64
	HLC    HLC // of the entry at Seq, zero when unknown or Seq is 0
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
	// an earlier session can be told apart.
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
	Clock HLC
	Heads []Position
	// Cells of Acks: cells of the sender's own row.
	Cells []AckCell
	// Reason of Reject.
	Reason string
}

// Plane tells which connection the message must travel on.
func (m *Message) Plane() Plane {
	if m.Type == MsgAcks {
		return PlaneControl
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

// FrontierAdvance reports that the frontier of Predicate on Stream moved from
// From to To at this site. Version is the predicate version whose evaluation
// released the seqs From+1..To; HLC is the time of message To as far as this
// site knows it (a lower bound when it does not hold message To).
type FrontierAdvance struct {
	Stream    StreamID
	Predicate string
	Version   uint64
	From, To  uint64
	HLC       HLC
	// Settled: the acks that make the predicate hold for To are durable
	// where they were made, whatever becomes of this Ready. It is set for
	// this site's own streams under predicates that read only `persisted`,
	// when some peer persisted To: a peer's persisted ack is fsynced
	// before it is sent, and the peer holds To only because this site
	// sent it, which it does only once To is durable here. A driver may
	// then wake the writes waiting for the advance as soon as the Ready is
	// handed out; it still publishes the advance (to watchers and readers,
	// and as State.Frontiers) only once the Ready is durable.
	Settled bool
}

// FrontierState is the current frontier of one predicate on one stream.
type FrontierState struct {
	Stream    StreamID
	Predicate string
	Seq       uint64
	Version   uint64 // the version that released Seq; 0 when Seq is 0
	HLC       HLC
}

// StableTime is the global stable time under a predicate: every message from
// any origin with an HLC at or below Time is behind that origin's frontier of
// the predicate.
type StableTime struct {
	Predicate string
	Time      HLC
}

// PredicateDef is a named predicate set at run time, with its version.
type PredicateDef struct {
	Name    string
	Source  string
	Version uint64
}
