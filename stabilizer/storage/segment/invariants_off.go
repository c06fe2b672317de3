//go:build !invariants

package segment

const invariantsOn = false
