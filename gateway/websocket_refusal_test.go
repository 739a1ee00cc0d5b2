package gateway_test

import (
	"bufio"
	"net"
	"net/http"
	"testing"
)

// refusingTarget answers every WebSocket handshake with a 403 whose body
// has no length and never ends: it sends a part and waits for the gateway
// to close the connection.
func refusingTarget(t *testing.T) string {
	up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\r\nno sock"))
		_, _ = br.ReadByte() // until the gateway closes the connection
	})
	return up.addr
}

// refusalConfig is a gateway to addr whose upstream bounds a handshake's
// answer by response_header_timeout.
const refusalConfig = `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"], response_header_timeout: 200ms}
routes:
  - {name: ws, upstream: up}
`

// TestWebSocketRefusalBodyBounded has a target refuse a WebSocket
// handshake with a body that has no length and never ends: the client
// gets a 502 once the upstream's response_header_timeout passes. (The
// gateway read the body with no time bound: the client waited as long as
// the target kept its connection.)
func TestWebSocketRefusalBodyBounded(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, refusalConfig, engine, refusingTarget(t)))
		res := exchangeRaw(t, gw.Addr, "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 1)
		if res[0].Code != http.StatusBadGateway {
			t.Errorf("a refusal whose body never ends: %d, want 502", res[0].Code)
		}
	})
}

// TestWebSocketOverHTTP2RefusalBodyBounded is
// TestWebSocketRefusalBodyBounded with the handshake over HTTP/2.
func TestWebSocketOverHTTP2RefusalBodyBounded(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, refusalConfig, engine, refusingTarget(t)))
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test",
			":path", "/ws", "sec-websocket-version", "13")
		if st, body := h.read(t, 1); st != "502" {
			t.Errorf("a refusal whose body never ends: %s %q, want 502", st, body)
		}
	})
}

// oddRefusalTarget answers every WebSocket handshake with a status past
// 599.
func oddRefusalTarget(t *testing.T) string {
	up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nno"))
	})
	return up.addr
}

// TestWebSocketRefusalBadStatus has a target refuse a WebSocket handshake
// with a status past 599: the client gets a 502, as for any answer with
// such a status (TestBadStatusCode). (The status went out as it came.)
func TestWebSocketRefusalBadStatus(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, refusalConfig, engine, oddRefusalTarget(t)))
		res := exchangeRaw(t, gw.Addr, "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 1)
		if res[0].Code != http.StatusBadGateway {
			t.Errorf("%d, want 502", res[0].Code)
		}
	})
}

// TestWebSocketOverHTTP2RefusalBadStatus is TestWebSocketRefusalBadStatus
// with the handshake over HTTP/2.
func TestWebSocketOverHTTP2RefusalBadStatus(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, refusalConfig, engine, oddRefusalTarget(t)))
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test",
			":path", "/ws", "sec-websocket-version", "13")
		if st, body := h.read(t, 1); st != "502" {
			t.Errorf("%s %q, want 502", st, body)
		}
	})
}
