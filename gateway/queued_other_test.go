//go:build !linux

package gateway_test

import "net"

// queued returns how many bytes wait in the kernel to be read from c; off
// Linux it cannot tell and returns 0, so a raw upstream settles once its
// reader waits.
func queued(net.Conn) int { return 0 }
