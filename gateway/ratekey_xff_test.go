package gateway_test

import (
	"net/http"
	"testing"
)

// TestRateLimitForwardedForPorts checks, on both engines over HTTP/1.1
// and h2c, that key: ip reads a trusted proxy's X-Forwarded-For entries
// written with a port ("203.0.113.7:4711", "[2001:db8::1]:4711") as the
// client's address, and that an entry that is no address ("unknown")
// keys the request by the proxy that added it, never by itself. (An entry
// with a port was no address: every client behind such a proxy shared
// the proxy's one key.)
func TestRateLimitForwardedForPorts(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ip
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h}
`, engine, up.URL))
		c := protoClient(t, proto, nil, "")
		for i, s := range []struct {
			xff  string
			code int
		}{
			{"203.0.113.7:1111", 200},
			{"203.0.113.7:2222", 429}, // the same client from another port
			{"203.0.113.7", 429},
			{"203.0.113.8:1111", 200}, // another client behind the same proxy
			{"[2001:db8:0:1::1]:1111", 200},
			{"[2001:db8:0:1::2]:2222", 429}, // the same /64
			{"[2001:db8:0:2::1]", 200},
			{"198.51.100.1:1, 10.0.0.9:80", 200}, // a trusted proxy's entry with a port is passed over
			{"198.51.100.1", 429},
			{"unknown", 200},               // keyed by the peer, 127.0.0.1
			{"_hidden", 429},               // the peer again
			{"198.51.100.2, unknown", 429}, // the peer: the walk ends at "unknown"
			{"10.0.0.7:99999", 429},        // no port: the peer
			{"[203.0.113.9]:1", 429},       // IPv4 in brackets is no entry: the peer
		} {
			r := do(t, c, "GET", gw.URL+"/", http.Header{"X-Forwarded-For": {s.xff}}, nil)
			if r.Code != s.code {
				t.Errorf("step %d (X-Forwarded-For %s): status %d, want %d", i, s.xff, r.Code, s.code)
			}
		}
	})
}
