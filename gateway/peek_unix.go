//go:build unix

package gateway

import (
	"errors"
	"net"
	"syscall"
)

// strayBytes reports whether c, a connection that waits for a request to
// send, has something to read already: bytes its peer sent unasked, or
// the end of the stream. A connection it cannot look into (TLS) has none.
func strayBytes(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	stray := false
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		stray = !errors.Is(err, syscall.EAGAIN) // a byte, the end, or an error
		return true
	})
	return stray
}

// left waits until raw's connection turns readable or its read deadline
// passes, and reports whether its peer has left: the connection reached
// its end or broke, rather than bringing bytes.
func left(raw syscall.RawConn) bool {
	gone := false
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if errors.Is(err, syscall.EAGAIN) {
			return false // wait for readiness
		}
		gone = n == 0 || err != nil
		return true
	})
	return err == nil && gone
}
