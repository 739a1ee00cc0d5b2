package gateway_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawH2Upstream is an h2c target that answers every request with the
// header fields fields (name, value, ...) and END_STREAM, without DATA.
func rawH2Upstream(t *testing.T, fields ...string) string {
	up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(br, pre); err != nil {
			return
		}
		fr := http2.NewFramer(c, br)
		_ = fr.WriteSettings()
		for range 100 {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				var b bytes.Buffer
				enc := hpack.NewEncoder(&b)
				for i := 0; i+1 < len(fields); i += 2 {
					_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
				}
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, EndHeaders: true, EndStream: true, BlockFragment: b.Bytes()})
			}
		}
	})
	return up.addr
}

// TestHTTP2Upstream304WithContentLength has an h2c target answer a 304
// with the Content-Length of the representation (RFC 9110 section 8.6
// allows it), and a 204 with one (which it forbids): the client gets the
// 304, or the 204, without a body, as from an HTTP/1.1 target
// (TestNoContentLengthOn304, TestNoContentLengthOn204). (The gateway read
// the length's bytes of a body that has none: a 502.)
func TestHTTP2Upstream304WithContentLength(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, code := range []string{"304", "204"} {
			addr := rawH2Upstream(t, ":status", code, "content-length", "5", "etag", `"v1"`)
			tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  h2c: {targets: ["http://%s"], protocol: h2c}
routes:
  - {name: all, upstream: h2c}
`, engine, addr))
			c, br := dialClient(t, tg.Addr)
			for i := range 2 {
				resp, body, err := roundTripRaw(t, c, br, "GET", "/same")
				if err != nil || resp.Status[:3] != code || body != "" || resp.Header.Get("ETag") != `"v1"` {
					t.Fatalf("%s, request %d: %v %q %v, want the %s", code, i, resp, body, err, code)
				}
			}
			tg.stop(t)
		}
	})
}
