package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// Hostile input on the protocols beyond plaintext HTTP/1.1: what a client
// can make the upstream receive, past the route's rules. (The raw HTTP/2
// client is in h2raw_test.go.)

// TestGRPCContentTypeKeepsMethod sends, over h2c, a GET whose
// Content-Type is gRPC's to a route that admits only GET: a gRPC call is
// a POST (the gRPC over HTTP/2 protocol), so this one is a plain request
// and reaches the upstream as the GET it is. (It was taken for a gRPC
// call and sent upstream as a POST with its body: a route's methods rule
// let a POST through.)
func TestGRPCContentTypeKeepsMethod(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startProtoUpstream(t, "h2c", nil, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: h2c}
routes:
  - {name: read-only, upstream: up, match: {methods: [GET]}}
`, engine, u.URL))
		c := protoClient(t, "h2c", nil, "")
		r := do(t, c, http.MethodGet, tg.URL+"/svc/Delete", http.Header{"Content-Type": {"application/grpc"}},
			strings.NewReader("\x00\x00\x00\x00\x02hi"))
		if r.Code != http.StatusOK || !strings.HasPrefix(r.Body, "HTTP/2.0 GET /svc/Delete") {
			t.Errorf("a GET with gRPC's content type: %d %q, want the upstream's answer to a GET", r.Code, r.Body)
		}
	})
}
