package gateway_test

import (
	"net/http"
	"testing"
)

// TestHTTP2LengthWithoutBodyRefused sends HTTP/2 requests whose
// content-length promises a body that never comes (END_STREAM on their
// HEADERS): a malformed request (RFC 9113 section 8.1.1), refused on every
// HTTP/2 engine, 400 (as nginx answers) or a PROTOCOL_ERROR reset (as the
// loops answer), never sent upstream; a HEAD's too (section 8.1.1 names
// only answers to HEAD as bodiless). A content-length of 0 is served.
func TestHTTP2LengthWithoutBodyRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		seen := make(chan string, 8)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			seen <- r.Method
		})
		gw := gatewayTo(t, engine, up.addr())
		h := dialH2(t, gw.Addr)
		id := uint32(1)
		for _, method := range []string{"POST", "GET", "HEAD"} {
			h.headers(t, id, true, ":method", method, ":scheme", "http", ":authority", "x", ":path", "/a", "content-length", "5")
			if status, body := h.read(t, id); status != "400" && status != "RST PROTOCOL_ERROR" {
				t.Errorf("%s with content-length 5 and no body: %s %q, want 400 or RST PROTOCOL_ERROR", method, status, body)
			}
			id += 2
		}
		h.headers(t, id, true, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/a", "content-length", "0")
		if status, _ := h.read(t, id); status != "200" {
			t.Errorf("POST with content-length 0 and no body: %s, want 200", status)
		}
		if m := <-seen; m != "POST" || len(seen) > 0 {
			t.Errorf("the upstream got a %s, and %d more", m, len(seen))
		}
	})
}

// TestHTTP2NoHostRefused sends HTTP/2 requests that name no host: an
// empty :authority and no host field (RFC 9113 section 8.3.1: an http or
// https request must carry one, not empty). nginx answers 400, and so
// does every HTTP/2 engine, where they forwarded the request without
// X-Forwarded-Host; a host field without :authority is served as before,
// its host the X-Forwarded-Host.
func TestHTTP2NoHostRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := gatewayTo(t, engine, up.addr())
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, true, ":method", "GET", ":scheme", "http", ":authority", "", ":path", "/a")
		if status, body := h.read(t, 1); status != "400" {
			t.Errorf("an empty :authority without a host field: %s %q, want 400", status, body)
		}
		h.headers(t, 3, true, ":method", "GET", ":scheme", "http", ":path", "/b", "host", "x")
		if status, body := h.read(t, 3); status != "200" {
			t.Fatalf("a host field without :authority: %s %q, want 200", status, body)
		}
		r := up.lastRequest()
		if r.URL.Path != "/b" || r.Header.Get("X-Forwarded-Host") != "x" {
			t.Errorf("the upstream got %s with X-Forwarded-Host %q, want /b with x", r.URL.Path, r.Header.Get("X-Forwarded-Host"))
		}
	})
}
