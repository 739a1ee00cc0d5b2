package gateway_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testpki"
)

// Hostile input on the protocols beyond plaintext HTTP/1.1: what a client
// can make the upstream receive, past the route's rules. (The raw HTTP/2
// client is in h2raw_test.go.)

// TestGRPCContentTypeKeepsMethod sends, over h2c, a GET whose
// Content-Type is gRPC's to a route that admits only GET: a gRPC call is
// a POST (the gRPC over HTTP/2 protocol), so this one is a plain request
// and reaches the upstream as the GET it is. (It was taken for a gRPC
// call and sent upstream as a POST with its body: a route's methods rule
// let a POST through.)
func TestGRPCContentTypeKeepsMethod(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startProtoUpstream(t, "h2c", nil, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: h2c}
routes:
  - {name: read-only, upstream: up, match: {methods: [GET]}}
`, engine, u.URL))
		c := protoClient(t, "h2c", nil, "")
		r := do(t, c, http.MethodGet, tg.URL+"/svc/Delete", http.Header{"Content-Type": {"application/grpc"}},
			strings.NewReader("\x00\x00\x00\x00\x02hi"))
		if r.Code != http.StatusOK || !strings.HasPrefix(r.Body, "HTTP/2.0 GET /svc/Delete") {
			t.Errorf("a GET with gRPC's content type: %d %q, want the upstream's answer to a GET", r.Code, r.Body)
		}
	})
}

// TestHTTP2HostAgreesWithAuthority sends HTTP/2 requests whose Host header
// names another route's host than their :authority: the request is
// routed by :authority (as net/http reads it, RFC 9113 section 8.3.1),
// and the upstream is told that same host in X-Forwarded-Host, for a
// plain request and a gRPC call alike. (The Host header routed the
// request, and a gRPC call then told the upstream the :authority: the
// route of one host, the upstream believing another.)
func TestHTTP2HostAgreesWithAuthority(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
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
		if st, body := h.read(t, 1); st != "200" || body != "a xfh=a.test" {
			t.Errorf("a GET with :authority a.test and Host b.test: %s %q, want route a's answer", st, body)
		}
		h.headers(t, 3, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/svc/Call",
			"host", "b.test", "content-type", "application/grpc", "te", "trailers")
		_ = h.fr.WriteData(3, true, []byte("\x00\x00\x00\x00\x00"))
		if st, body := h.read(t, 3); st != "200" || body != "a xfh=a.test" {
			t.Errorf("a gRPC call with :authority a.test and Host b.test: %s %q, want route a's answer", st, body)
		}
	})
}

// TestWebSocketHandshakeWithBody sends a WebSocket handshake that has a
// body, on the plaintext listener and over TLS: it is no handshake (a
// request with a body is not upgraded, as for h2c), but a GET whose body
// reaches the upstream as declared, without Upgrade. (The gateway read
// the body and sent the upstream a handshake declaring it, without it:
// the upstream took the tunnel's first bytes for the body.)
func TestWebSocketHandshakeWithBody(t *testing.T) {
	const handshake = "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 5\r\n\r\nHELLO"
	forEngines(t, func(t *testing.T, engine string) {
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

// TestForwardedHeaderNotPassed sends a client's RFC 7239 Forwarded header,
// which claims another client, scheme and host, over HTTP/1.1, h2c and a
// WebSocket handshake: the upstream never sees it (as net/http's
// ReverseProxy drops it), whatever the protocol, since the gateway's own
// X-Forwarded-* are what it reports. (It was passed on untouched: an
// upstream that reads Forwarded believed the client's word.)
func TestForwardedHeaderNotPassed(t *testing.T) {
	const spoof = "for=6.6.6.6;proto=https;host=admin.test"
	forEngines(t, func(t *testing.T, engine string) {
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

// TestGRPCRequestBoundedByMaxBody makes gRPC calls whose request is
// longer than server.max_body_bytes: the upstream never gets one whole
// (the gateway cuts the request there, as for any request body), and the
// client gets RESOURCE_EXHAUSTED; a call within the bound passes. (A gRPC
// call's request was never bounded: any HTTP/2 client could stream past
// max_body_bytes with gRPC's Content-Type.)
func TestGRPCRequestBoundedByMaxBody(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 4096}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, engine, up.addr))
		c := grpcClient(t, gw.Addr)
		if st, _ := unary(t, c, strings.Repeat("x", 1000)); st.Code() != codes.OK {
			t.Fatalf("a call within max_body_bytes: %v", st)
		}
		if st, _ := unary(t, c, strings.Repeat("x", 64<<10)); st.Code() != codes.ResourceExhausted {
			t.Errorf("a unary call past max_body_bytes: %v, want RESOURCE_EXHAUSTED", st)
		}
		s, err := c.StreamingInputCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for range 64 {
			if s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(make([]byte, 1024))}) != nil {
				break // the gateway ended the call
			}
		}
		if _, err := s.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a client stream past max_body_bytes: %v, want RESOURCE_EXHAUSTED", err)
		}
		if n := up.unary.Load(); n != 1 {
			t.Errorf("the upstream answered %d unary calls, want only the one within the bound", n)
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
	forEngines(t, func(t *testing.T, engine string) {
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
	forEngines(t, func(t *testing.T, engine string) {
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
	forEngines(t, func(t *testing.T, engine string) {
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

// TestGRPCErrorsNameNoUpstream makes gRPC calls the gateway fails: to a
// target that refuses connections, and to one that breaks its answer off.
// The grpc-message names the reason (as the JSON error body of other
// requests does), never the target's address or the transport's error
// text. (Both went to the client: the network's layout, told to anyone.)
func TestGRPCErrorsNameNoUpstream(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		breaks := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte{0, 0, 0, 0, 0}) // one empty message, then no trailers
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}))
		breaks.Config.ErrorLog = log.New(io.Discard, "", 0)
		breaks.Config.Protocols = new(http.Protocols)
		breaks.Config.Protocols.SetUnencryptedHTTP2(true)
		checkLeaks(t)
		breaks.Start()
		t.Cleanup(breaks.Close)
		closed := closedAddr(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  closed: {targets: ["http://%s"]}
  breaks: {targets: ["%s"]}
routes:
  - {name: closed, upstream: closed, match: {path_prefix: /grpc.testing.TestService/UnaryCall}}
  - {name: breaks, upstream: breaks}
`, engine, closed, breaks.URL))
		c := grpcClient(t, gw.Addr)
		if st, _ := unary(t, c, "x"); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") {
			t.Errorf("a call to a closed port: %v, want UNAVAILABLE naming no address", st)
		}
		_, err := c.EmptyCall(callCtx(t), &testgrpc.Empty{})
		if st := status.Convert(err); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") {
			t.Errorf("a call whose answer broke off: %v, want UNAVAILABLE naming no address", st)
		}
	})
}

