package gateway

// LoopTLSConns returns how many connections of g's TLS listeners its
// event loops took, or 0 when no loops run.
func LoopTLSConns(g *Gateway) uint64 {
	g.mu.Lock()
	e := g.loops
	g.mu.Unlock()
	if e == nil {
		return 0
	}
	return e.tlsConns.Load()
}

// LoopHandovers returns how many connections g's event loops handed to
// another engine, or 0 when no loops run.
func LoopHandovers(g *Gateway) uint64 {
	g.mu.Lock()
	e := g.loops
	g.mu.Unlock()
	if e == nil {
		return 0
	}
	return e.handovers.Load()
}
