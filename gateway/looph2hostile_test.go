//go:build linux

package gateway_test

import (
	"errors"
	"net/http"
	"os"
	"testing"

	"golang.org/x/net/http2"
)

// TestH2LoopsPseudoHeaderInjection sends requests whose pseudo-header
// fields hold bytes an HTTP/1.1 request line or Host field cannot (CR, LF,
// NUL, spaces in :path or :method): each stream is reset as malformed
// (RFC 9113 sections 8.2.1 and 8.3.1), but for a space in :path or
// :method, answered 400 as net/http's HTTP/2 path answers it, and nothing
// reaches the upstream, which would otherwise read the bytes as fields of
// their own.
func TestH2LoopsPseudoHeaderInjection(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Smuggled") != "" {
			t.Errorf("the upstream read a smuggled field: %s %s %v", r.Method, r.URL, r.Header)
		}
	})
	tg := h2LoopsGateway(t, up, "")
	cl := h2Dial(t, tg.Addr)
	id := uint32(1)
	for name, fields := range map[string][]string{
		"path CRLF":      {":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a HTTP/1.1\r\nX-Smuggled: 1\r\nX-Pad: x"},
		"path LF":        {":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a HTTP/1.1\nX-Smuggled: 1\nX-Pad: x"},
		"path space":     {":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a /b"},
		"path NUL":       {":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a\x00b"},
		"authority CRLF": {":method", "GET", ":scheme", "http", ":authority", "a.test\r\nX-Smuggled: 1", ":path", "/a"},
		"method CRLF":    {":method", "GET /a HTTP/1.1\r\nX-Smuggled: 1\r\nX-Pad:", ":scheme", "http", ":authority", "a.test", ":path", "/a"},
		"method space":   {":method", "GET /b", ":scheme", "http", ":authority", "a.test", ":path", "/a"},
		"scheme CRLF":    {":method", "GET", ":scheme", "http\r\nX-Smuggled: 1", ":authority", "a.test", ":path", "/a"},
	} {
		if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Headers(fields...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		status, body, code, ok := h2Answer(t, cl, id)
		if name == "path space" || name == "method space" {
			// No request line holds it, but RFC 9113 leaves a space in
			// :path to the server, and allows an answer to a malformed
			// request (a :method that is no token): 400, as on net/http's
			// HTTP/2 server.
			if !ok || status != "400" {
				t.Errorf("%s: answered %q %q (reset %v), want 400", name, status, body, code)
			}
		} else if ok || code != http2.ErrCodeProtocol {
			t.Errorf("%s: answered %q %q (reset %v), want a reset PROTOCOL_ERROR", name, status, body, code)
		}
		id += 2
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the upstream served %d of the malformed requests", n)
	}
}

// TestH2LoopsReadTimeout opens streams whose requests never arrive whole
// (a body cut short, a header block never ended): server.read_timeout
// bounds them as it bounds an HTTP/1.1 request's, so a client cannot hold
// a connection, its streams and their bodies forever by going quiet.
func TestH2LoopsReadTimeout(t *testing.T) {
	up := startUpstream(t, "up", nil)
	tg := serverGateway(t, "loop", "http2: {loops: true}, read_timeout: 200ms", up.URL)
	cl := h2Dial(t, tg.Addr)
	post := h2Headers(":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/a", "content-length", "10")
	if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: post, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WriteData(1, false, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, code, ok := h2Answer(t, cl, 1); ok || code != http2.ErrCodeCancel {
		t.Fatalf("the stream whose body stopped: answered %v, reset %v, want a reset CANCEL", ok, code)
	}
	// A header block left without its last CONTINUATION: the connection
	// can read nothing else, and ends.
	cl = h2Dial(t, tg.Addr)
	get := h2Headers(":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a")
	if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: get[:2], EndStream: true}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		f, err := cl.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended without GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode == http2.ErrCodeNo {
				t.Fatalf("GOAWAY %v after a header block left open", g.ErrCode)
			}
			return
		}
	}
	t.Fatal("no GOAWAY in 100 frames")
}

// TestH2LoopsWriteTimeout answers a client that opens no window
// (SETTINGS_INITIAL_WINDOW_SIZE 0) and goes quiet: the answer that flow
// control holds back waits server.write_timeout, as an HTTP/1.1 answer
// the client does not read, and the connection then ends, instead of
// holding the answer and the stream forever.
func TestH2LoopsWriteTimeout(t *testing.T) {
	up := startUpstream(t, "up", nil)
	tg := serverGateway(t, "loop", "http2: {loops: true}, write_timeout: 200ms", up.URL)
	cl := h2Dial(t, tg.Addr)
	if err := cl.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	get := h2Headers(":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a")
	if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: get, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		f, err := cl.ReadFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection still holds the answer its client gave no window for")
			}
			return // closed
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			return
		}
	}
	t.Fatal("the connection did not end in 100 frames")
}
