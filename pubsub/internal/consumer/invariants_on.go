//go:build invariants

package consumer

// invariantsEnabled reports whether the invariants build tag is on.
const invariantsEnabled = true

// assertInvariants checks the State's internal consistency after every
// input. It panics: a broken invariant is a bug in this package.
func (s *State) assertInvariants() {
	if err := s.checkInvariants(); err != nil {
		panic(err)
	}
}
