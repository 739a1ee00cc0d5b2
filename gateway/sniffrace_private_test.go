package gateway

import (
	"net"
	"testing"
)

// TestSniffConnConcurrentClose: fasthttp's shutdown closes a connection
// still waiting for its first byte (closeIdleConns) while the goroutine
// serving it reads, and that read may hand the connection to the HTTP/2
// engine (the h2c preface): the race detector finds no race on the
// hand-over's mark.
func TestSniffConnConcurrentClose(t *testing.T) {
	e := &h2Engine{plain: newHandoffListener(h2cAddr{})}
	defer e.plain.Close()
	a, b := net.Pipe()
	defer b.Close()
	c := &sniffConn{Conn: a, h2: e}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = b.Write([]byte(h2cPreface))
	}()
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = c.Read(make([]byte, 64))
	}()
	_ = c.Close()
	<-read
	b.Close()
	<-wrote
}
