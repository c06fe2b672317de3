package wan

import (
	"syscall"
	"time"
)

// fineSleep sleeps d in the kernel, which on Linux wakes within tens of
// microseconds, unlike the Go timer. It blocks this goroutine's thread,
// which is why it is only used for the last couple of milliseconds.
func fineSleep(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // an early wake (EINTR) is fine: the caller loops
	return true
}
