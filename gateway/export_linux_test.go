package gateway

import "net"

// LoopUnread returns how many response bytes wait unsent on g's loops to a
// client connection that waits for its next request (the most of any), or
// -1 when no connection on the loops waits for one.
func LoopUnread(g *Gateway) int {
	e := loopEngineOf(g)
	if e == nil {
		return -1
	}
	loops := e.loopList()
	most := -1
	for _, l := range loops {
		res := make(chan int, 1)
		e.execute(l, func() {
			n := -1
			for cc := range l.conns {
				if cc.state == stateIdle && !cc.reading {
					n = max(n, cc.c.OutboundBuffered())
				}
			}
			res <- n
		})
		most = max(most, <-res)
	}
	return most
}

// LoopsServing returns how many of g's loops have served a connection.
func LoopsServing(g *Gateway) int {
	e := loopEngineOf(g)
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.loops)
}

// LoopsStarted reports whether g's Serve has started its loops.
func LoopsStarted(g *Gateway) bool { return loopEngineOf(g) != nil }

// EnrollWhileDraining has g's loops drain, as Shutdown begins to, and
// then puts nc on them as its listener does a connection accepted just
// before: the race of an accept with Shutdown, made to happen.
func EnrollWhileDraining(g *Gateway, nc net.Conn) {
	e := loopEngineOf(g)
	e.enrolling.Lock()
	e.draining.Store(true)
	e.enrolling.Unlock()
	e.enrollAccepted(nc, &clientConn{slot: g.conns.take(nc, listenerPlain), fresh: true})
}

// BridgedStreams returns how many bridged HTTP/2 streams' goroutines g's
// loops count as at work.
func BridgedStreams(g *Gateway) int {
	e := loopEngineOf(g)
	e.bridged.mu.Lock()
	defer e.bridged.mu.Unlock()
	return e.bridged.n
}

// loopEngineOf returns g's loop engine, nil when no loops run.
func loopEngineOf(g *Gateway) *loopEngine {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.loops
}

// loopList returns e's loops, as they are now.
func (e *loopEngine) loopList() []*loop {
	e.mu.Lock()
	defer e.mu.Unlock()
	loops := make([]*loop, 0, len(e.loops))
	for _, l := range e.loops {
		loops = append(loops, l)
	}
	return loops
}
