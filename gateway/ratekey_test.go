package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestRateLimitKeyHeaderAmbiguous checks, on both engines over HTTP/1.1
// and h2c, that a request whose key header is ambiguous is refused with
// 400 ambiguous_key without reaching the upstream, and that the forms a
// client could dress one key in (surrounding whitespace, '_' for '-')
// count against that key. (The first of repeated values was the key: a
// client that sent a fresh value before its real key was never limited;
// over HTTP/2, trailing whitespace made a fresh key too.)
func TestRateLimitKeyHeaderAmbiguous(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: keyed
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: "header:X-Api-Key"}
`)
		c := protoClient(t, proto, nil, "")
		steps := []struct {
			header http.Header
			code   int
		}{
			{http.Header{"X-Api-Key": {"fresh1", "real"}}, 400},
			{http.Header{"X-Api-Key": {"fresh2", "real"}}, 400},
			{http.Header{"X-Api-Key": {"fresh3, real"}}, 400},
			{http.Header{"X-Api-Key": {"real"}, "X_api_key": {"fresh4"}}, 400},
			{http.Header{"X-Api-Key": {"real"}}, 200},
			{http.Header{"X-Api-Key": {"real"}}, 429},
			{http.Header{"X-Api-Key": {" real\t"}}, 429},
			{http.Header{"X_api_key": {"real"}}, 429},
			{http.Header{"X-Api-Key": {"other"}}, 200},
		}
		for i, s := range steps {
			r := do(t, c, "GET", gw.URL+"/", s.header, nil)
			if r.Code != s.code {
				t.Errorf("step %d (%q): status %d, want %d", i, s.header, r.Code, s.code)
				continue
			}
			if s.code == 400 && r.errorBody(t).Error != "ambiguous_key" {
				t.Errorf("step %d (%q): body %q, want ambiguous_key", i, s.header, r.Body)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("the upstream got %d calls, want 2", n)
		}
	})
}

// TestRateLimitKeyHeaderAmbiguousRaw sends the repeated key header in the
// forms a Go client does not write (names in other cases, an empty line
// and a value) straight to both engines, and key header lines no parser
// of the gateway takes.
func TestRateLimitKeyHeaderAmbiguousRaw(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: keyed
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: "header:X-Api-Key"}
`)
		for _, lines := range []string{
			"x-api-key: fresh\r\nX-API-KEY: real\r\n",
			"X-Api-Key: fresh\r\nx_api-key: real\r\n",
			"X-Api-Key:\r\nX-Api-Key: real\r\n",
		} {
			resp, body := rawRequest(t, gw.Addr, "GET / HTTP/1.1\r\nHost: a\r\n"+lines+"Connection: close\r\n\r\n")
			if resp.StatusCode != 400 || !strings.Contains(body, "ambiguous_key") {
				t.Errorf("%q: status %d, body %q; want 400 ambiguous_key", lines, resp.StatusCode, body)
			}
		}
		// Forms of a key header line the strict parsers refuse outright:
		// a space before the colon, obs-fold, a NUL.
		for _, lines := range []string{
			"X-Api-Key : fresh\r\nX-Api-Key: real\r\n",
			"X-Api-Key: real\r\n fresh\r\n",
			"X-Api-Key: real\x00fresh\r\n",
		} {
			resp, _ := rawRequest(t, gw.Addr, "GET / HTTP/1.1\r\nHost: a\r\n"+lines+"Connection: close\r\n\r\n")
			if resp.StatusCode != 400 {
				t.Errorf("%q: status %d, want 400", lines, resp.StatusCode)
			}
		}
		if n := up.calls.Load(); n != 0 {
			t.Errorf("the upstream got %d calls, want none", n)
		}
	})
}

// TestGRPCRateLimitKeyAmbiguous checks that a gRPC call whose key
// metadata is repeated is refused with INVALID_ARGUMENT without reaching
// the upstream, on both engines. (The first value was the key.)
func TestGRPCRateLimitKeyAmbiguous(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		_, c := grpcGateway(t, engine, up, `    policies: {rate_limit: {limit: 1, period: 1h, key: "header:X-Api-Key"}}`)
		for i := range 3 {
			ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-api-key", "fresh"+string(rune('a'+i)), "x-api-key", "real")
			_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "ambiguous_key" {
				t.Errorf("call %d: %v, want INVALID_ARGUMENT ambiguous_key", i, st)
			}
		}
		if n := up.unary.Load(); n != 0 {
			t.Errorf("the upstream got %d calls, want none", n)
		}
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-api-key", "real")
		for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
			_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
			if st := status.Convert(err); st.Code() != want {
				t.Errorf("single key, call %d: %v, want %v", i, st, want)
			}
		}
	})
}

// TestRateLimitIPv6Prefix checks, on both engines, that key: ip keys an
// IPv6 client by its /64 (ipv6_prefix's default), an IPv4 one, mapped or
// not, by its address, and that ipv6_prefix: 128 keys each IPv6 address.
// The clients are named by a trusted proxy's X-Forwarded-For. (Each IPv6
// address was a key of its own: a client took a fresh limit from each
// address of its block.)
func TestRateLimitIPv6Prefix(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
trusted_proxies: [127.0.0.1/32]
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: each
    match: {path_prefix: /each}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, ipv6_prefix: 128}
  - name: block
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h}
`, engine, up.URL))
		c := newClient(t)
		for i, s := range []struct {
			path, client string
			code         int
		}{
			{"/", "2001:db8:0:1::1", 200},
			{"/", "2001:db8:0:1::2", 429},
			{"/", "2001:db8:0:1:ffff:ffff:ffff:ffff", 429},
			{"/", "2001:db8:0:2::1", 200},
			{"/", "10.0.0.1", 200},
			{"/", "::ffff:10.0.0.1", 429},
			{"/", "10.0.0.2", 200},
			{"/each", "2001:db8:0:1::1", 200},
			{"/each", "2001:db8:0:1::2", 200},
			{"/each", "2001:db8:0:1::2", 429},
		} {
			r := do(t, c, "GET", gw.URL+s.path, http.Header{"X-Forwarded-For": {s.client}}, nil)
			if r.Code != s.code {
				t.Errorf("step %d (%s from %s): status %d, want %d", i, s.path, s.client, r.Code, s.code)
			}
		}
	})
}

// TestRateLimitKeyAmbiguousOverTLS checks the TLS listener's readers on
// both engines: a WebSocket handshake and a plain
// HTTP/1.1 request whose key header is repeated are refused with 400
// ambiguous_key, and never reach the upstream.
func TestRateLimitKeyAmbiguousOverTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ws
    upstream: up
    policies: {rate_limit: {limit: 100, period: 1h, key: "header:X-Api-Key"}}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), up.URL))
		url := "https://" + serveTLS(t, gw)
		client := protoClient(t, "h1", ca.Pool, "")
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		repeated := http.Header{"X-Api-Key": {"fresh", "real"}}
		c, resp, err := websocket.Dial(ctx, url+"/ws", &websocket.DialOptions{HTTPClient: client, HTTPHeader: repeated})
		if c != nil {
			c.CloseNow()
		}
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("WebSocket handshake: %v %+v, want 400", err, resp)
		}
		if r := do(t, client, "GET", url+"/plain", repeated, nil); r.Code != 400 || r.errorBody(t).Error != "ambiguous_key" {
			t.Errorf("plain request: %d %q, want 400 ambiguous_key", r.Code, r.Body)
		}
		select {
		case h := <-up.header:
			t.Errorf("the upstream got a handshake: %v", h)
		default:
		}
	})
}
