package gateway_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Hostile input on HTTP/2 and h2c: what a client can make the upstream
// receive, past the route's rules. (The raw HTTP/2 client is in
// h2raw_test.go.)

// TestHTTP2HostAgreesWithAuthority sends HTTP/2 requests whose Host header
// names another route's host than their :authority: each is refused
// (400), a plain request and a gRPC call alike, as nginx refuses it (RFC
// 9113 section 8.3.1; see TestH2OneHost), and reaches no upstream. (The
// Host header routed the request, and a gRPC call then told the upstream
// the :authority: the route of one host, the upstream believing another;
// then the :authority routed it, while a server reading the host field
// read another.)
func TestHTTP2HostAgreesWithAuthority(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		hostUpstream := func(name string) string {
			u := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s xfh=%s", name, r.Header.Get("X-Forwarded-Host"))
			}))
			u.Config.Protocols = new(http.Protocols)
			u.Config.Protocols.SetHTTP1(true)
			u.Config.Protocols.SetUnencryptedHTTP2(true)
			u.Start()
			t.Cleanup(u.Close)
			return u.URL
		}
		checkLeaks(t)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  a: {targets: ["%s"]}
  b: {targets: ["%s"]}
routes:
  - {name: a, upstream: a, match: {host: a.test}}
  - {name: b, upstream: b, match: {host: b.test}}
