package gateway_test

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2CUpgrade sends a request asking to upgrade to h2c, as curl --http2
// does for http:// URLs, to each engine: the gateway answers 101, then the
// request's response on stream 1 over HTTP/2, then serves a second request
// on the same connection over HTTP/2.
func TestH2CUpgrade(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		tg := gatewayTo(t, engine, up.addr())
		fr, dec, status := upgradeH2C(t, tg.Addr, "GET /first HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
			"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
		if body := readStream(t, fr, dec, 1); *status != "200" || body != "up /first" {
			t.Errorf("upgraded request: %s %q", *status, body)
		}
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "example.test"}, {":path", "/second"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		*status = ""
		if body := readStream(t, fr, dec, 3); *status != "200" || body != "up /second" {
			t.Errorf("second request: %s %q", *status, body)
		}
	})
}

// upgradeH2C sends request, which asks to upgrade to h2c, to the gateway
// at addr, checks its 101 and starts HTTP/2 on the connection (closed when
// the test ends): it returns the connection's framer and decoder, and
// where the decoder puts each response's status.
func upgradeH2C(t *testing.T, addr, request string) (*http2.Framer, *hpack.Decoder, *string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "h2c") {
		t.Fatalf("answer to the upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	fr := http2.NewFramer(c, br)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	status := new(string)
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			*status = f.Value
		}
	})
	return fr, dec, status
}

// readStream reads frames until stream id ends, answering the server's
// settings, and returns the stream's body; its headers go to dec, the
// connection's decoder.
func readStream(t *testing.T, fr *http2.Framer, dec *hpack.Decoder, id uint32) string {
	t.Helper()
	var b strings.Builder
	for range 100 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID == id {
				if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
					t.Fatal(err)
				}
				if f.StreamEnded() {
					return b.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				b.Write(f.Data())
				if f.StreamEnded() {
					return b.String()
				}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %d: %v", f.StreamID, f.ErrCode)
		}
	}
	t.Fatalf("stream %d did not end in 100 frames", id)
	return ""
}

// TestHTTP2ClientGone cancels an HTTP/2 request (the client resets its
// stream) while the upstream holds it: the gateway cuts the attempt, and
// the upstream sees its connection go, as when an HTTP/1.1 client closes.
func TestHTTP2ClientGone(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		checkClientReset(t, func(up *upstream) *testGateway { return gatewayTo(t, engine, up.addr()) })
	})
}

// TestHTTP2Limits checks that the gateway announces server.http2's limits
// in its SETTINGS: max_concurrent_streams, the request body window
// (max_stream_buffer_bytes) and max_header_bytes as the header list size,
// on each engine's h2c hand-over.
func TestHTTP2Limits(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s, max_header_bytes: 16384, http2: {max_concurrent_streams: 7, max_stream_buffer_bytes: 131072}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		c, err := net.DialTimeout("tcp", tg.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok {
			t.Fatalf("first frame %T, want SETTINGS", f)
		}
		want := map[http2.SettingID]uint32{
			http2.SettingMaxConcurrentStreams: 7,
			http2.SettingInitialWindowSize:    131072,
		}
		for id, v := range want {
			if got, ok := sf.Value(id); !ok || got != v {
				t.Errorf("%v = %d (%v), want %d", id, got, ok, v)
			}
		}
		// net/http adds room for the HPACK overhead to max_header_bytes.
		if got, ok := sf.Value(http2.SettingMaxHeaderListSize); !ok || got < 16384 || got > 2*16384 {
			t.Errorf("%v = %d (%v), want about 16384", http2.SettingMaxHeaderListSize, got, ok)
		}
	})
}
