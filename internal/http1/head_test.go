package http1

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestParseRequest(t *testing.T) {
	b := crlf("POST /v1/infer?model=a%20b HTTP/1.1\nHost: api.example\nContent-Length: 5\n" +
		"Connection: keep-alive, close\nX-Forwarded-For:  10.0.0.1 \nX-Api-Key: k1\nIdempotency-Key: 7\n\n")
	var h Request
	if !ParseRequest(b, &h) {
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
	if h.cl != 5 || !h.Close() || !h.Replayable() || h.Peek("Missing") != nil {
		t.Errorf("cl %d, close %v, replayable %v, Peek(Missing) %q", h.cl, h.Close(), h.Replayable(), h.Peek("Missing"))
	}

	if !ParseRequest(crlf("GET / HTTP/1.1\nHost: a\n\n"), &h) || h.cl != 0 || h.Close() || !h.Replayable() {
		t.Errorf("minimal GET: cl %d, close %v", h.cl, h.Close())
	}
	for _, host := range []string{"a:80", "127.0.0.1:8080", "[::1]:8080", "[::1]", "my_host.example"} {
		if !ParseRequest(crlf("GET / HTTP/1.1\nHost: "+host+"\n\n"), &h) {
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
		"stray % in query":    "GET /?a=%zz HTTP/1.1\nHost: a\n\n",
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
		var h Request
		if ParseRequest(crlf(head), &h) {
			t.Errorf("%s: taken as plain", name)
		}
	}
	var h Request
	for name, head := range map[string]string{
		"bare CR in value": "GET / HTTP/1.1\r\nHost: a\r\nX: y\rz\r\n\r\n",
		"bare LF":          "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
	} {
		if ParseRequest([]byte(head), &h) {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

func TestAppendRequest(t *testing.T) {
	b := crlf("POST /v1/x?q=1 HTTP/1.1\nHost: api.example\nContent-Length: 2\nConnection: keep-alive, X-Secret\n" +
		"X-Secret: s\nKeep-Alive: timeout=5\nTE: trailers\nProxy-Authorization: p\nX-Forwarded-For: 10.0.0.1\n" +
		"X-Forwarded-Host: forged\nx-forwarded-proto: https\nAccept: */*\n\n")
	var h Request
	if !ParseRequest(b, &h) {
		t.Fatal("refused")
	}
	got := string(AppendRequest(nil, &h, &Forward{Addr: "127.0.0.1:9001", XFF: []byte("10.0.0.1, 127.0.0.1"), ID: []byte("id-1")}, []byte("hi")))
	want := string(crlf("POST /v1/x?q=1 HTTP/1.1\nHost: 127.0.0.1:9001\nContent-Length: 2\nAccept: */*\n" +
		"X-Forwarded-For: 10.0.0.1, 127.0.0.1\nX-Forwarded-Host: api.example\nX-Forwarded-Proto: http\nX-Request-Id: id-1\n\nhi"))
	if got != want {
		t.Errorf("upstream request:\n%q\nwant\n%q", got, want)
	}
}

// TestAppendRequestContext checks that the client's X-Request-Id gives way
// to the gateway's, and its trace context too when the gateway traces
// (and only then).
func TestAppendRequestContext(t *testing.T) {
	b := crlf("GET / HTTP/1.1\nHost: a:1\nx-request-id: client\ntraceparent: 00-client-01\nTracestate: v=1\n\n")
	var h Request
	if !ParseRequest(b, &h) || string(h.requestID) != "client" {
		t.Fatalf("refused, or X-Request-Id %q", h.requestID)
	}
	const forwarded = "X-Forwarded-For: 127.0.0.1\nX-Forwarded-Host: a:1\nX-Forwarded-Proto: http\n"
	for _, tt := range []struct{ tp, ts, want string }{
		{"", "", "GET / HTTP/1.1\nHost: u:2\ntraceparent: 00-client-01\nTracestate: v=1\n" + forwarded + "X-Request-Id: id-1\n\n"},
		{"00-gw-01", "", "GET / HTTP/1.1\nHost: u:2\n" + forwarded + "X-Request-Id: id-1\nTraceparent: 00-gw-01\n\n"},
		{"00-gw-01", "v=2", "GET / HTTP/1.1\nHost: u:2\n" + forwarded + "X-Request-Id: id-1\nTraceparent: 00-gw-01\nTracestate: v=2\n\n"},
	} {
		var tp []byte
		if tt.tp != "" {
			tp = []byte(tt.tp)
		}
		got := string(AppendRequest(nil, &h, &Forward{Addr: "u:2", XFF: []byte("127.0.0.1"), ID: []byte("id-1"), Traceparent: tp, Tracestate: tt.ts}, nil))
		if want := string(crlf(tt.want)); got != want {
			t.Errorf("traceparent %q tracestate %q: upstream request\n%q\nwant\n%q", tt.tp, tt.ts, got, want)
		}
	}
	if ParseRequest(crlf("GET / HTTP/1.1\nHost: a:1\nX-Request-Id: 1\nX-Request-Id: 2\n\n"), &h) {
		t.Error("two X-Request-Id taken as plain, want the request handed to the goroutine engine")
	}
}

func TestParseAndAppendResponse(t *testing.T) {
	b := crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 3\nConnection: keep-alive, X-Hop\n" +
		"X-Hop: 1\nKeep-Alive: timeout=5\nRateLimit: forged\nServer: up\nDate: Mon, 01 Jan 2024 00:00:00 GMT\n\n")
	var h Response
	if !ParseResponse(b, &h) {
		t.Fatal("refused")
	}
	if h.code != 200 || h.cl != 3 || h.Close() {
		t.Errorf("code %d, cl %d, close %v", h.code, h.cl, h.Close())
	}
	date := []byte("Date: Tue, 01 Dec 2026 16:01:20 GMT\r\n")
	got := string(AppendResponse(nil, &h, &Deliver{Date: date, Policy: []byte(`"r";q=5;w=1`), RateLimit: []byte(`"r";r=4;t=1`), Closing: true}, []byte("abc")))
	want := string(crlf("HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 3\nServer: up\n" +
		"Date: Tue, 01 Dec 2026 16:01:20 GMT\n" +
		"RateLimit-Policy: \"r\";q=5;w=1\nRateLimit: \"r\";r=4;t=1\nConnection: close\n\nabc"))
	if got != want {
		t.Errorf("client response:\n%q\nwant\n%q", got, want)
	}
	// Without a rate-limit decision the target's own headers pass.
	if got := string(AppendResponse(nil, &h, &Deliver{Date: date}, nil)); !strings.Contains(got, "RateLimit: forged\r\n") {
		t.Errorf("target's RateLimit dropped without a decision: %q", got)
	}

	if !ParseResponse(crlf("HTTP/1.1 204\n\n"), &h) || h.code != 204 || h.cl != -1 {
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
		"204 length":    "HTTP/1.1 204 No Content\nContent-Length: 5\n\n",
	} {
		if ParseResponse(crlf(head), &h) {
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
		var h Request
		var req fasthttp.Request
		if b = plainHead(t, b, func(b []byte) bool { return ParseRequest(b, &h) }, req.Header.Read); b == nil {
			return
		}
		fh := &req.Header
		cl := fh.ContentLength()
		if cl == -2 {
			cl = 0
		}
		if string(fh.Method()) != string(h.method) || string(fh.RequestURI()) != string(h.uri) ||
			string(req.URI().Path()) != string(h.path) || string(fh.Host()) != string(h.host) ||
			cl != h.cl || fh.ConnectionClose() != h.Close() ||
			string(fh.Peek("X-Forwarded-For")) != string(h.xff) {
			t.Fatalf("%q: fasthttp reads %s %s (path %s) host %q cl %d close %v xff %q; the loops %s %s (path %s) host %q cl %d close %v xff %q",
				b, fh.Method(), fh.RequestURI(), req.URI().Path(), fh.Host(), cl, fh.ConnectionClose(), fh.Peek("X-Forwarded-For"),
				h.method, h.uri, h.path, h.host, h.cl, h.Close(), h.xff)
		}
		// What the loops serve, the goroutine engine would not refuse:
		// both engines answer a request alike.
		if code := RefusedHead(fh.Method(), fh.RequestURI(), fh.Protocol(), fh.RawHeaders()); code != 0 {
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
		var h Response
		var resp fasthttp.Response
		if b = plainHead(t, b, func(b []byte) bool { return ParseResponse(b, &h) }, resp.Header.Read); b == nil {
			return
		}
		if h.cl < 0 && h.code != fasthttp.StatusNoContent && h.code != fasthttp.StatusNotModified {
			return // a body up to the connection's end: the loops leave it to fasthttp
		}
		cl := resp.Header.ContentLength()
		if h.cl >= 0 && cl != h.cl || resp.StatusCode() != h.code || resp.Header.ConnectionClose() != h.Close() {
			t.Fatalf("%q: fasthttp reads %d cl %d close %v; the loops %d cl %d close %v",
				b, resp.StatusCode(), cl, resp.Header.ConnectionClose(), h.code, h.cl, h.Close())
		}
	})
}

// plainHead returns the head that b starts with when parse takes it as
// plain, after checking that fasthttp's read accepts it too; nil when b
// has no head or parse refuses it.
func plainHead(t *testing.T, b []byte, parse func([]byte) bool, read func(*bufio.Reader) error) []byte {
	end := bytes.Index(b, []byte("\r\n\r\n"))
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
		var h Request
		for b.Loop() {
			if !ParseRequest(head, &h) {
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

// testEdit removes X-Drop and sets X-Set, as a route's rules do.
type testEdit struct{}

func (testEdit) Drops(k []byte) bool { return EqualName(k, "X-Drop") || EqualName(k, "X-Set") }
func (testEdit) AppendLines(dst []byte, rateLimited bool) []byte {
	dst = append(dst, "X-Set: 1\r\n"...)
	if !rateLimited {
		dst = append(dst, "RateLimit: edit\r\n"...)
	}
	return dst
}

// testRewrite strips /v1 and keeps the client's Host.
type testRewrite struct{}

func (testRewrite) AppendPath(dst, path []byte) []byte {
	return append(dst, bytes.TrimPrefix(path, []byte("/v1"))...)
}
func (testRewrite) KeepHost() bool { return true }

func TestAppendWithRouteRules(t *testing.T) {
	var h Request
	if !ParseRequest(crlf("GET /v1/x?q=1 HTTP/1.1\nHost: api.example\nX-Drop: a\nX-Set: client\nX-Request-Id: c\nAccept: */*\n\n"), &h) {
		t.Fatal("refused")
	}
	got := string(AppendRequest(nil, &h, &Forward{Addr: "u:1", XFF: []byte("1.2.3.4"), ID: []byte("id"), Rewrite: testRewrite{}, Edit: testEdit{}}, nil))
	want := string(crlf("GET /x?q=1 HTTP/1.1\nHost: api.example\nAccept: */*\nX-Forwarded-For: 1.2.3.4\n" +
		"X-Forwarded-Host: api.example\nX-Forwarded-Proto: http\nX-Request-Id: id\nX-Set: 1\nRateLimit: edit\n\n"))
	if got != want {
		t.Errorf("upstream request:\n%q\nwant\n%q", got, want)
	}

	var r Response
	if !ParseResponse(crlf("HTTP/1.1 200 OK\nX-Drop: a\nContent-Length: 0\n\n"), &r) {
		t.Fatal("refused")
	}
	d := &Deliver{Date: []byte("Date: x\r\n"), Policy: []byte("p"), RateLimit: []byte("r"), Edit: testEdit{}}
	got = string(AppendResponse(nil, &r, d, nil))
	want = string(crlf("HTTP/1.1 200 OK\nContent-Length: 0\nX-Set: 1\nDate: x\nRateLimit-Policy: p\nRateLimit: r\n\n"))
	if got != want {
		t.Errorf("client response:\n%q\nwant\n%q", got, want)
	}
}

// TestAppendAllocatesNothing checks that forwarding a head into a buffer
// with room allocates nothing: the loops do it for every request.
func TestAppendAllocatesNothing(t *testing.T) {
	var h Request
	if !ParseRequest(crlf("POST /v1/x HTTP/1.1\nHost: a\nContent-Length: 2\nConnection: keep-alive\nAccept: */*\n\n"), &h) {
		t.Fatal("refused")
	}
	var r Response
	if !ParseResponse(crlf("HTTP/1.1 200 OK\nContent-Length: 2\nDate: y\n\n"), &r) {
		t.Fatal("refused")
	}
	buf := make([]byte, 0, 4096)
	f := &Forward{Addr: "u:1", XFF: []byte("1.2.3.4"), ID: []byte("id"), Traceparent: []byte("00-x-01"),
		Tracestate: strings.Repeat("v=1,", 20), Edit: testEdit{}, Rewrite: testRewrite{}}
	d := &Deliver{Date: []byte("Date: x\r\n"), RateLimit: []byte("r"), Edit: testEdit{}}
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendRequest(buf[:0], &h, f, []byte("hi"))
		buf = AppendResponse(buf[:0], &r, d, []byte("ok"))
		if !ParseRequest(crlf2Head, &h) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("%v allocations, want none", n)
	}
}

var crlf2Head = crlf("POST /v1/x HTTP/1.1\nHost: a\nContent-Length: 2\nConnection: keep-alive\nAccept: */*\n\n")

// FuzzForwardRoundTrip checks that a request the loops take as plain
// reaches the target as a plain request that means the same: parsed,
// appended for the target and parsed again, it keeps its method, target,
// length, body and end-to-end header lines, names the target as its Host,
// carries the gateway's X-Forwarded-* and X-Request-Id and no hop-by-hop
// header, and appending it again gives the same bytes (a chain of
// gateways that trust each other adds nothing on the way). Its response
// likewise keeps its status, length and end-to-end lines.
func FuzzForwardRoundTrip(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\nHost: a\n\n",
		"POST /v1/infer?x=%41 HTTP/1.1\nHost: a:80\nContent-Length: 2\nConnection: close, X-Hop\nX-Hop: 1\nAccept: */*\n\nhi",
		"GET /a HTTP/1.1\nHost: a\nX-Forwarded-For: 1.2.3.4\nX-Forwarded-Host: b\nX-Forwarded-Proto: https\nForwarded: for=x\n\n",
		"PUT /x HTTP/1.1\nHost: a\nConnection: Content-Length, Host\nContent-Length: 1\nX-Request-Id: c\n\nz",
		"HTTP/1.1 200 OK\nContent-Length: 3\nConnection: keep-alive, X-Hop\nX-Hop: 1\nDate: d\nServer: s\n\nabc",
	} {
		f.Add(crlf(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			return
		}
		head, body := b[:end+4], b[end+4:]
		var h Request
		if ParseRequest(head, &h) {
			body = body[:min(len(body), h.cl)]
			fw := &Forward{Addr: "u:1", XFF: []byte("10.0.0.1"), Trusted: true, ID: []byte("id")}
			out := AppendRequest(nil, &h, fw, body)
			var g Request
			oend := bytes.Index(out, []byte("\r\n\r\n")) + 4
			if !ParseRequest(out[:oend], &g) {
				t.Fatalf("%q forwarded as %q, which is not plain", b, out)
			}
			if string(g.method) != string(h.method) || string(g.uri) != string(h.uri) || g.cl != h.cl ||
				string(out[oend:]) != string(body) || string(g.host) != "u:1" || string(g.xff) != "10.0.0.1" ||
				string(g.requestID) != "id" || len(g.connection) != 0 {
				t.Fatalf("%q forwarded as %q", b, out)
			}
			for k, v := range allLines(h.lines) {
				hop := IsHop(k, h.connection) || EqualName(k, "Host") || ForwardedHeader(k) || EqualName(k, "X-Request-Id")
				if !hop && !hasLine(g.lines, k, v) {
					t.Fatalf("%q forwarded as %q: lost %s: %s", b, out, k, v)
				}
			}
			if again := AppendRequest(nil, &g, fw, body); string(again) != string(out) {
				t.Fatalf("%q forwarded as %q, then as %q", b, out, again)
			}
		}
		var r Response
		if ParseResponse(head, &r) {
			d := &Deliver{Date: []byte("Date: now\r\n")}
			out := AppendResponse(nil, &r, d, body)
			var g Response
			oend := bytes.Index(out, []byte("\r\n\r\n")) + 4
			if !ParseResponse(out[:oend], &g) || g.code != r.code || g.cl != r.cl || len(g.connection) != 0 || string(out[oend:]) != string(body) {
				t.Fatalf("%q answered as %q", b, out)
			}
			if again := AppendResponse(nil, &g, d, body); string(again) != string(out) {
				t.Fatalf("%q answered as %q, then as %q", b, out, again)
			}
		}
	})
}

// allLines yields the name and value of each header line of a parsed
// head.
func allLines(b []byte) func(yield func(k, v []byte) bool) {
	return func(yield func(k, v []byte) bool) {
		for len(b) > 0 {
			k, v, rest, _ := HeaderLine(b)
			if !yield(k, v) {
				return
			}
			b = rest
		}
	}
}

// hasLine reports whether the header lines b have one named k (in any
// case) with value v.
func hasLine(b, k, v []byte) bool {
	for k2, v2 := range allLines(b) {
		if EqualName(k2, string(k)) && bytes.Equal(v2, v) {
			return true
		}
	}
	return false
}
