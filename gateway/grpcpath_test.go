package gateway_test

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGRPCForwardsRoutedPath sends gRPC calls whose :path has dot
// segments, doubled slashes or an encoded slash to an h2c upstream that
// records the target it got: the upstream gets the path the gateway routed
// by (dot segments resolved, slashes merged, percent-decoded), with the
// route's rewrite applied to it, as an HTTP/1.1 request's upstream gets
// it. The gateway forwarded a call's raw :path, rewritten as it came: an
// add_prefix meant to keep a route's calls under /tenant reached
// /tenant/../admin.S/M, which an upstream that resolves dot segments
// (Envoy's normalize_path, Istio's default) serves as /admin.S/M, and a
// strip_prefix left /api//svc.S/M as //svc.S/M.
func TestGRPCForwardsRoutedPath(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		targets := make(chan string, 8)
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			targets <- r.RequestURI
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte{0, 0, 0, 0, 0})
			w.Header().Set("Grpc-Status", "0")
		}))
		up.Config.ErrorLog = log.New(io.Discard, "", 0)
		up.Config.Protocols = new(http.Protocols)
		up.Config.Protocols.SetUnencryptedHTTP2(true)
		up.Start()
		t.Cleanup(up.Close)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: api
    upstream: up
    match: {path_prefix: /api/}
    rewrite: {strip_prefix: /api}
  - name: tenant
    upstream: up
    rewrite: {add_prefix: /tenant}
`, engine, up.URL))
		c := protoClient(t, "h2c", nil, "")
		for _, tc := range []struct{ path, want string }{
			{"/x/../admin.S/M", "/tenant/admin.S/M"},
			{"/%2e%2e/admin.S/M", "/tenant/admin.S/M"},
			{"/admin.S%2F..%2F..%2Fother.S/M?q=1", "/tenant/other.S/M?q=1"},
			{"/api//svc.S/M", "/svc.S/M"},
			{"/api/%252e%252e/svc.S/M", "/%252e%252e/svc.S/M"}, // decoded once
			{"/api/x/../svc.S/M", "/svc.S/M"},
			{"/svc.S/M", "/tenant/svc.S/M"},
		} {
			req, err := http.NewRequest(http.MethodPost, gw.URL+"/", bytes.NewReader([]byte{0, 0, 0, 0, 0}))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as it is
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Trailer.Get("Grpc-Status") != "0" {
				t.Errorf("%s: status %d, grpc-status %q, want 200 and 0", tc.path, resp.StatusCode, resp.Trailer.Get("Grpc-Status"))
				continue
			}
			if got := <-targets; got != tc.want {
				t.Errorf("%s: the upstream got %q, want %q", tc.path, got, tc.want)
			}
		}
	})
}