`, engine, hostUpstream("a"), hostUpstream("b")))
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/", "host", "b.test")
		if st, body := h.read(t, 1); st != "400" {
			t.Errorf("a GET with :authority a.test and Host b.test: %s %q, want 400", st, body)
		}
		h.headers(t, 3, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/svc/Call",
			"host", "b.test", "content-type", "application/grpc", "te", "trailers")
		_ = h.fr.WriteData(3, true, []byte("\x00\x00\x00\x00\x00"))
		if st, body := h.read(t, 3); st != "400" {
			t.Errorf("a gRPC call with :authority a.test and Host b.test: %s %q, want 400", st, body)
		}
		h.headers(t, 5, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/", "host", "A.test")
		if st, body := h.read(t, 5); st != "200" || body != "a xfh=a.test" {
			t.Errorf("a GET with :authority a.test and Host A.test: %s %q, want route a's answer", st, body)
		}
	})
}

// TestHTTP2InvalidAuthorityRefused sends HTTP/2 requests whose :authority
// is no host (a space, a path, a query), which the gateway refuses in an
// HTTP/1.1 Host: each is refused with a 400, on every HTTP/2 engine, and
// reaches no upstream. (They were served, routed and sent upstream for
// the path "/" whatever their :path, with the :authority as
// X-Forwarded-Host.)
func TestHTTP2InvalidAuthorityRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		h := dialH2(t, tg.Addr)
		for i, a := range []string{"a test", "x/admin?", "x/admin#", "x/admin"} {
			id := uint32(1 + 2*i)
			h.headers(t, id, true, ":method", "GET", ":scheme", "http", ":authority", a, ":path", "/public/p")
			if st, _ := h.read(t, id); st != "400" {
				t.Errorf(":authority %q: %s, want 400", a, st)
			}
		}
		if seen := u.requests(); len(seen) != 0 {
			t.Errorf("the upstream saw %d requests (%s with X-Forwarded-Host %q first), want none",
				len(seen), seen[0].Target, seen[0].Header.Get("X-Forwarded-Host"))
		}
	})
}

// TestH2CUpgradeWithBodyNotBuffered asks, on a connection the HTTP/2
// engine serves on HTTP/1.1 (a first request whose Upgrade: h2c its
// Connection header does not name HTTP2-Settings for, which the engine
// serves as a plain request), to upgrade a request with a long body: it is
// served as a plain request, refused at once past server.max_body_bytes.
// (golang.org/x/net/http2/h2c read the body whole into memory before
// answering 101, without bound: any client could make the gateway hold as
// many bytes as it sent.)
func TestH2CUpgradeWithBodyNotBuffered(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 1024}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, engine, u.addr))
		c, br := dialClient(t, tg.Addr)
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		_, err := io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"+
			"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// A body of 1 GiB is announced, 64 KiB of it sent: the answer must
		// not wait for the rest.
		_, err = io.WriteString(c, "POST /second HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
			"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nContent-Length: 1073741824\r\n\r\n"+strings.Repeat("x", 64<<10))
		if err != nil {
			t.Fatal(err)
		}
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to an upgrade with a 1 GiB body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("an upgrade with a 1 GiB body: %d, want 413", resp.StatusCode)
		}
	})
}

// TestH2CUpgradeRefusedIsPlainRequest sends requests asking to upgrade to
// h2c that the upgrade does not take (RFC 9113 section 3.2 of RFC 7540):
// settings that are not base64url, and an HTTP/1.0 request (whose Upgrade
// a server must ignore, RFC 9110 section 7.8). Each is served as the plain
// request it also is, on the same connection. (The first was answered 500
// and the second upgraded.)
func TestH2CUpgradeRefusedIsPlainRequest(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		for _, req := range []string{
			"GET /bad-settings HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: !!!!\r\n\r\n",
			"GET /http10 HTTP/1.0\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
		} {
			resp, _ := rawRequest(t, tg.Addr, req)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%q: %d, want the upstream's 200", strings.SplitN(req, "\r\n", 2)[0], resp.StatusCode)
			}
		}
		for _, r := range u.requests() {
			if r.Header.Get("Upgrade") != "" {
				t.Errorf("%s reached the upstream with Upgrade %q", r.Target, r.Header.Get("Upgrade"))
			}
		}
	})
}

// TestH2CUpgradeKeepsRouteRules is h2c smuggling through a front proxy
// turned on the gateway: a client upgrades a request its routes admit,
// then sends, as HTTP/2 streams on the upgraded connection, one they
// refuse and more than the rate limit lets through. Each stream is routed
// and limited as a request of its own (the gateway serves HTTP/2 itself:
// it never tunnels an upgraded connection to an upstream).
func TestH2CUpgradeKeepsRouteRules(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: public
    upstream: up
    match: {path_prefix: /public/}
    policies: {rate_limit: {limit: 2, period: 1h}}
`, engine, u.addr))
		c, br := dialClient(t, tg.Addr)
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		_, err := io.WriteString(c, "GET /public/a HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
			"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		h := &h2raw{c: c, fr: http2.NewFramer(c, br), hdr: map[string]string{}}
		h.enc = hpack.NewEncoder(&h.hb)
		h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) { h.hdr[f.Name] = f.Value })
		if err := h.fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.read(t, 1); st != "200" {
			t.Errorf("the upgraded request: %s, want 200", st)
		}
		for _, s := range []struct {
			id   uint32
			path string
			want string
		}{{3, "/admin", "404"}, {5, "/public/b", "200"}, {7, "/public/c", "429"}} {
			h.headers(t, s.id, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", s.path)
			if st, _ := h.read(t, s.id); st != s.want {
				t.Errorf("stream %d, %s: %s, want %s", s.id, s.path, st, s.want)
			}
		}
		for _, r := range u.requests() {
			if !strings.HasPrefix(r.Target, "/public/") {
				t.Errorf("the upstream saw %s", r.Target)
			}
		}
		if n := len(u.requests()); n != 2 {
			t.Errorf("the upstream saw %d requests, want 2", n)
		}
	})
}