// TestWebSocketHandshakeOriginForm sends WebSocket handshakes whose
// request target is in absolute form, naming another host than the Host
// header the route was chosen by, on the plaintext listener and over TLS:
// the upstream gets the origin form (path and query), as for any other
// request. (It got the absolute form, whose host a server must prefer to
// Host, RFC 9112 section 3.2.2: a host the route never saw.)
func TestWebSocketHandshakeOriginForm(t *testing.T) {
	const handshake = "GET http://other.test/ws?q=1 HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	forEngines(t, func(t *testing.T, engine string) {
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
  - {name: all, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), u.addr))
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

// TestWebSocketWithoutResponseHeaderTimeout opens a WebSocket through an
// upstream whose response_header_timeout is 0s (no bound, as for other
// requests): the handshake passes and messages flow. (Its deadline was
// then the handshake's start: every handshake failed with a 502.)
func TestWebSocketWithoutResponseHeaderTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
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

// TestHTTP2InvalidAuthorityRefused sends HTTP/2 requests whose :authority
// is no host (a space, a path, a query), which the gateway refuses in an
// HTTP/1.1 Host: each is refused with a 400 and reaches no upstream.
// (They were served, routed and sent upstream for the path "/" whatever
// their :path, with the :authority as X-Forwarded-Host.)
func TestHTTP2InvalidAuthorityRefused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
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
	forEngines(t, func(t *testing.T, engine string) {
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
