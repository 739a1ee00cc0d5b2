//go:build !unix

package gateway

import "syscall"

// left waits for nothing: this system offers no way to peek.
func left(syscall.RawConn) bool { return false }
