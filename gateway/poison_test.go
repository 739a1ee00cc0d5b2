package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// evil is a whole response hidden after another one, which a pooled
// connection would serve to the next request if its stray bytes were
// left in it. The padding outgrows a connection's read buffer.
var evil = strings.Repeat("x", 8<<10) + "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL"

// TestPoolNotPoisoned has a target send bytes after a complete response:
// a body after a 204, after a HEAD answer, more than a Content-Length
// said, or data on an idle connection. The connection must be closed, not
// pooled: the next requests, from another client, get their own answers
// and never those bytes.
func TestPoolNotPoisoned(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, tt := range []struct {
		name, method, answer string
		code                 int
	}{
		{"body after 204", "GET", "HTTP/1.1 204 No Content\r\n\r\n" + evil, 204},
		{"body after 304", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + evil, 304},
		{"body after a HEAD answer", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + evil, 200},
		{"more than Content-Length", "GET", ok + evil, 200},
		{"data on an idle connection", "GET", ok, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				idle := tt.name == "data on an idle connection"
				spoke := make(chan struct{})
				speak := make(chan struct{})
				up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
					serveRequests(c, br, func(r *http.Request) bool {
						if r.URL.Path != "/first" {
							_, err := io.WriteString(c, ok)
							return err == nil
						}
						if _, err := io.WriteString(c, tt.answer); err != nil {
							return false
						}
						if idle {
							<-speak // once the gateway has pooled the connection
							_, _ = io.WriteString(c, evil)
							close(spoke)
						}
						return true
					})
				})
				gw := gatewayTo(t, engine, up.addr)
				c, br := dialClient(t, gw.Addr)
				resp, _, err := roundTripRaw(t, c, br, tt.method, "/first")
				if err != nil || resp.StatusCode != tt.code {
					t.Fatalf("first request: %v %v, want %d", resp, err, tt.code)
				}
				if idle {
					close(speak)
					<-spoke
					if engine == "loop" {
						// The loops see a pooled connection speak when it
						// does; the goroutine engine when it takes it.
						eventually(t, "the connection to close", func() bool { return up.open.Load() == 0 })
					}
				}
				c2, br2 := dialClient(t, gw.Addr) // another client
				for i := range 3 {
					resp, body, err := roundTripRaw(t, c2, br2, "GET", "/next")
					if err != nil || resp.StatusCode != 200 || body != "ok" {
						t.Fatalf("request %d after the stray bytes: %v %q %v, want 200 \"ok\"", i, resp, body, err)
					}
				}
			})
		})
	}
}
