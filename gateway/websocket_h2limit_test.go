package gateway_test

import (
	"net/http"
	"testing"
)

// TestWebSocketsPerHTTP2Connection opens WebSockets over one HTTP/2
// connection with server.http2.max_websockets_per_connection 2: the
// third handshake is refused (429, websocket_limit) while another
// connection still opens one, and once one of the two closes, the first
// connection opens another. (A connection could open as many as it had
// streams: max_concurrent_streams WebSockets, each holding two sockets'
// buffers.)
func TestWebSocketsPerHTTP2Connection(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, http2: {max_websockets_per_connection: 2}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
		tr := h2cTransport()
		url := "http://" + gw.Addr + "/ws"
		a := dialH2WSOver(t, tr, url, nil)
		b := dialH2WSOver(t, tr, url, nil)
		for _, c := range []*h2WS{a, b} {
			if c.resp.StatusCode != http.StatusOK {
				t.Fatalf("handshake: %d, want 200", c.resp.StatusCode)
			}
			c.echo(t, 1, []byte("hi"))
		}
		if c := dialH2WSOver(t, tr, url, nil); c.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a third on the connection: %d, want 429", c.resp.StatusCode)
		}
		if other := dialH2WS(t, gw.Addr, "/ws", nil); other.resp.StatusCode != http.StatusOK {
			t.Fatalf("one on another connection: %d, want 200", other.resp.StatusCode)
		}
		a.closeNormally(t)
		eventually(t, "a WebSocket in the closed one's place", func() bool {
			c := dialH2WSOver(t, tr, url, nil)
			return c.resp.StatusCode == http.StatusOK
		})
	})
}
