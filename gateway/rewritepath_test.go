package gateway_test

import (
	"net/http"
	"testing"
)

// TestRewriteDecodesOnce sends a route that strips /pub and adds /P paths
// whose percent-encoding encodes a '%' (%252e is "%2e" once decoded): the
// upstream gets the path the route matched, rewritten and encoded again,
// which it decodes to what the route matched, on every engine, over
// HTTP/1.1 and h2c. The rewritten path was decoded a second time, so
// /pub/%252e%252e/admin reached the upstream as /admin, out of the /P the
// route confines its requests to and past the strip_prefix, through the
// /pub route's policies.
func TestRewriteDecodesOnce(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		u := startWireUpstream(t, nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: pub
    upstream: up
    match: {path_prefix: /pub/}
    rewrite: {strip_prefix: /pub, add_prefix: /P}
`, engine, u.addr))
		c := protoClient(t, proto, nil, "")
		for _, tc := range []struct{ path, want string }{
			{"/pub/%252e%252e/admin", "/P/%252e%252e/admin"},
			{"/pub/%252E%252E%252Fadmin", "/P/%252E%252E%252Fadmin"},
			{"/pub/a%2520b", "/P/a%2520b"},
			{"/pub/%2e%2e/pub/x", "/P/x"},
		} {
			req, err := http.NewRequest(http.MethodGet, gw.URL+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as it is
			before := len(u.requests())
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			seen := u.requests()[before:]
			if resp.StatusCode != http.StatusOK || len(seen) != 1 || seen[0].Target != tc.want {
				t.Errorf("%s: %d, the upstream got %+v, want 200 and %s", tc.path, resp.StatusCode, seen, tc.want)
			}
		}
	})
}
