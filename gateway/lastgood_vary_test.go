package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestLastGoodVaryOnForwardedFor checks, on both engines, that an answer
// that varies by the X-Forwarded-For the gateway sets (one per client
// address) never goes to a client at another address, even one that sends
// the first client's address in its own X-Forwarded-For while the route's
// breaker refuses it (a refused request is never prepared for the
// upstream, so the answer's Vary was compared with the client's own
// header: it went).
func TestLastGoodVaryOnForwardedFor(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var failing atomic.Bool
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if failing.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Vary", "X-Forwarded-For")
			fmt.Fprintf(w, "private to %s", r.Header.Get("X-Forwarded-For"))
		})
		tg := routedGateway(t, engine, up, `
  - name: r
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 1, open_for: 1h}
      fallback: {last_good: {}, status: 503, body: static}
`)
		alice := newClient(t)
		if res := get(t, alice, tg.URL+"/me"); res.Code != 200 || res.Body != "private to 127.0.0.1" {
			t.Fatalf("alice, upstream up: %d %q", res.Code, res.Body)
		}
		failing.Store(true)
		get(t, alice, tg.URL+"/me") // fails: the breaker opens
		if st := tg.routeStatus(t, "r").Breaker; st != "open" {
			t.Fatalf("breaker %q after a failure, want open", st)
		}

		// Mallory connects from another loopback address.
		mallory := newClient(t)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		mallory.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
		for _, h := range []http.Header{nil, {"X-Forwarded-For": {"127.0.0.1"}}} {
			if res := do(t, mallory, "GET", tg.URL+"/me", h, nil); res.Code != 503 || res.Body != "static" {
				t.Errorf("mallory (X-Forwarded-For %q), breaker open: %d %q, want the static 503", h.Get("X-Forwarded-For"), res.Code, res.Body)
			}
		}
	})
}

// TestLastGoodVaryCGINames checks, on both engines, that an answer that
// varies by X-Tenant, kept for a request that sent X_Tenant: a (which a
// CGI-style upstream reads as X-Tenant), is not given to one that sends
// X_Tenant: b while the route's breaker refuses it. (Neither sent
// X-Tenant, so Vary found them alike: tenant a's answer went to b.)
func TestLastGoodVaryCGINames(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var failing atomic.Bool
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if failing.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Vary", "X-Tenant")
			fmt.Fprintf(w, "private to %s", r.Header.Get("X_tenant"))
		})
		tg := routedGateway(t, engine, up, `
  - name: r
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 1, open_for: 1h}
      fallback: {last_good: {}, status: 503, body: static}
`)
		c := newClient(t)
		a := http.Header{"X_tenant": {"a"}}
		if res := do(t, c, "GET", tg.URL+"/me", a, nil); res.Code != 200 || res.Body != "private to a" {
			t.Fatalf("tenant a, upstream up: %d %q", res.Code, res.Body)
		}
		failing.Store(true)
		do(t, c, "GET", tg.URL+"/me", a, nil) // fails: the breaker opens
		if st := tg.routeStatus(t, "r").Breaker; st != "open" {
			t.Fatalf("breaker %q after a failure, want open", st)
		}
		if res := do(t, c, "GET", tg.URL+"/me", http.Header{"X_tenant": {"b"}}, nil); res.Code != 503 || res.Body != "static" {
			t.Errorf("tenant b, breaker open: %d %q, want the static 503", res.Code, res.Body)
		}
		if res := do(t, c, "GET", tg.URL+"/me", a, nil); res.Code != 200 || res.Body != "private to a" {
			t.Errorf("tenant a, breaker open: %d %q, want its last good answer", res.Code, res.Body)
		}
	})
}
