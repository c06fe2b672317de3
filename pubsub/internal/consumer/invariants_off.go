//go:build !invariants

package consumer

// invariantsEnabled reports whether the invariants build tag is on.
const invariantsEnabled = false

// assertInvariants is checkInvariants under the invariants build tag.
func (s *State) assertInvariants() {}
