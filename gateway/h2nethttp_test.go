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
