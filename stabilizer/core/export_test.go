package core

// InvariantsEnabled tells tests whether the invariants build tag is on.
const InvariantsEnabled = invariantsEnabled
