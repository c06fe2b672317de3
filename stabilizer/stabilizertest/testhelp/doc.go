// Package testhelp holds the test helpers every package of this repository
// shares, the storage engine's and the transport's included: a logger that
// writes to t.Log, a polling helper with a deadline, and a context that
// ends with the test.
//
// The one idea: it imports nothing of ours, so that any package's tests
// can use it without an import cycle; package stabilizertest offers the
// same helpers to applications beside its cluster harness.
package testhelp
