package gateway

import "net/http"

// CoalesceShared returns how many requests of the named route joined a
// coalesced upstream call already under way, so that tests can wait for
// every request to have joined before letting the upstream answer.
func CoalesceShared(g *Gateway, route string) uint64 {
	for _, r := range g.state.Load().routes {
		if r.name == route && r.group != nil {
			return r.group.Stats().Shared
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

// GRPCHandler returns a net/http handler that routes a request as the
// gateway does and serves it as a gRPC call, for tests of gRPC calls on an
// HTTP/2 server of their own.
func GRPCHandler(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := g.state.Load()
		rt := st.route(stdRequest{r})
		if rt == nil {
			http.NotFound(w, r)
			return
		}
		g.serveGRPC(w, r, st, rt)
	})
}

// WebSocketHandler returns a net/http handler that routes a request as the
// gateway does and serves it as a WebSocket handshake, for tests of
// WebSockets on a net/http server (TLS) of their own.
func WebSocketHandler(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := g.state.Load()
		rt := st.route(stdRequest{r})
		if rt == nil || !isStdWebSocket(r) {
			http.NotFound(w, r)
			return
		}
		g.serveStdWebSocket(w, r, st, rt)
	})
}
