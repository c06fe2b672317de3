//go:build !linux

package wan

import (
	"net"
	"time"
)

// stampedReader dates bytes by the clock after each read where the kernel
// offers no receive timestamps, and takes a full read to mean that more
// bytes are waiting.
type stampedReader struct{ c *net.TCPConn }

func newStampedReader(c *net.TCPConn) *stampedReader { return &stampedReader{c: c} }

func (r *stampedReader) read(buf []byte) (n int, at time.Time, more bool, err error) {
	n, err = r.c.Read(buf)
	return n, time.Now(), n == len(buf), err
}
