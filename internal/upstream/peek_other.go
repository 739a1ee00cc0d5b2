//go:build !unix

package upstream

import "net"

// strayBytes reports false: this system offers no way to peek.
func strayBytes(net.Conn) bool { return false }