// TestForwardedHeaderNotPassed sends a client's RFC 7239 Forwarded header,
// which claims another client, scheme and host, over HTTP/1.1, h2c and a
// WebSocket handshake: the upstream never sees it (as net/http's
// ReverseProxy drops it), whatever the protocol, since the gateway's own
// X-Forwarded-* are what it reports. (It was passed on untouched: an
// upstream that reads Forwarded believed the client's word.)
func TestForwardedHeaderNotPassed(t *testing.T) {
	const spoof = "for=6.6.6.6;proto=https;host=admin.test"
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, func(i int, r seenRequest) string {
			if r.Header.Get("Upgrade") != "" {
				return "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
			}
			return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
		})
		tg := gatewayTo(t, engine, u.addr)
		exchangeRaw(t, tg.Addr, "GET /h1 HTTP/1.1\r\nHost: a.test\r\nForwarded: "+spoof+"\r\n\r\n", 1)
		exchangeRaw(t, tg.Addr, "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nForwarded: "+spoof+"\r\n\r\n", 1)
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/h2c", "forwarded", spoof)
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("h2c: %s", st)
		}
		seen := u.requests()
		if len(seen) != 3 {
			t.Fatalf("the upstream saw %d requests, want 3", len(seen))
		}
		for _, r := range seen {
			if f := r.Header.Values("Forwarded"); len(f) > 0 {
				t.Errorf("%s reached the upstream with the client's Forwarded %q", r.Target, f)
			}
		}
	})
}

// TestGetBodyBoundedByMaxBody sends GETs whose body has no length (chunked
// on HTTP/1.1, DATA frames without content-length on HTTP/2), longer than
// server.max_body_bytes: each is refused with a 413, as a POST is, and the
// upstream sees none. (They were taken for GETs without a body, so nothing
// bounded the body the upstream was then sent whole.)
func TestGetBodyBoundedByMaxBody(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 1024}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, engine, u.addr))
		big := strings.Repeat("x", 5000)
		if r := exchangeRaw(t, tg.Addr, "GET /h1 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"+
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big), 1); r[0].Code != http.StatusRequestEntityTooLarge {
			t.Errorf("a chunked GET past max_body_bytes: %d, want 413", r[0].Code)
		}
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, false, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/h2")
		if err := h.fr.WriteData(1, true, []byte(big)); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.read(t, 1); st != "413" {
			t.Errorf("an HTTP/2 GET past max_body_bytes: %s, want 413", st)
		}
		for _, r := range u.requests() {
			t.Errorf("the upstream saw %s %s with a body of %d bytes", r.Method, r.Target, len(r.Body))
		}
	})
}

// TestNoInventedContentType sends a POST without Content-Type over
// HTTP/1.1 and HTTP/2: the upstream gets none either, on both engines, as
// from the loops. (The goroutine engine and the HTTP/2 engine, through
// fasthttp's default, told the upstream application/octet-stream, which
// the client never said.)
func TestNoInventedContentType(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		exchangeRaw(t, tg.Addr, "POST /h1 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello", 1)
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/h2", "content-length", "5")
		if err := h.fr.WriteData(1, true, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("HTTP/2 POST: %s", st)
		}
		for _, r := range u.requests() {
			if ct := r.Header.Values("Content-Type"); len(ct) > 0 || r.Body != "hello" {
				t.Errorf("%s reached the upstream with Content-Type %q and body %q, want none and hello", r.Target, ct, r.Body)
			}
		}
	})
}

// TestHTTP2DoubleSlashPathRouted sends GET //x over HTTP/1.1 (with a Host)
// and over HTTP/2 (:authority names the host): both are routed and reach
// the upstream with the path /x, which the engines make of //x. (The HTTP/2 request was refused with a
// 400: the check for an HTTP/1.1 request without Host that names its host
// in a target of //host looked for a Host line among raw headers that an
// HTTP/2 request has none of.)
func TestHTTP2DoubleSlashPathRouted(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		if r := exchangeRaw(t, tg.Addr, "GET //h1 HTTP/1.1\r\nHost: a.test\r\n\r\n", 1); r[0].Code != http.StatusOK {
			t.Errorf("HTTP/1.1 GET //h1: %d, want 200", r[0].Code)
		}
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "//h2")
		if st, _ := h.read(t, 1); st != "200" {
			t.Errorf("HTTP/2 GET //h2: %s, want 200", st)
		}
		var targets []string
		for _, r := range u.requests() {
			targets = append(targets, r.Target)
		}
		if want := []string{"/h1", "/h2"}; fmt.Sprint(targets) != fmt.Sprint(want) {
			t.Errorf("the upstream saw targets %q, want %q", targets, want)
		}
	})
}

