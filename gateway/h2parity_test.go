package gateway_test

import (
	"crypto/tls"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// h2Both dials tg over h2c (prior knowledge) and over TLS with h2
// negotiated (tlsAddr, certified by ca), in that order.
func h2Both(t *testing.T, tg *testGateway, tlsAddr string, ca *testpki.CA) map[string]*h2raw {
	t.Helper()
	tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*h2raw{"h2c": dialH2(t, tg.Addr), "h2": newH2(t, tc)}
}

// TestHTTP2AsteriskRefused sends OPTIONS with the :path "*" over h2c and
// over TLS: every HTTP/2 engine answers 400, as nginx does (its log:
// "client sent invalid :path header") and as the gateway refuses the
// asterisk form on HTTP/1.1, and the upstream sees nothing. (net/http's
// HTTP/2 server answered 200 itself, with its general OPTIONS handler,
// where the loops answered 400.)
func TestHTTP2AsteriskRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		ca := testpki.NewCA(t)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), u.addr))
		for proto, h := range h2Both(t, tg, serveTLS(t, tg), ca) {
			h.headers(t, 1, true, ":method", "OPTIONS", ":scheme", "http", ":authority", "a.test", ":path", "*")
			if st, _ := h.read(t, 1); st != "400" {
				t.Errorf("%s OPTIONS *: %s, want 400", proto, st)
			}
		}
		for _, r := range u.requests() {
			t.Errorf("the upstream saw %s %q", r.Method, r.Target)
		}
	})
}
