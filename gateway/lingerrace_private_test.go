package gateway

import (
	"net"
	"testing"
)

// TestCloseLingerConcurrentClose: fasthttp's shutdown may close a
// connection of the goroutine engine (its idle ones, a head begun
// included) while the goroutine serving it has its Close linger
// (fastError): the race detector finds no race on the linger asked.
func TestCloseLingerConcurrentClose(t *testing.T) {
	var l lingerings
	l.stop() // a lingering close closes at once
	a, b := net.Pipe()
	defer b.Close()
	c := &prefixConn{Conn: a}
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		c.lingerAtClose(&l, 0)
	}()
	_ = c.Close()
	<-asked
	_ = c.Close()
	<-l.running.idle()
}