// TestHTTP2ConflictingContentLengthRefused sends HTTP/2 requests with two
// content-length fields that disagree, with a body of the first's length
// and of the second's: each is malformed (RFC 9113 section 8.1.1) and
// refused, with a 400 or a stream reset, and the upstream sees none. Two
// that agree are one length, and pass. (net/http's server took the first
// and the gateway sent both upstream, where a reader taking the last would
// frame the body otherwise.)
func TestHTTP2ConflictingContentLengthRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		h := dialH2(t, tg.Addr)
		for i, body := range []string{"hello", "hello world"} {
			id := uint32(1 + 2*i)
			h.headers(t, id, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/cl",
				"content-length", "5", "content-length", "11")
			if err := h.fr.WriteData(id, true, []byte(body)); err != nil {
				t.Fatal(err)
			}
			if st, _ := h.read(t, id); st != "400" && !strings.HasPrefix(st, "RST") {
				t.Errorf("content-length 5 and 11, a body of %d bytes: %s, want 400 or a reset", len(body), st)
			}
		}
		for _, r := range u.requests() {
			t.Errorf("the upstream saw %s %s with Content-Length %q and body %q", r.Method, r.Target, r.Header.Values("Content-Length"), r.Body)
		}
		h.headers(t, 5, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/same",
			"content-length", "5", "content-length", "5")
		if err := h.fr.WriteData(5, true, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.read(t, 5); st != "200" {
			t.Errorf("content-length 5 twice: %s, want 200", st)
		}
		if seen := u.requests(); len(seen) != 1 || seen[0].Body != "hello" || fmt.Sprint(seen[0].Header.Values("Content-Length")) != "[5]" {
			t.Errorf("the upstream saw %+v, want one request with one Content-Length 5 and body hello", seen)
		}
	})
}

// TestHTTP2RequestTrailersForwarded sends an HTTP/2 request whose body
// ends with the trailers its Trailer header announced: an HTTP/1.1
// upstream receives them as the trailer section of a chunked body. (They
// were dropped. Trailers a request does not announce net/http's server
// drops itself.)
func TestHTTP2RequestTrailersForwarded(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		type seen struct {
			body    string
			trailer http.Header
		}
		got := make(chan seen, 1)
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				b, _ := io.ReadAll(r.Body)
				got <- seen{string(b), r.Trailer}
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return err == nil
			})
		})
		tg := gatewayTo(t, engine, up.addr)
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/t",
			"trailer", "x-checksum, x-count", "content-length", "5")
		if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		h.headers(t, 1, true, "x-checksum", "abc", "x-count", "1")
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("a POST with trailers: %s", st)
		}
		select {
		case s := <-got:
			if s.body != "hello" || s.trailer.Get("X-Checksum") != "abc" || s.trailer.Get("X-Count") != "1" {
				t.Errorf("the upstream got body %q and trailers %v, want hello and X-Checksum: abc, X-Count: 1", s.body, s.trailer)
			}
		case <-time.After(waitLimit):
			t.Fatal("the upstream saw no request")
		}
	})
}

// TestTLSHopByHopTrailerRefused sends, over TLS HTTP/1.1, a request with a
// chunked body whose trailer section holds its announced X-Checksum and,
// unannounced, Connection: close: it is refused with a 400, as on the
// plaintext listener, and reaches no upstream; the next request, on a
// connection of its own, does. (When net/http served TLS HTTP/1.1 it kept
// unannounced trailers, and Connection: close set on the upstream request
// closed the gateway's upstream connection.)
func TestTLSHopByHopTrailerRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		got := make(chan string, 2)
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				_, _ = io.ReadAll(r.Body)
				got <- r.URL.Path
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return err == nil
			})
		})
		tg, ca := caGateway(t, engine, "http://"+up.addr)
		for i, tt := range []struct {
			req  string
			want int
		}{
			{"POST /t HTTP/1.1\r\nHost: a.test\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"5\r\nhello\r\n0\r\nX-Checksum: abc\r\nConnection: close\r\n\r\n", http.StatusBadRequest},
			{"GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n", http.StatusOK},
		} {
			tc, err := tls.Dial("tcp", serveTLS(t, tg), &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			_ = tc.SetDeadline(time.Now().Add(waitLimit))
			if _, err := io.WriteString(tc, tt.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			tc.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("request %d %.40q: %d, want %d", i, tt.req, resp.StatusCode, tt.want)
			}
		}
		select {
		case p := <-got:
			if p != "/next" {
				t.Errorf("the upstream saw %s first, want /next alone", p)
			}
		case <-time.After(waitLimit):
			t.Fatal("the upstream saw no request")
		}
	})
}

