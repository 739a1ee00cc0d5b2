package gateway_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestFasthttpRefusalLingers sends requests that fasthttp refuses before
// the gateway's handler sees them (a head over server.max_header_bytes:
// 431; a Content-Length that is no number: 400), each followed by a body
// far larger than the socket buffers, the whole request before reading:
// the client still gets the answer (JSON, Connection: close), not a
// reset, as the gateway reads and drops what comes for a while before it
// closes (as its own 400 and 413 do), on both engines.
func TestFasthttpRefusalLingers(t *testing.T) {
	const big = 8 << 20
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_header_bytes: 4096}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		for _, tc := range []struct {
			name, head, reason string
			code               int
		}{
			{"oversized head", fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Long: %s\r\nContent-Length: %d\r\n\r\n", strings.Repeat("l", 8000), big), "header_too_large", 431},
			{"bad length", fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %dx\r\n\r\n", big), "bad_request", 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, br := dialClient(t, gw.Addr)
				if _, err := io.WriteString(c, tc.head); err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(c, io.LimitReader(newPattern(1, big), big)); err != nil {
					t.Fatalf("sending the body: %v (the gateway cut the connection before the client read its answer)", err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.reason) {
					t.Fatalf("answer %d %q, want %d %s", resp.StatusCode, b, tc.code, tc.reason)
				}
				if !resp.Close {
					t.Errorf("the %d has no Connection: close", tc.code)
				}
				_ = c.SetReadDeadline(time.Now().Add(waitLimit))
				if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
					t.Errorf("after the answer: %v, want the connection closed", err)
				}
			})
		}
	})
}

// TestFasthttpRefusalLingersOverTLS: over the TLS listener's HTTP/1.1
// too, a head over server.max_header_bytes sent with a large body before
// the client reads gets its 431, and the connection then ends.
func TestFasthttpRefusalLingersOverTLS(t *testing.T) {
	const big = 4 << 20
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_header_bytes: 4096}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), up.URL))
		checkRefusedOverTLS(t, gw, ca, "X-Long: "+strings.Repeat("l", 8000)+"\r\n", big, 431)
	})
}
