// Package vocab defines the words the stabilizer core and the applications
// on top of it share: stream ids, hybrid logical clock timestamps, entries,
// positions, frontier states and advances, stable times and predicate
// definitions, and the two planes of the transport.
//
// The one idea: these types are the library's public vocabulary, kept apart
// from the core's state machine so that the core can change without
// changing them. Applications name them through package stabilizer (which
// declares each one as an alias), never through this package or the core;
// internal keeps it that way. It imports nothing but strconv, so that the
// core, which must stay free of I/O, can use it.
package vocab