// TestHTTP2StreamPausesPastWriteTimeout streams an answer over h2c whose
// upstream pauses between its two parts for longer than
// server.write_timeout: the client reads it whole. The write timeout
// bounds each write to a client that does not read; it is no limit on how
// long a streamed answer may pause (server-sent events, tokens of an
// inference). (Each part's write deadline stayed set after the part was
// sent, and net/http's HTTP/2 server resets a stream whose deadline passes
// even with nothing to write: the answer was cut at the pause.)
func TestHTTP2StreamPausesPastWriteTimeout(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "first ")
			w.(http.Flusher).Flush()
			time.Sleep(1500 * time.Millisecond) // past the write timeout: a lower bound, whatever the machine
			io.WriteString(w, "second")
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, write_timeout: 1s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		resp, err := protoClient(t, "h2c", nil, "").Get(gw.URL + "/sse")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || string(body) != "first second" {
			t.Errorf("read %q, %v; want the whole answer", body, err)
		}
	})
}

// TestHTTP2TargetWithSpaceRefused sends HTTP/2 requests, over h2c and
// over TLS, whose :path holds a space, which no HTTP/1.1 request line can
// carry (the HTTP/1.1 engines refuse such a line, as nginx refuses such a
// :path): each is refused with a 400, on every HTTP/2 engine, and the
// upstream sees none. A :path
// with raw non-ASCII bytes, which an HTTP/1.1 line carries as is (and the
// HTTP/1.1 engines pass), passes. (net/http's server takes a space in
// :path; fasthttp escapes one in the path but not in the query, so
// "/p?x HTTP/1.1" reached the upstream as the request line
// "GET /p?x HTTP/1.1 HTTP/1.1".)
func TestHTTP2TargetWithSpaceRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg, ca := caGateway(t, engine, "http://"+u.addr)
		for proto, h := range h2Both(t, tg, serveTLS(t, tg), ca) {
			before := len(u.requests())
			for i, path := range []string{"/p?x y", "/p?x HTTP/1.1", "/p x", "/p?a#b c", "//p?x y"} {
				id := uint32(1 + 2*i)
				h.headers(t, id, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", path)
				if st, _ := h.read(t, id); st != "400" {
					t.Errorf("%s :path %q: %s, want 400", proto, path, st)
				}
			}
			for _, r := range u.requests()[before:] {
				t.Errorf("%s: the upstream saw %s %q", proto, r.Method, r.Target)
			}
			h.headers(t, 11, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/p?\xc3\xa9")
			if st, _ := h.read(t, 11); st != "200" {
				t.Errorf("%s :path /p?\\xc3\\xa9: %s, want 200", proto, st)
			}
		}
		if seen := u.requests(); len(seen) != 2 || seen[0].Target != "/p?\xc3\xa9" || seen[1].Target != "/p?\xc3\xa9" {
			t.Errorf("the upstream saw %+v, want /p?\\xc3\\xa9 twice", seen)
		}
	})
}

