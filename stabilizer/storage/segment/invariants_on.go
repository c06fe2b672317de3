//go:build invariants

package segment

// invariantsOn turns on the checks of invariants.go, as `make test` does.
const invariantsOn = true
