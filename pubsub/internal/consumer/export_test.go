package consumer

// CheckInvariants exposes the internal consistency check to the tests.
func CheckInvariants(s *State) error { return s.checkInvariants() }

// InvariantsEnabled reports whether the invariants build tag is on.
const InvariantsEnabled = invariantsEnabled
