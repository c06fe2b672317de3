package wan

import (
	"net"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// kernelReceived is how many bytes the kernel has received on c
// (tcpi_bytes_received), whether or not the goroutine reading c has run
// yet: a link's delivery, measured without the test's scheduling.
func kernelReceived(c *net.TCPConn, fallback *atomic.Int64) int64 {
	rc, err := c.SyscallConn()
	if err != nil {
		return fallback.Load()
	}
	var n int64 = -1
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(info.Bytes_received)
		}
	})
	if n < 0 {
		return fallback.Load()
	}
	return n
}
