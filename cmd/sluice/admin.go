package main

import (
	"net"
	"net/http"

	"golang.org/x/net/netutil"

	"github.com/sluicehq/sluice/config"
)

// adminMaxConns bounds the admin listener's open connections: one more
// waits in the listen backlog, unaccepted, until another closes.
const adminMaxConns = 64

// serveAdmin serves h on ln, the admin listener, with the gateway
// listener's bounds from srv: a connection that sends no whole request
// head within server.read_header_timeout, or stays idle between requests
// for server.idle_timeout, is closed; a request head may hold at most
// server.max_header_bytes; and at most adminMaxConns connections are open
// at once. There is no write timeout, which would cut the dashboard's event
// stream. It returns the server, for its shutdown.
func serveAdmin(ln net.Listener, h http.Handler, srv config.Server) *http.Server {
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: srv.ReadHeaderTimeout.D(),
		IdleTimeout:       srv.IdleTimeout.D(),
		MaxHeaderBytes:    srv.MaxHeaderBytes,
	}
	go func() { _ = s.Serve(netutil.LimitListener(ln, adminMaxConns)) }()
	return s
}
