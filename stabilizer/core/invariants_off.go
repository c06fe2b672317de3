//go:build !invariants

package core

const invariantsEnabled = false

// assertInvariants is compiled in only with the invariants build tag (see
// invariants_on.go); `make test` turns it on.
func (c *Core) assertInvariants() {}
