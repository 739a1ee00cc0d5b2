package gateway

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// closeMark is a connection that notes its Close.
type closeMark struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeMark) Close() error {
	c.closed.Store(true)
	return nil
}

// TestHandoffCloseClosesEveryDelivered: a connection handed over while the
// listener's queue is full waits on a goroutine of its own; once the
// listener is closed, every connection delivered and not accepted is
// closed (it holds its socket and its place under
// server.max_connections), that one included, whichever of the queue's
// room and the close its goroutine sees first.
func TestHandoffCloseClosesEveryDelivered(t *testing.T) {
	for range 20 {
		l := newHandoffListener(h2cAddr{})
		conns := make([]*closeMark, cap(l.ch)+64) // the last 64 wait for room
		for i := range conns {
			conns[i] = &closeMark{}
			l.deliver(conns[i])
		}
		_ = l.Close()
		deadline := time.Now().Add(5 * time.Second)
		for i := 0; i < len(conns); {
			if conns[i].closed.Load() {
				i++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("connection %d of %d delivered never closed after the listener closed", i, len(conns))
			}
			time.Sleep(time.Millisecond)
		}
	}
}
