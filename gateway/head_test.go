//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// crlf turns the line feeds of a test message into CRLF.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

func TestParseRequest(t *testing.T) {
	b := crlf("POST /v1/infer?model=a%20b HTTP/1.1\nHost: api.example\nContent-Length: 5\n" +
		"Connection: keep-alive, close\nX-Forwarded-For:  10.0.0.1 \nX-Api-Key: k1\nIdempotency-Key: 7\n\n")
	var h reqHead
	if !parseRequest(b, &h) {
		t.Fatal("plain request refused")
	}
	for _, c := range []struct{ name, got, want string }{
		{"method", string(h.method), "POST"},
		{"uri", string(h.uri), "/v1/infer?model=a%20b"},
		{"path", string(h.path), "/v1/infer"},
		{"host", string(h.host), "api.example"},
		{"xff", string(h.xff), "10.0.0.1"},
		{"Peek", string(h.Peek("x-api-key")), "k1"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if h.cl != 5 || !h.close() || !h.replayable() || h.Peek("Missing") != nil {
		t.Errorf("cl %d, close %v, replayable %v, Peek(Missing) %q", h.cl, h.close(), h.replayable(), h.Peek("Missing"))
	}

	if !parseRequest(crlf("GET / HTTP/1.1\nHost: a\n\n"), &h) || h.cl != 0 || h.close() || !h.replayable() {
		t.Errorf("minimal GET: cl %d, close %v", h.cl, h.close())
	}
	for _, host := range []string{"a:80", "127.0.0.1:8080", "[::1]:8080", "[::1]", "my_host.example"} {
		if !parseRequest(crlf("GET / HTTP/1.1\nHost: "+host+"\n\n"), &h) {
			t.Errorf("Host %s refused", host)
		}
	}
}

// TestParseRequestRefuses lists what the loops leave to the goroutine
// engine: anything whose meaning needs more than the plain form.
func TestParseRequestRefuses(t *testing.T) {
	for name, head := range map[string]string{
		"HTTP/1.0":            "GET / HTTP/1.0\nHost: a\n\n",
		"no Host":             "GET / HTTP/1.1\nX: y\n\n",
		"empty Host":          "GET / HTTP/1.1\nHost:\nHost: b\n\n",
		"two Hosts":           "GET / HTTP/1.1\nHost: a\nHost: b\n\n",
		"absolute form":       "GET http://a/ HTTP/1.1\nHost: a\n\n",
		"asterisk":            "OPTIONS * HTTP/1.1\nHost: a\n\n",
		"percent in path":     "GET /%65xpensive HTTP/1.1\nHost: a\n\n",
		"dot segment":         "GET /x/../expensive HTTP/1.1\nHost: a\n\n",
		"dot":                 "GET /./x HTTP/1.1\nHost: a\n\n",
		"trailing dot-dot":    "GET /x/.. HTTP/1.1\nHost: a\n\n",
		"double slash":        "GET //x HTTP/1.1\nHost: a\n\n",
		"backslash":           "GET /x\\..\\y HTTP/1.1\nHost: a\n\n",
		"fragment":            "GET /x#y HTTP/1.1\nHost: a\n\n",
		"lower-case method":   "get / HTTP/1.1\nHost: a\n\n",
		"chunked":             "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n",
		"two lengths":         "POST / HTTP/1.1\nHost: a\nContent-Length: 1\nContent-Length: 1\n\n",
		"signed length":       "POST / HTTP/1.1\nHost: a\nContent-Length: +1\n\n",
		"empty length":        "POST / HTTP/1.1\nHost: a\nContent-Length:\n\n",
		"huge length":         "POST / HTTP/1.1\nHost: a\nContent-Length: 1234567890\n\n",
		"Expect":              "POST / HTTP/1.1\nHost: a\nExpect: 100-continue\n\n",
		"Upgrade":             "GET / HTTP/1.1\nHost: a\nUpgrade: websocket\n\n",
		"two Connections":     "GET / HTTP/1.1\nHost: a\nConnection: close\nConnection: x\n\n",
		"two X-Forwarded-For": "GET / HTTP/1.1\nHost: a\nX-Forwarded-For: 1.1.1.1\nX-Forwarded-For: 2.2.2.2\n\n",
		"folded line":         "GET / HTTP/1.1\nHost: a\nX: y\n  z\n\n",
		"space before colon":  "GET / HTTP/1.1\nHost : a\n\n",
		"no colon":            "GET / HTTP/1.1\nHost: a\nX\n\n",
		"NUL in value":        "GET / HTTP/1.1\nHost: a\nX: \x00\n\n",
		"Host with #":         "GET / HTTP/1.1\nHost: a#b\n\n",
		"Host without name":   "GET / HTTP/1.1\nHost: :80\n\n",
		"Host with bad port":  "GET / HTTP/1.1\nHost: a:x\n\n",
		"bad IPv6 Host":       "GET / HTTP/1.1\nHost: [zz]\n\n",
	} {
		var h reqHead
		if parseRequest(crlf(head), &h) {
			t.Errorf("%s: taken as plain", name)
		}
	}
	var h reqHead
	for name, head := range map[string]string{
		"bare CR in value": "GET / HTTP/1.1\r\nHost: a\r\nX: y\rz\r\n\r\n",
		"bare LF":          "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
	} {
		if parseRequest([]byte(head), &h) {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

func TestAppendRequest(t *testing.T) {
	b := crlf("POST /v1/x?q=1 HTTP/1.1\nHost: api.example\nContent-Length: 2\nConnection: keep-alive, X-Secret\n" +
		"X-Secret: s\nKeep-Alive: timeout=5\nTE: trailers\nProxy-Authorization: p\nX-Forwarded-For: 10.0.0.1\n" +
		"X-Forwarded-Host: forged\nx-forwarded-proto: https\nAccept: */*\n\n")
	var h reqHead
	if !parseRequest(b, &h) {
		t.Fatal("refused")
	}
	got := string(appendRequest(nil, &h, []byte("10.0.0.1, 127.0.0.1"), false, "127.0.0.1:9001", []byte("hi"), nil))
	want := string(crlf("POST /v1/x?q=1 HTTP/1.1\nHost: 127.0.0.1:9001\nContent-Length: 2\nAccept: */*\n" +
		"X-Forwarded-For: 10.0.0.1, 127.0.0.1\nX-Forwarded-Host: api.example\nX-Forwarded-Proto: http\n\nhi"))
	if got != want {
		t.Errorf("upstream request:\n%q\nwant\n%q", got, want)
	}
}

func TestParseAndAppendResponse(t *testing.T) {
	b := crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 3\nConnection: keep-alive, X-Hop\n" +
		"X-Hop: 1\nKeep-Alive: timeout=5\nRateLimit: forged\nServer: up\nDate: Mon, 01 Jan 2024 00:00:00 GMT\n\n")
	var h respHead
	if !parseResponse(b, &h) {
		t.Fatal("refused")
	}
	if h.code != 200 || h.cl != 3 || h.close() {
		t.Errorf("code %d, cl %d, close %v", h.code, h.cl, h.close())
	}
	now := time.Date(2026, 12, 1, 16, 1, 20, 0, time.UTC)
	got := string(appendResponse(nil, &h, []byte(`"r";q=5;w=1`), []byte(`"r";r=4;t=1`), true, []byte("abc"), now, nil))
	want := string(crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 3\nServer: up\n" +
		"Date: Tue, 01 Dec 2026 16:01:20 GMT\n" +
		"RateLimit-Policy: \"r\";q=5;w=1\nRateLimit: \"r\";r=4;t=1\nConnection: close\n\nabc"))
	if got != want {
		t.Errorf("client response:\n%q\nwant\n%q", got, want)
	}
	// Without a rate-limit decision the target's own headers pass.
	if got := string(appendResponse(nil, &h, nil, nil, false, nil, now, nil)); !strings.Contains(got, "RateLimit: forged\r\n") {
		t.Errorf("target's RateLimit dropped without a decision: %q", got)
	}

	if !parseResponse(crlf("HTTP/1.1 204\n\n"), &h) || h.code != 204 || h.cl != -1 {
		t.Errorf("204 without reason: ok, code %d, cl %d", h.code, h.cl)
	}
	for name, head := range map[string]string{
		"HTTP/1.0":      "HTTP/1.0 200 OK\nContent-Length: 0\n\n",
		"interim":       "HTTP/1.1 100 Continue\n\n",
		"chunked":       "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n",
		"two lengths":   "HTTP/1.1 200 OK\nContent-Length: 1\nContent-Length: 2\n\n",
		"short code":    "HTTP/1.1 20 OK\n\n",
		"no space":      "HTTP/1.1 200OK\n\n",
		"folded header": "HTTP/1.1 200 OK\nX: a\n b\n\n",
	} {
		if parseResponse(crlf(head), &h) {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

// FuzzParseRequest checks that a request the loops take as plain means to
// them what it means to fasthttp, which parses it on the goroutine engine
// and for the targets' side of the routing tests: the same method, target,
// path for routing, Host, length, and wish to close.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\nHost: a\n\n",
		"POST /v1/infer?x=%41 HTTP/1.1\nHost: a:80\nContent-Length: 12\nConnection: close\n\n",
		"GET /a/b/ HTTP/1.1\nhost: a\nX-Forwarded-For: 1.2.3.4\ncontent-length: 0\n\n",
		"PUT /.well-known/x HTTP/1.1\nHost: a\nConnection: Keep-Alive\n\n",
		"GET /a/../b HTTP/1.1\nHost: a\n\n",
	} {
		f.Add(crlf(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h reqHead
		var req fasthttp.Request
		if b = plainHead(t, b, func(b []byte) bool { return parseRequest(b, &h) }, req.Header.Read); b == nil {
			return
		}
		fh := &req.Header
		cl := fh.ContentLength()
		if cl == -2 {
			cl = 0
		}
		if string(fh.Method()) != string(h.method) || string(fh.RequestURI()) != string(h.uri) ||
			string(req.URI().Path()) != string(h.path) || string(fh.Host()) != string(h.host) ||
			cl != h.cl || fh.ConnectionClose() != h.close() ||
			string(fh.Peek("X-Forwarded-For")) != string(h.xff) {
			t.Fatalf("%q: fasthttp reads %s %s (path %s) host %q cl %d close %v xff %q; the loops %s %s (path %s) host %q cl %d close %v xff %q",
				b, fh.Method(), fh.RequestURI(), req.URI().Path(), fh.Host(), cl, fh.ConnectionClose(), fh.Peek("X-Forwarded-For"),
				h.method, h.uri, h.path, h.host, h.cl, h.close(), h.xff)
		}
		// What the loops serve, the goroutine engine would not refuse:
		// both engines answer a request alike.
		if code := refusedHead(fh.Method(), fh.RequestURI(), fh.Protocol(), fh.RawHeaders()); code != 0 {
			t.Fatalf("%q: the loops serve it, the goroutine engine refuses it with %d", b, code)
		}
	})
}

// FuzzParseResponse checks the same for the responses the loops forward
// themselves: status, length, and whether the target closes.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\nContent-Length: 5\n\n",
		"HTTP/1.1 404 Not Found\nConnection: close\nContent-Length: 0\n\n",
		"HTTP/1.1 304\nConnection: keep-alive\n\n",
	} {
		f.Add(crlf(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h respHead
		var resp fasthttp.Response
		if b = plainHead(t, b, func(b []byte) bool { return parseResponse(b, &h) }, resp.Header.Read); b == nil {
			return
		}
		if h.cl < 0 && h.code != fasthttp.StatusNoContent && h.code != fasthttp.StatusNotModified {
			return // a body up to the connection's end: the loops leave it to fasthttp
		}
		cl := resp.Header.ContentLength()
		if h.cl >= 0 && cl != h.cl || resp.StatusCode() != h.code || resp.Header.ConnectionClose() != h.close() {
			t.Fatalf("%q: fasthttp reads %d cl %d close %v; the loops %d cl %d close %v",
				b, resp.StatusCode(), cl, resp.Header.ConnectionClose(), h.code, h.cl, h.close())
		}
	})
}

// plainHead returns the head that b starts with when parse takes it as
// plain, after checking that fasthttp's read accepts it too; nil when b
// has no head or parse refuses it.
func plainHead(t *testing.T, b []byte, parse func([]byte) bool, read func(*bufio.Reader) error) []byte {
	end := bytes.Index(b, crlf2)
	if end < 0 || !parse(b[:end+4]) {
		return nil
	}
	b = b[:end+4]
	if err := read(bufio.NewReader(bytes.NewReader(b))); err != nil {
		t.Fatalf("plain to the loops, refused by fasthttp (%v): %q", err, b)
	}
	return b
}

// BenchmarkParseRequest reads a browser-like request head the loops' way
// and, for comparison, fasthttp's.
func BenchmarkParseRequest(b *testing.B) {
	head := crlf("GET /v1/models/llama/infer?stream=false HTTP/1.1\nHost: api.example.com\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36\nAccept: application/json\n" +
		"Accept-Encoding: gzip, deflate, br\nAccept-Language: en-US,en;q=0.9\nX-Api-Key: 3f2a9c\n" +
		"Cookie: session=abc123; theme=dark\nConnection: keep-alive\n\n")
	b.Run("loops", func(b *testing.B) {
		var h reqHead
		for b.Loop() {
			if !parseRequest(head, &h) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("fasthttp", func(b *testing.B) {
		var req fasthttp.Request
		var rd bytes.Reader
		br := bufio.NewReader(&rd)
		for b.Loop() {
			rd.Reset(head)
			br.Reset(&rd)
			if err := req.Header.Read(br); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestHasCtl checks the eight-bytes-at-a-time test against the plain one:
// every byte value at every place of a value, beside printable bytes and
// obs-text.
func TestHasCtl(t *testing.T) {
	base := []byte("abc\x80\xffdefghij\xfeklmnopq")
	for i := range base {
		for c := range 256 {
			v := bytes.Clone(base)
			v[i] = byte(c)
			want := c < 0x20 && c != '\t' || c == 0x7f
			if got := hasCtl(v); got != want {
				t.Fatalf("byte %#x at %d: hasCtl %v, want %v", c, i, got, want)
			}
		}
	}
}
