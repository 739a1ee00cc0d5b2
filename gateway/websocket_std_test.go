package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/internal/testpki"
)

func dialWSVia(t *testing.T, c *http.Client, url string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: c})
	if conn != nil {
		conn.SetReadLimit(1 << 20)
		t.Cleanup(func() { conn.CloseNow() })
	}
	return conn, resp, err
}

// TestWebSocketOverTLS has WebSockets enter through the TLS listener
// (HTTP/1.1 by ALPN, served by the goroutine engine): messages both ways,
// the upstream told the client came over https, the rate limit at the
// handshake, and a concurrency slot held while open and released on
// close.
func TestWebSocketOverTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1h}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ws
    upstream: up
    policies: {rate_limit: {limit: 2, period: 1h, key: route}, concurrency: {max: 1}}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), up.URL))
		url := "https://" + serveTLS(t, gw)
		client := protoClient(t, "h1", ca.Pool, "")
		c, resp, err := dialWSVia(t, client, url+"/a")
		if err != nil {
			t.Fatalf("dial: %v %+v", err, resp)
		}
		if h := <-up.header; h.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("X-Forwarded-Proto %q, want https", h.Get("X-Forwarded-Proto"))
		}
		for i := range 100 {
			echo(t, c, websocket.MessageBinary, []byte(strings.Repeat(fmt.Sprint(i), i*50)))
		}
		// The handshake is recorded once answered, as on the goroutine
		// engine: a WebSocket's lifetime is no request's duration.
		if m := gw.metricsText(t); !strings.Contains(m, `sluice_requests_total{code="101",outcome="ok",route="ws"} 1`) {
			t.Errorf("the open WebSocket's handshake is not among the requests served:\n%s", m)
		}
		if _, resp, err := dialWSVia(t, client, url+"/b"); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a second WebSocket while the only slot is held: %v %+v, want 503", err, resp)
		}
		c.Close(websocket.StatusNormalClosure, "")
		eventually(t, "the slot to be released", func() bool { return gw.routeStatus(t, "ws").ConcurrencyInFlight == 0 })
		// Two handshakes used the limit of 2 (the refused one counted too).
		_, resp, err = dialWSVia(t, client, url+"/c")
		if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			resp.Header.Get("RateLimit-Policy") != `"ws";q=2;w=3600` {
			t.Fatalf("a third handshake over the rate limit: %v %+v, want 429 with Retry-After and the RateLimit headers", err, resp)
		}
	})
}
