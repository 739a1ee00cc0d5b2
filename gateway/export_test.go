package gateway

import "context"

// CoalesceShared returns how many requests of the named route joined a
// coalesced upstream call already under way, so that tests can wait for
// every request to have joined before letting the upstream answer.
func CoalesceShared(g *Gateway, route string) uint64 {
	for _, r := range g.state.Load().routes {
		if r.name == route && r.life.group != nil {
			return r.life.group.Stats().Shared
		}
	}
	return 0
}

// OpenConns returns how many client connections g holds open, on its
// loops and its goroutine engine.
func OpenConns(g *Gateway) int64 {
	n := int64(g.server.GetOpenConnectionsCount())
	g.mu.Lock()
	loops := g.loops
	g.mu.Unlock()
	if loops != nil {
		n += loops.conns.Load()
	}
	return n
}

// FlushTraces exports every span g's tracer has ended (nothing when
// tracing is off).
func FlushTraces(ctx context.Context, g *Gateway) error {
	return g.state.Load().tracer.ForceFlush(ctx)
}

// SetMaxHandshakes sets how many TLS handshakes a gateway made from now on
// runs at once, until the test ends.
func SetMaxHandshakes(t interface{ Cleanup(func()) }, n int) {
	old := maxHandshakes
	maxHandshakes = n
	t.Cleanup(func() { maxHandshakes = old })
}

// LingerTime is how long a lingering close reads at most.
const LingerTime = lingerTime

// WatchDelay is how long a request waits for its upstream before its
// client's leaving is watched for (and a half-closed client taken to have
// left).
const WatchDelay = watchDelay

// OpenSlots returns how many client connections hold a place under
// server.max_connections now, on all of g's listeners.
func OpenSlots(g *Gateway) int64 {
	var n int64
	for _, k := range g.conns.opened() {
		n += k
	}
	return n
}

// ConnWaits returns how many connections g's listeners accepted past
// server.max_connections and served only once another closed.
func ConnWaits(g *Gateway) uint64 { return g.conns.waits.Load() }

// IdleConns returns how many of g's client connections wait idle between
// requests, as those it may close to make room under
// server.max_connections (see Gateway.reclaimIdle).
func IdleConns(g *Gateway) int {
	n := g.idle.len()
	if e := g.tls.loops.Load(); e != nil {
		n += len(e.idleConns())
	}
	return n
}
