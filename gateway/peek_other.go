//go:build !unix

package gateway

import (
	"net"
	"syscall"
)

// strayBytes reports false: this system offers no way to peek.
func strayBytes(net.Conn) bool { return false }

// left waits for nothing: this system offers no way to peek.
func left(syscall.RawConn) bool { return false }
