//go:build unix

package gateway

import "syscall"

// left waits until raw's connection turns readable or its read deadline
// passes, and reports whether its peer has left: the connection reached
// its end or broke, rather than bringing bytes.
func left(raw syscall.RawConn) bool {
	gone := false
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EAGAIN {
			return false // wait for readiness
		}
		gone = n == 0 || err != nil
		return true
	})
	return err == nil && gone
}