// TestHTTP2InvalidContentLengthRefused sends HTTP/2 requests with a body
// and a content-length that is no length (RFC 9110 section 8.6: digits):
// each is refused, with a 400 or a stream reset, and the upstream sees
// none. (net/http's server read such a length as 0 and reset the stream
// at the body, but the handler had already sent the upstream an empty
// POST.)
func TestHTTP2InvalidContentLengthRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		for _, cl := range []string{"abc", "+5", "5, 5", "-5", " 5", "99999999999999999999"} {
			h := dialH2(t, tg.Addr)
			h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/cl",
				"content-length", cl)
			if err := h.fr.WriteData(1, true, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if st, _ := h.read(t, 1); st != "400" && !strings.HasPrefix(st, "RST") {
				t.Errorf("content-length %q: %s, want 400 or a reset", cl, st)
			}
		}
		for _, r := range u.requests() {
			t.Errorf("the upstream saw %s %s with Content-Length %q and body %q", r.Method, r.Target, r.Header.Values("Content-Length"), r.Body)
		}
	})
}

// TestHTTP2ForwardedTrailersNotPassed sends an HTTP/2 request whose
// announced trailers are X-Forwarded-For, X-Forwarded-Host and Forwarded
// beside X-Checksum: the upstream's trailer section holds X-Checksum
// alone, as the gateway never passes a client's Forwarded or
// X-Forwarded-* header (an upstream that reads trailers as headers would
// believe them).
func TestHTTP2ForwardedTrailersNotPassed(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		got := make(chan http.Header, 1)
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				_, _ = io.ReadAll(r.Body)
				got <- r.Trailer
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return err == nil
			})
		})
		tg := gatewayTo(t, engine, up.addr)
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/t",
			"trailer", "x-forwarded-for, x-forwarded-host, forwarded, x-checksum", "content-length", "5")
		if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		h.headers(t, 1, true, "x-forwarded-for", "6.6.6.6", "x-forwarded-host", "admin.test", "forwarded", "for=6.6.6.6", "x-checksum", "abc")
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("a POST with trailers: %s", st)
		}
		select {
		case tr := <-got:
			if tr.Get("X-Checksum") != "abc" || len(tr) != 1 {
				t.Errorf("the upstream got trailers %v, want X-Checksum: abc alone", tr)
			}
		case <-time.After(waitLimit):
			t.Fatal("the upstream saw no request")
		}
	})
}

// TestHTTP2TrailersKeepRouteRules sends an HTTP/2 request, on a route
// whose rules set X-Env and remove X-Secret, whose announced trailers are
// X-Env, X-Secret and X-Request-Id beside X-Checksum: the upstream's
// trailer section holds X-Checksum alone, as its header section holds the
// route's X-Env and the gateway's X-Request-Id, and no X-Secret. (The
// trailers passed: a header the route removes, or sets, or the gateway's
// request id, reached the upstream from the client in the trailer
// section.)
func TestHTTP2TrailersKeepRouteRules(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		type seen struct{ header, trailer http.Header }
		got := make(chan seen, 1)
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				_, _ = io.ReadAll(r.Body)
				got <- seen{r.Header, r.Trailer}
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return err == nil
			})
		})
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: all
    upstream: up
    headers:
      request: {set: {X-Env: prod}, remove: [X-Secret]}
`, engine, up.addr))
		h := dialH2(t, tg.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/t",
			"trailer", "x-env, x-secret, x-request-id, x-checksum", "content-length", "5")
		if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		h.headers(t, 1, true, "x-env", "dev", "x-secret", "s3cr3t", "x-request-id", "forged", "x-checksum", "abc")
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("a POST with trailers: %s", st)
		}
		select {
		case s := <-got:
			if s.trailer.Get("X-Checksum") != "abc" || len(s.trailer) != 1 {
				t.Errorf("the upstream got trailers %v, want X-Checksum: abc alone", s.trailer)
			}
			if s.header.Get("X-Env") != "prod" || s.header.Get("X-Secret") != "" || s.header.Get("X-Request-Id") == "forged" {
				t.Errorf("the upstream got headers %v, want X-Env: prod, the gateway's X-Request-Id and no X-Secret", s.header)
			}
		case <-time.After(waitLimit):
			t.Fatal("the upstream saw no request")
		}
	})
}
