package gateway_test

import (
	"net/http"
	"testing"
)

// TestHostVariantsCannotBypassRoutes checks, on both engines over HTTP/1.1
// and h2c, that a route matched by host serves the host's other spellings
// an upstream reads as it: with the trailing dot of a fully qualified name
// (nginx drops it) and any case or port. (api.example. matched no route
// for api.example and went through the catch-all's policies.)
func TestHostVariantsCannotBypassRoutes(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				up := startUpstream(t, "up", nil)
				gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: limited
    match: {host: api.example}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: dotted
    match: {host: dotted.example.}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - {name: free, upstream: up}
`, engine, up.URL))
				c := protoClient(t, proto, nil, "")
				for i, s := range []struct {
					host string
					code int
				}{
					{"api.example", 200},
					{"api.example.", 429},
					{"API.Example.", 429},
					{"api.example.:8080", 429},
					{"dotted.example", 200},
					{"dotted.example.", 429},
					{"other.example", 200},
				} {
					if r := do(t, c, "GET", gw.URL+"/", http.Header{"Host": {s.host}}, nil); r.Code != s.code {
						t.Errorf("step %d (Host %s): status %d, want %d", i, s.host, r.Code, s.code)
					}
				}
			})
		}
	})
}
