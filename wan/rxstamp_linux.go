package wan

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// stampedReader reads a TCP connection together with the time the kernel
// received the data (SO_TIMESTAMPNS). A busy host may run the reading
// goroutine milliseconds after the bytes arrived; dating them by the
// kernel's clock keeps that wait out of the emulated delay. It also tells
// whether unread bytes remain (SIOCINQ): then the sender is ahead of the
// link, which is how the token bucket knows a sender is backlogged.
type stampedReader struct {
	c   *net.TCPConn
	rc  syscall.RawConn
	oob []byte
}

func newStampedReader(c *net.TCPConn) *stampedReader {
	r := &stampedReader{c: c}
	rc, err := c.SyscallConn()
	if err != nil {
		return r
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return r // fall back to dating by the clock after each read
	}
	r.rc = rc
	r.oob = make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))
	return r
}

// read is like Read, and also returns when the bytes reached the kernel
// and whether more bytes were already waiting behind them.
func (r *stampedReader) read(buf []byte) (n int, at time.Time, more bool, err error) {
	if r.rc == nil {
		n, err := r.c.Read(buf)
		return n, time.Now(), n == len(buf), err
	}
	var oobn int
	var rerr error
	err = r.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), buf, r.oob, 0)
		if rerr == syscall.EAGAIN || rerr == syscall.EINTR {
			return false
		}
		if rerr == nil && n > 0 {
			// TIOCINQ is FIONREAD, which is SIOCINQ on a socket: unread bytes.
			var avail int32
			_, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&avail)))
			more = e == 0 && avail > 0
		}
		return true
	})
	now := time.Now()
	switch {
	case err != nil:
		return 0, now, false, err
	case rerr != nil:
		return 0, now, false, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("recvmsg", rerr)}
	case n == 0:
		return 0, now, false, io.EOF
	}
	return n, kernelTime(now, r.oob[:oobn]), more, nil
}

// kernelTime converts the receive timestamp in oob to a time on now's
// monotonic clock. A stamp that is missing, in the future or implausibly
// old (a wall clock step) is ignored in favour of now.
func kernelTime(now time.Time, oob []byte) time.Time {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return now
	}
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_TIMESTAMPNS ||
			len(m.Data) < int(unsafe.Sizeof(syscall.Timespec{})) {
			continue
		}
		ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
		lag := now.Sub(time.Unix(ts.Unix())) // wall clock difference
		if lag >= 0 && lag <= time.Second {
			return now.Add(-lag)
		}
	}
	return now
}
