package gateway_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/internal/testpki"
)

// Hostile input on WebSocket handshakes: what a client can make the
// upstream receive, past the route's rules.

// TestWebSocketHandshakeWithBody sends a WebSocket handshake that has a
// body, on the plaintext listener and over TLS: it is no handshake (a
// request with a body is not upgraded, as for h2c), but a GET whose body
// reaches the upstream as declared, without Upgrade. (The gateway read
// the body and sent the upstream a handshake declaring it, without it:
// the upstream took the tunnel's first bytes for the body.)
func TestWebSocketHandshakeWithBody(t *testing.T) {
	const handshake = "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 5\r\n\r\nHELLO"
	forH2Engines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		u := startWireUpstream(t, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["http://%s"], response_header_timeout: 5s}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), u.addr))
		tlsAddr := serveTLS(t, tg)
		plain, _ := dialClient(t, tg.Addr)
		tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		for _, c := range []net.Conn{plain, tc} {
			_ = c.SetDeadline(time.Now().Add(waitLimit))
			if _, err := io.WriteString(c, handshake); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("answer to a handshake with a body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("a handshake with a body: %d, want the upstream's 200", resp.StatusCode)
			}
		}
		seen := u.requests()
		if len(seen) != 2 {
			t.Fatalf("the upstream saw %d requests, want 2", len(seen))
		}
		for _, r := range seen {
			if r.Body != "HELLO" || r.Header.Get("Upgrade") != "" {
				t.Errorf("the upstream saw body %q and Upgrade %q, want the body and no upgrade", r.Body, r.Header.Get("Upgrade"))
			}
		}
	})
}

// TestWebSocketHandshakeOriginForm sends WebSocket handshakes whose
// request target is in absolute form, on the plaintext listener and over
// TLS: the upstream gets the origin form (path and query), as for any
// other request. (It got the absolute form, whose host a server must
// prefer to Host, RFC 9112 section 3.2.2. One naming another host than
// Host is refused: TestAbsoluteFormNamesHost.)
func TestWebSocketHandshakeOriginForm(t *testing.T) {
	const handshake = "GET http://a.test/ws?q=1 HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, func(int, seenRequest) string {
			return "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
		})
		tg, ca := caGateway(t, engine, "http://"+u.addr)
		tlsAddr := serveTLS(t, tg)
		exchangeRaw(t, tg.Addr, handshake, 1)
		tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(tc, handshake); err != nil {
			t.Fatal(err)
		}
		if _, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil {
			t.Fatal(err)
		}
		seen := u.requests()
		if len(seen) != 2 {
			t.Fatalf("the upstream saw %d handshakes, want 2", len(seen))
		}
		for _, r := range seen {
			if r.Target != "/ws?q=1" {
				t.Errorf("the upstream saw the handshake's target %q, want /ws?q=1", r.Target)
			}
		}
	})
}

// TestWebSocketRefusedLeavesNoTunnel is WebSocket smuggling: a client
// sends a handshake the upstream refuses (403), then, on the same
// connection, a request its routes refuse, as if the connection had been
// tunnelled. The gateway carries nothing after a refusal: the second
// request is its own to route (404), on the plaintext listener and over
// TLS, and the upstream never sees it.
func TestWebSocketRefusedLeavesNoTunnel(t *testing.T) {
	const handshake = "GET /public/ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	const smuggled = "GET /admin HTTP/1.1\r\nHost: a.test\r\n\r\n"
	forH2Engines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		u := startWireUpstream(t, func(int, seenRequest) string {
			return "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
		})
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: public, upstream: up, match: {path_prefix: /public/}}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), u.addr))
		tlsAddr := serveTLS(t, tg)
		plain, _ := dialClient(t, tg.Addr)
		tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		for _, c := range []net.Conn{plain, tc} {
			_ = c.SetDeadline(time.Now().Add(waitLimit))
			if _, err := io.WriteString(c, handshake+smuggled); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			for i, want := range []int{http.StatusForbidden, http.StatusNotFound} {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer %d: %v", i+1, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("answer %d: %d, want %d", i+1, resp.StatusCode, want)
				}
			}
		}
		for _, r := range u.requests() {
			if r.Target != "/public/ws" {
				t.Errorf("the upstream saw %s", r.Target)
			}
		}
	})
}

// TestWebSocketWithoutResponseHeaderTimeout opens a WebSocket through an
// upstream whose response_header_timeout is 0s (no bound, as for other
// requests): the handshake passes and messages flow. (Its deadline was
// then the handshake's start: every handshake failed with a 502.)
func TestWebSocketWithoutResponseHeaderTimeout(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], response_header_timeout: 0s}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
		c, resp, err := dialWS(t, gw.URL+"/a")
		if err != nil {
			t.Fatalf("dial: %v %+v", err, resp)
		}
		echo(t, c, websocket.MessageText, []byte("hello"))
		c.Close(websocket.StatusNormalClosure, "")
	})
}
