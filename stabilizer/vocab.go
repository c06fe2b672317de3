package stabilizer

import "github.com/stabilizer/stabilizer/stabilizer/internal/vocab"

// The library's vocabulary, shared by the core and the applications. It is
// defined in an internal package so that applications need import nothing
// below this one (DESIGN.md §4, "one door").
type (
	// StreamID names a stream: its origin site and its name at that site.
	StreamID = vocab.StreamID
	// HLC is a hybrid logical clock timestamp: physical nanoseconds and a
	// logical counter. Less orders two; the zero HLC orders first.
	HLC = vocab.HLC
	// Entry is one message of a stream: its stream, seq, HLC and payload.
	Entry = vocab.Entry
	// Position is how far a site holds a stream: every seq up to Seq.
	Position = vocab.Position
	// Plane is the connection a transport frame travels on: PlaneData,
	// PlaneControl or PlaneBulk, never sharing one.
	Plane = vocab.Plane
	// FrontierAdvance reports that a predicate's frontier on a stream moved
	// from From to To, released by predicate version Version.
	FrontierAdvance = vocab.FrontierAdvance
	// FrontierState is the current frontier of one predicate on one stream.
	FrontierState = vocab.FrontierState
	// StableTime is the global stable time under a predicate.
	StableTime = vocab.StableTime
	// PredicateDef is a named predicate with its source and version.
	PredicateDef = vocab.PredicateDef
)

// The transport's planes.
const (
	PlaneData    = vocab.PlaneData
	PlaneControl = vocab.PlaneControl
	PlaneBulk    = vocab.PlaneBulk
)

// Planes lists every plane; a peer counts as connected while all are up.
var Planes = vocab.Planes
