package gateway_test

import (
	"testing"
)

// TestH2CUpgradeNamingWebSocket sends a request asking to upgrade to h2c
// whose Upgrade names websocket too: the request is answered on stream 1
// over HTTP/2, where no WebSocket can be carried, so it reaches the
// upstream as a plain GET, without the hop-by-hop Upgrade. (The HTTP/2
// engine took it for an HTTP/1.1 WebSocket handshake: its upstream got
// the handshake, and the client a 502 once the connection could not be
// taken over.)
func TestH2CUpgradeNamingWebSocket(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		tg := gatewayTo(t, engine, up.addr())
		fr, dec, status := upgradeH2C(t, tg.Addr, "GET /first HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
			"Upgrade: h2c, websocket\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		if body := readStream(t, fr, dec, 1); *status != "200" || body != "up /first" {
			t.Errorf("upgraded request: %s %q", *status, body)
		}
		if r := up.lastRequest(); r == nil || r.Header.Get("Upgrade") != "" {
			t.Errorf("the upstream's request: %v", r)
		}
	})
}
