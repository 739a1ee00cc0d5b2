package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// requestIDForms are a client's X-Request-Id lines under the names a
// CGI-style server reads as X-Request-Id ('_' for '-').
var requestIDForms = http.Header{"X_request_id": {"forged-1"}, "X-Request_id": {"forged-2"}, "X_request-Id": {"forged-3"}}

// checkOneRequestID fails unless h, the headers an upstream got, hold the
// gateway's X-Request-Id alone, under no other form of its name.
func checkOneRequestID(t *testing.T, h http.Header) {
	t.Helper()
	for k, vs := range h {
		if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "X-Request-Id") && k != "X-Request-Id" {
			t.Errorf("the upstream got the client's %s: %q", k, vs)
		}
	}
	if got := h.Values("X-Request-Id"); len(got) != 1 || strings.HasPrefix(got[0], "forged") {
		t.Errorf("X-Request-Id %q, want the gateway's alone", got)
	}
}

// TestRequestIDCGINames checks, on both engines over HTTP/1.1, h2c, a
// WebSocket handshake and gRPC, that a client's X-Request-Id sent under a
// name with '_' for '-' does not reach the upstream: a CGI-style server
// reads X_Request_Id as X-Request-Id, and would take the client's id
// beside (or for) the gateway's. (They were passed on.)
func TestRequestIDCGINames(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				up := startUpstream(t, "up", nil)
				gw := gatewayTo(t, engine, up.addr())
				if r := do(t, protoClient(t, proto, nil, ""), "GET", gw.URL+"/", requestIDForms.Clone(), nil); r.Code != 200 {
					t.Fatalf("status %d", r.Code)
				}
				checkOneRequestID(t, up.lastRequest().Header)
			})
		}
		t.Run("websocket", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, "")
			c := newClient(t)
			req, _ := http.NewRequest("GET", gw.URL+"/", nil)
			req.Header = requestIDForms.Clone()
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d", resp.StatusCode)
			}
			checkOneRequestID(t, <-up.header)
		})
		t.Run("grpc", func(t *testing.T) {
			up := startGRPCUpstream(t)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, engine, up.addr))
			ctx := metadata.AppendToOutgoingContext(callCtx(t), "x_request_id", "forged-1", "x-request_id", "forged-2")
			if _, err := grpcClient(t, gw.Addr).UnaryCall(ctx, &grpc_testing.SimpleRequest{Payload: payload([]byte("x"))}); err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, vs := range <-up.md {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			checkOneRequestID(t, h)
		})
	})
}
