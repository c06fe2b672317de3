//go:build !linux

package wan

import (
	"net"
	"time"
)

// stampedReader dates bytes by the clock after each read where the kernel
// offers no receive timestamps.
type stampedReader struct{ c *net.TCPConn }

func newStampedReader(c *net.TCPConn) *stampedReader { return &stampedReader{c: c} }

func (r *stampedReader) read(buf []byte) (int, time.Time, error) {
	n, err := r.c.Read(buf)
	return n, time.Now(), err
}
