package gateway

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestIdleConnsNoAlloc: following a connection between its requests
// (idle, then busy) allocates nothing, as the goroutine engine does at
// every request; the list keeps the connections idle longest first.
func TestIdleConnsNoAlloc(t *testing.T) {
	ic := idleConns{cap: &connCap{}}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c1, c2 := &countedConn{Conn: a}, &countedConn{Conn: b}
	ic.connState(c1, fasthttp.StateIdle)
	if n := testing.AllocsPerRun(100, func() {
		ic.connState(c2, fasthttp.StateIdle)
		ic.connState(c2, fasthttp.StateActive)
	}); n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
	ic.connState(c2, fasthttp.StateIdle)
	if n := ic.len(); n != 2 {
		t.Fatalf("%d idle, want 2", n)
	}
	if k := ic.reclaim(1); k != 1 || !c1.reclaiming.Load() || c2.reclaiming.Load() {
		t.Errorf("reclaimed %d, the first %v, the second %v; want the one idle longest", k, c1.reclaiming.Load(), c2.reclaiming.Load())
	}
	ic.connState(c1, fasthttp.StateClosed)
	ic.connState(c2, fasthttp.StateClosed)
	if n := ic.len(); n != 0 {
		t.Errorf("%d idle after both closed, want 0", n)
	}
}
