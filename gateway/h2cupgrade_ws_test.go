package gateway_test

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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
		c, err := net.DialTimeout("tcp", tg.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		_, err = c.Write([]byte("GET /first HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
			"Upgrade: h2c, websocket\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answer to the upgrade: %d %v", resp.StatusCode, resp.Header)
		}
		fr := http2.NewFramer(c, br)
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		var status string
		dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
			if f.Name == ":status" {
				status = f.Value
			}
		})
		if body := readStream(t, fr, dec, 1); status != "200" || body != "up /first" {
			t.Errorf("upgraded request: %s %q", status, body)
		}
		if r := up.lastRequest(); r == nil || r.Header.Get("Upgrade") != "" {
			t.Errorf("the upstream's request: %v", r)
		}
	})
}
