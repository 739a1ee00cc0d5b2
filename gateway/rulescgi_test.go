package gateway_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// cgiRules is a route whose request rules remove X-Secret and set X-User.
const cgiRules = `
    headers:
      request: {remove: [X-Secret], set: {X-User: anon}}
`

// cgiValues returns the values of h under every name a CGI-style server
// reads as name (any case, '_' for '-'), by name.
func cgiValues(h http.Header, name string) map[string][]string {
	got := map[string][]string{}
	for k, vs := range h {
		if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), name) {
			got[k] = vs
		}
	}
	return got
}

// checkCGIRules reports the fields of h, a request the upstream got
// through cgiRules, that a CGI-style server (WSGI, Rack, PHP: HTTP_X_USER
// for X-User and X_User alike) would read as the client's X-Secret or
// X-User.
func checkCGIRules(t *testing.T, h http.Header) {
	t.Helper()
	if got := cgiValues(h, "X-Secret"); len(got) != 0 {
		t.Errorf("the upstream got %v, want no X-Secret under any name", got)
	}
	got := cgiValues(h, "X-User")
	if len(got) != 1 || !slices.Equal(got["X-User"], []string{"anon"}) && !slices.Equal(got["x-user"], []string{"anon"}) {
		t.Errorf("the upstream got %v, want X-User: anon alone", got)
	}
}

// TestRouteRulesTakeCGIForms sends a route that removes X-Secret and sets
// X-User a client's X_Secret and X_User (and x_user): a server of CGI's
// lineage reads them as X-Secret and X-User, so the rules take them out as
// they take out the names they were given, on every engine and protocol
// (the loops' own path, the goroutine engine's, HTTP/2, gRPC). They
// passed: the upstream read the client's X-Secret after the route removed
// it, and the client's X-User beside, or in place of, the route's.
func TestRouteRulesTakeCGIForms(t *testing.T) {
	const fields = "X_Secret: s\r\nX_User: admin\r\nx_user: root\r\n"
	t.Run("h1", func(t *testing.T) {
		forEngines(t, func(t *testing.T, engine string) {
			u := startWireUpstream(t, nil)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: all
    upstream: up
`+cgiRules, engine, u.addr))
			exchangeRaw(t, gw.Addr, "GET /x HTTP/1.1\r\nHost: a\r\n"+fields+"\r\n", 1)
			exchangeRaw(t, gw.Addr, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"+fields+"\r\n2\r\nhi\r\n0\r\n\r\n", 1)
			seen := u.requests()
			if len(seen) != 2 {
				t.Fatalf("the upstream got %d requests, want 2", len(seen))
			}
			for _, r := range seen {
				checkCGIRules(t, r.Header)
			}
		})
	})
	forH2Engines(t, func(t *testing.T, engine string) {
		t.Run("h2c", func(t *testing.T) {
			up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    upstream: up
`+cgiRules, engine, up.URL))
			req, err := http.NewRequest(http.MethodGet, gw.URL+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header["x_secret"] = []string{"s"}
			req.Header["x_user"] = []string{"admin"}
			resp, err := protoClient(t, "h2c", nil, "").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			checkCGIRules(t, up.lastRequest().Header)
		})
		t.Run("grpc", func(t *testing.T) {
			up := startGRPCUpstream(t)
			_, c := grpcGateway(t, engine, up, cgiRules)
			ctx := metadata.AppendToOutgoingContext(callCtx(t), "x_secret", "s", "x_user", "admin")
			if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))}); err != nil {
				t.Fatal(err)
			}
			checkCGIRules(t, http.Header(<-up.md))
		})
	})
}
