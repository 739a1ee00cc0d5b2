package gateway_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestHTTP2RequestTrailersToHTTP2Upstreams sends an HTTP/2 request whose
// announced trailers are X-Checksum beside headers the gateway never
// passes from a client (X-Forwarded-For, Forwarded, its X-Request-Id, the
// trace context) and ones the route's rules set (X-Env) or remove
// (X-Secret), to h2c and h2 upstreams: each receives the body and
// X-Checksum alone in its trailer section, its header section holding
// the route's X-Env, the gateway's X-Request-Id and no X-Secret. (An h2
// or h2c upstream got no trailers at all; an HTTP/1.1 one got them.)
func TestHTTP2RequestTrailersToHTTP2Upstreams(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		for _, proto := range []string{"h2c", "h2"} {
			type seen struct {
				proto, body     string
				header, trailer http.Header
			}
			got := make(chan seen, 1)
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- seen{r.Proto, string(b), r.Header, r.Trailer}
			}))
			up.Config.Protocols = new(http.Protocols)
			tlsLine := ""
			if proto == "h2" {
				up.Config.Protocols.SetHTTP2(true)
				up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server("api.internal").TLS}, NextProtos: []string{"h2"}}
				up.StartTLS()
				tlsLine = fmt.Sprintf(", tls: {ca_file: %s, server_name: api.internal}", ca.CertFile)
			} else {
				up.Config.Protocols.SetUnencryptedHTTP2(true)
				up.Start()
			}
			tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: %s%s}
routes:
  - name: all
    upstream: up
    headers:
      request: {set: {X-Env: prod}, remove: [X-Secret]}
`, engine, up.URL, proto, tlsLine))
			h := dialH2(t, tg.Addr)
			h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/t",
				"trailer", "x-forwarded-for, forwarded, x-request-id, traceparent, x-env, x-secret, x-checksum", "content-length", "5")
			if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			h.headers(t, 1, true, "x-forwarded-for", "6.6.6.6", "forwarded", "for=6.6.6.6", "x-request-id", "forged",
				"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				"x-env", "dev", "x-secret", "s3cr3t", "x-checksum", "abc")
			if st, _ := h.read(t, 1); st != "200" {
				t.Fatalf("%s: a POST with trailers: %s", proto, st)
			}
			select {
			case s := <-got:
				if s.proto != "HTTP/2.0" || s.body != "hello" {
					t.Errorf("%s: the upstream got %s with body %q, want HTTP/2.0 and hello", proto, s.proto, s.body)
				}
				if s.trailer.Get("X-Checksum") != "abc" || len(s.trailer) != 1 {
					t.Errorf("%s: the upstream got trailers %v, want X-Checksum: abc alone", proto, s.trailer)
				}
				if s.header.Get("X-Env") != "prod" || s.header.Get("X-Secret") != "" || s.header.Get("X-Request-Id") == "forged" || s.header.Get("X-Request-Id") == "" {
					t.Errorf("%s: the upstream got headers %v, want X-Env: prod, the gateway's X-Request-Id and no X-Secret", proto, s.header)
				}
			case <-time.After(waitLimit):
				t.Fatalf("%s: the upstream saw no request", proto)
			}
			tg.stop(t)
			up.Close()
		}
	})
}
