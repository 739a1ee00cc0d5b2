package gateway_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
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

// badNameTarget answers every WebSocket handshake with head, whose fields
// include one named "X A" (no token).
func badNameTarget(t *testing.T, head string) string {
	up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = c.Write([]byte(head))
		_, _ = br.ReadByte() // until the gateway closes the connection
	})
	return up.addr
}

// TestWebSocketBadFieldName has a target accept, or refuse, a WebSocket
// handshake with a field name that is not a token: the client gets a
// 502, as for any answer with one (TestBadFieldName). (net/http's reader
// takes "X A" as a name, and the 101 or the refusal went out with it.)
func TestWebSocketBadFieldName(t *testing.T) {
	for name, head := range map[string]string{
		"101": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nX A: b\r\n\r\n",
		"403": "HTTP/1.1 403 Forbidden\r\nX A: b\r\nContent-Length: 2\r\n\r\nno",
	} {
		t.Run(name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				gw := startGateway(t, parseConfig(t, refusalConfig, engine, badNameTarget(t, head)))
				conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(waitLimit))
				_, _ = conn.Write([]byte("GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
					"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("%d %v, want 502", resp.StatusCode, resp.Header)
				}
			})
		})
	}
}

// TestWebSocketOverHTTP2BadFieldName is TestWebSocketBadFieldName with
// the handshake over HTTP/2.
func TestWebSocketOverHTTP2BadFieldName(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: %s\r\nX A: b\r\n\r\n"
	forEngines(t, func(t *testing.T, engine string) {
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, head, wsAcceptFor(req.Header.Get("Sec-WebSocket-Key")))
			_, _ = br.ReadByte()
		})
		gw := startGateway(t, parseConfig(t, refusalConfig, engine, up.addr))
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test",
			":path", "/ws", "sec-websocket-version", "13")
		if st, body := h.read(t, 1); st != "502" {
			t.Errorf("%s %q, want 502", st, body)
		}
	})
}

// wsAcceptFor is the Sec-WebSocket-Accept that answers key (RFC 6455
// section 4.2.2).
func wsAcceptFor(key string) string {
	s := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(s[:])
}
