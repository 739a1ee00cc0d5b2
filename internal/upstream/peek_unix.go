//go:build unix

package upstream

import (
	"net"
	"sync"
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
	p := peekers.Get().(*peeker)
	p.stray = false
	_ = raw.Read(p.fn)
	stray := p.stray
	peekers.Put(p)
	return stray
}

// peeker looks at a socket without waiting or taking a byte; its fn is
// made once, so that a look allocates nothing.
type peeker struct {
	fn    func(fd uintptr) bool
	stray bool // a byte, the end, or an error is there
}

var peekers = sync.Pool{New: func() any {
	p := &peeker{}
	p.fn = p.peek
	return p
}}

func (p *peeker) peek(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.stray = err != syscall.EAGAIN
	return true
}
