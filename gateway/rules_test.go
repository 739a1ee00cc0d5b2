package gateway_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRouteRules checks a route's rewrite, header and preserve_host rules
// on each engine: what the upstream sees of the request, and what the
// client sees of the upstream's response.
func TestRouteRules(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, func(i int, r seenRequest) string {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nServer: up/1\r\nX-Up: 1\r\nX-Served: up\r\nContent-Length: %d\r\n\r\n%d", len(fmt.Sprint(i)), i)
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: api
    match: {path_prefix: /v1}
    upstream: up
    rewrite: {strip_prefix: /v1, add_prefix: /api}
    headers:
      request: {set: {X-Env: prod, X-Forwarded-Proto: https}, add: {X-Tag: gw}, remove: [Cookie]}
      response: {set: {X-Served: sluice}, add: {X-Extra: "1"}, remove: [Server]}
    preserve_host: true
  - {name: strip, match: {path_prefix: /old}, upstream: up, rewrite: {strip_prefix: /old}}
  - {name: plain, upstream: up}
`, engine, u.addr))
		r := exchangeRaw(t, gw.Addr, "GET /v1/users?q=1 HTTP/1.1\r\nHost: api.example.com\r\nCookie: a=b\r\nX-Env: dev\r\nX-Tag: client\r\n\r\n", 1)[0]
		if r.Code != 200 || r.Header.Values("Server") != nil || r.Header.Get("X-Up") != "1" ||
			!slices.Equal(r.Header.Values("X-Served"), []string{"sluice"}) || r.Header.Get("X-Extra") != "1" {
			t.Errorf("answer %d %v, want 200 without Server, with X-Up, X-Served: sluice and X-Extra", r.Code, r.Header)
		}
		seen := u.requests()
		if len(seen) != 1 {
			t.Fatalf("upstream saw %d requests, want 1", len(seen))
		}
		h := seen[0].Header
		if seen[0].Target != "/api/users?q=1" || seen[0].Host != "api.example.com" ||
			h.Values("Cookie") != nil || !slices.Equal(h.Values("X-Env"), []string{"prod"}) ||
			!slices.Equal(h.Values("X-Tag"), []string{"client", "gw"}) || h.Get("X-Forwarded-Host") != "api.example.com" ||
			!slices.Equal(h.Values("X-Forwarded-Proto"), []string{"https"}) {
			t.Errorf("upstream saw %s %v, want /api/users?q=1 with the client's Host, no Cookie, X-Env: prod, X-Tag: client and gw, X-Forwarded-Proto: https", seen[0].Target, h)
		}
		if st := gw.Status(); engine == "loop" && (!gw.routeStatus(t, "api").Loop || st.Engine.Handovers != 0) {
			t.Errorf("route served by the loops: %v, hand-overs %d; want the loops to apply the rules themselves", gw.routeStatus(t, "api").Loop, st.Engine.Handovers)
		}
		for _, tt := range []struct{ path, want string }{
			{"/v1", "/api/"},
			{"/v10/x", "/api/v10/x"},
			{"/v1/a%20b?x=%2F", "/api/a%20b?x=%2F"}, // percent-encoding kept (the loops hand it over)
			{"/old/a/b", "/a/b"},
			{"/old", "/"},
			{"/older", "/older"},
			{"/other", "/other"},
		} {
			before := len(u.requests())
			exchangeRaw(t, gw.Addr, "GET "+tt.path+" HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 1)
			got := u.requests()[before:]
			if len(got) != 1 || got[0].Target != tt.want {
				t.Errorf("%s: upstream saw %+v, want %s", tt.path, got, tt.want)
				continue
			}
			host := u.addr // the target's
			if strings.HasPrefix(tt.want, "/api") {
				host = "api.example.com" // the api route preserves the client's
			}
			if got[0].Host != host {
				t.Errorf("%s: upstream saw Host %q, want %q", tt.path, got[0].Host, host)
			}
		}
	})
}
