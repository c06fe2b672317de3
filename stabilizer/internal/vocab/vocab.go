package vocab

import "strconv"

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

// Entry is one message of a stream.
type Entry struct {
	Stream  StreamID
	Seq     uint64
	HLC     HLC
	Payload []byte
}

// Position is how far a site holds a stream: every seq up to Seq.
type Position struct {
	Stream StreamID
	Seq    uint64
	HLC    HLC // of the entry at Seq, zero when unknown or Seq is 0
}

// Plane is the connection a frame travels on. Control frames never share a
// connection with data, so that acknowledgements never queue behind a
// saturated data stream.
type Plane uint8

const (
	// PlaneData carries the streams' messages and the application
	// channels, ordered per peer.
	PlaneData Plane = iota
	// PlaneControl carries acknowledgements.
	PlaneControl
	// PlaneBulk carries the messages of bulk streams (file chunks), on a
	// connection of their own, so that a stream saturating a link does not
	// queue other streams' messages behind it.
	PlaneBulk
)

// Planes lists every plane; a peer counts as connected while all are up.
var Planes = [...]Plane{PlaneData, PlaneControl, PlaneBulk}

func (p Plane) String() string {
	switch p {
	case PlaneControl:
		return "control"
	case PlaneBulk:
		return "bulk"
	}
	return "data"
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
	// where they were made, whatever becomes of the Ready that carries
	// the advance. It is set for a site's own streams under predicates
	// that read only `persisted`, when some peer persisted To: a peer's
	// persisted ack is fsynced before it is sent, and the peer holds To
	// only because the origin sent it, which it does only once To is
	// durable there. Waits may end on a settled advance before the site's
	// record of it is durable; watchers and readers see it only after.
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

// PredicateDef is a named predicate with its source and version.
type PredicateDef struct {
	Name    string
	Source  string
	Version uint64
}
