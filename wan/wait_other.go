//go:build !linux

package wan

import "time"

// fineSleep has no precise sleep to offer here, so the caller yields in a
// loop for the last coarseMargin before each deadline instead.
func fineSleep(time.Duration) bool { return false }
