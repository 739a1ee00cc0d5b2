package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRouting checks that requests go to the first route whose host, path
// prefix, methods and headers all match, and that other requests get 404.
func TestRouting(t *testing.T) {
	a := startUpstream(t, "a", nil)
	b := startUpstream(t, "b", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  a: {targets: ["%s"]}
  b: {targets: ["%s"]}
routes:
  - name: by-host
    match: {host: api.example}
    upstream: b
  - name: admin-post
    match: {path_prefix: /admin/, methods: [POST, PUT]}
    upstream: b
  - name: canary
    match: {path_prefix: /v1/, headers: {X-Canary: "yes"}}
    upstream: b
  - name: v1
    match: {path_prefix: /v1/}
    upstream: a
`, a.URL, b.URL))
	c := newClient(t)
	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		code   int
		body   string
	}{
		{"host", "GET", "/anything", http.Header{"Host": {"api.example"}}, 200, "b /anything"},
		{"host with port", "GET", "/x", http.Header{"Host": {"api.example:8443"}}, 200, "b /x"},
		{"host case-insensitive", "GET", "/x", http.Header{"Host": {"API.Example"}}, 200, "b /x"},
		{"other host falls through to prefix", "GET", "/v1/x", http.Header{"Host": {"web.example"}}, 200, "a /v1/x"},
		{"method matches", "POST", "/admin/users", nil, 200, "b /admin/users"},
		{"second method matches", "PUT", "/admin/users", nil, 200, "b /admin/users"},
		{"method does not match", "GET", "/admin/users", nil, 404, ""},
		{"header matches", "GET", "/v1/chat", http.Header{"X-Canary": {"yes"}}, 200, "b /v1/chat"},
		{"header value differs", "GET", "/v1/chat", http.Header{"X-Canary": {"no"}}, 200, "a /v1/chat"},
		{"prefix", "GET", "/v1/", nil, 200, "a /v1/"},
		{"prefix is not a substring match", "GET", "/x/v1/", nil, 404, ""},
		{"no route", "GET", "/other", nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, c, tt.method, gw.URL+tt.path, tt.header, nil)
			if r.Code != tt.code {
				t.Fatalf("status %d, want %d (body %q)", r.Code, tt.code, r.Body)
			}
			if tt.code == 404 {
				if e := r.errorBody(t); e.Error != "no_route" {
					t.Fatalf("404 body %q, want error no_route", r.Body)
				}
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("404 Content-Type %q", ct)
				}
				return
			}
			if r.Body != tt.body {
				t.Fatalf("body %q, want %q", r.Body, tt.body)
			}
		})
	}
}

// TestNotAnOpenProxy sends absolute-URI and CONNECT requests naming another
// server: they must reach the configured upstream (in origin form, with the
// upstream's own Host), never the server they name; one whose Host
// disagrees with its target is refused (400), reaching neither.
func TestNotAnOpenProxy(t *testing.T) {
	up := startUpstream(t, "up", nil)
	other := startUpstream(t, "other", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	tests := []struct {
		name, req, path string
	}{
		{"absolute URI to a named host", "GET http://evil.example/secret?q=1 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n", "/secret"},
		{"absolute URI to a local server", "GET http://" + other.addr() + "/secret HTTP/1.1\r\nHost: " + other.addr() + "\r\nConnection: close\r\n\r\n", "/secret"},
	}
	t.Run("absolute URI, Host header disagrees", func(t *testing.T) {
		before := up.calls.Load()
		resp, body := rawRequest(t, gw.Addr, "GET http://"+other.addr()+"/p HTTP/1.1\r\nHost: fine.example\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 400 || up.calls.Load() != before || other.calls.Load() != 0 {
			t.Fatalf("status %d (body %q), upstream calls %d, other's %d; want 400 and none", resp.StatusCode, body,
				up.calls.Load()-before, other.calls.Load())
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.calls.Load()
			resp, body := rawRequest(t, gw.Addr, tt.req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, body %q", resp.StatusCode, body)
			}
			if got := up.calls.Load() - before; got != 1 {
				t.Fatalf("configured upstream got %d requests, want 1", got)
			}
			if n := other.calls.Load(); n != 0 {
				t.Fatalf("the server named in the request got %d requests", n)
			}
			last := up.lastRequest()
			if last.URL.Path != tt.path {
				t.Errorf("upstream saw path %q, want %q", last.URL.Path, tt.path)
			}
			if !strings.HasPrefix(last.RequestURI, "/") {
				t.Errorf("upstream saw request-target %q, want origin form (RFC 9112 section 3.2.1)", last.RequestURI)
			}
			if last.Host != up.addr() {
				t.Errorf("upstream saw Host %q, want the target's %q", last.Host, up.addr())
			}
		})
	}
	t.Run("CONNECT", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", other.addr(), other.addr())
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil {
			t.Fatalf("reading the CONNECT response: %v", err)
		}
		resp.Body.Close()
		// Whatever the answer, the connection must still be plain HTTP to
		// the gateway: a request sent next is served by the configured
		// upstream (or refused), never tunnelled to the named server.
		fmt.Fprintf(conn, "GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if resp2, err := http.ReadResponse(br, nil); err == nil {
			b, _ := io.ReadAll(resp2.Body)
			resp2.Body.Close()
			t.Logf("CONNECT: %d; next request: %d %q", resp.StatusCode, resp2.StatusCode, b)
		}
		if n := other.calls.Load(); n != 0 {
			t.Fatalf("CONNECT opened a tunnel: the named server got %d requests", n)
		}
	})
}

// TestForwardedHeaders checks X-Forwarded-For/-Host/-Proto: a client's own
// X-Forwarded-For is replaced by its address unless the peer is a trusted
// proxy, whose list is extended.
func TestForwardedHeaders(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trusted string
		xff     string
		want    string
	}{
		{"no header, untrusted", "[]", "", "127.0.0.1"},
		{"forged header, untrusted", "[]", "1.2.3.4", "127.0.0.1"},
		{"trusted peer extends the list", "[127.0.0.1/32]", "1.2.3.4", "1.2.3.4, 127.0.0.1"},
		{"trusted peer without header", "[127.0.0.0/8]", "", "127.0.0.1"},
		{"other proxy trusted, peer not", "[10.0.0.0/8]", "1.2.3.4", "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, "up", nil)
			gw := startGateway(t, parseConfig(t, `
trusted_proxies: %s
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, tt.trusted, up.URL))
			h := http.Header{"Host": {"shop.example:8080"}}
			if tt.xff != "" {
				h.Set("X-Forwarded-For", tt.xff)
			}
			r := do(t, newClient(t), "GET", gw.URL+"/x", h, nil)
			if r.Code != 200 {
				t.Fatalf("status %d", r.Code)
			}
			last := up.lastRequest()
			if got := last.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != tt.want {
				t.Errorf("X-Forwarded-For %q, want %q", got, tt.want)
			}
			if got := last.Header.Get("X-Forwarded-Host"); got != "shop.example:8080" {
				t.Errorf("X-Forwarded-Host %q", got)
			}
			if got := last.Header.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("X-Forwarded-Proto %q", got)
			}
		})
	}
}

// TestClientKey checks whose rate limit a request counts against: the
// peer's address, or the right-most untrusted X-Forwarded-For entry when the
// peer is a trusted proxy.
func TestClientKey(t *testing.T) {
	for _, tt := range []struct {
		name     string
		trusted  string
		xffs     []string // one request each
		admitted []bool
	}{
		{"untrusted: forged headers share the peer's key", "[]",
			[]string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, []bool{true, false, false}},
		{"trusted: each client its own key", "[127.0.0.1/32]",
			[]string{"1.1.1.1", "2.2.2.2", "1.1.1.1"}, []bool{true, true, false}},
		{"trusted: forged left-most entries are ignored", "[127.0.0.1/32]",
			[]string{"1.1.1.1", "9.9.9.9, 1.1.1.1", "8.8.8.8, 2.2.2.2"}, []bool{true, false, true}},
		{"trusted: trusted hops are skipped", "[127.0.0.1/32, 10.0.0.0/8]",
			[]string{"1.1.1.1, 10.0.0.5", "1.1.1.1", "2.2.2.2, 10.1.1.1, 10.2.2.2"}, []bool{true, false, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, "up", nil)
			gw := startGateway(t, parseConfig(t, `
trusted_proxies: %s
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: ip}
`, tt.trusted, up.URL))
			c := newClient(t)
			for i, xff := range tt.xffs {
				r := do(t, c, "GET", gw.URL+"/", http.Header{"X-Forwarded-For": {xff}}, nil)
				if got := r.Code == 200; got != tt.admitted[i] {
					t.Errorf("request %d (X-Forwarded-For %q): status %d, want admitted=%v", i, xff, r.Code, tt.admitted[i])
				}
			}
		})
	}
}

// TestHopByHopHeaders checks that hop-by-hop headers, and those the
// Connection header names, are stripped in both directions while
// end-to-end headers pass.
func TestHopByHopHeaders(t *testing.T) {
	// A raw upstream, so that its response carries hop-by-hop headers
	// exactly as written.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen := make(chan http.Header, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(waitLimit))
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				h := req.Header.Clone()
				// net/http moves these out of Header; put them back to check them.
				if len(req.TransferEncoding) > 0 {
					h.Set("Transfer-Encoding", strings.Join(req.TransferEncoding, ","))
				}
				seen <- h
				io.WriteString(conn, "HTTP/1.1 200 OK\r\n"+
					"Connection: X-Resp-Secret\r\n"+
					"X-Resp-Secret: s\r\n"+
					"Keep-Alive: timeout=5\r\n"+
					"Proxy-Authenticate: Basic realm=x\r\n"+
					"Upgrade: h2c\r\n"+
					"Trailer: X-Trail\r\n"+
					"X-End: e\r\n"+
					"Content-Length: 2\r\n\r\nok")
			}()
		}
	}()
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, ln.Addr().String()))
	resp, body := rawRequest(t, gw.Addr, "GET /h HTTP/1.1\r\n"+
		"Host: x\r\n"+
		"Connection: keep-alive, X-Secret\r\n"+
		"X-Secret: s\r\n"+
		"Keep-Alive: 300\r\n"+
		"Proxy-Authorization: Basic abc\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"Te: trailers\r\n"+
		"Trailer: X-T\r\n"+
		"X-Keep: yes\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	var up http.Header
	select {
	case up = <-seen:
	case <-time.After(waitLimit):
		t.Fatal("the upstream got no request")
	}
	for _, h := range []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		if v := up.Values(h); len(v) > 0 {
			t.Errorf("upstream got hop-by-hop request header %s: %q", h, v)
		}
	}
	if c := up.Get("Connection"); c != "" && !strings.EqualFold(c, "keep-alive") && !strings.EqualFold(c, "close") {
		t.Errorf("upstream got Connection %q: the client's connection options leaked", c)
	}
	if up.Get("X-Keep") != "yes" {
		t.Errorf("end-to-end request header X-Keep lost: %v", up)
	}
	for _, h := range []string{"X-Resp-Secret", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "Trailer"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			t.Errorf("client got hop-by-hop response header %s: %q", h, v)
		}
	}
	if c := resp.Header.Get("Connection"); strings.Contains(strings.ToLower(c), "x-resp-secret") {
		t.Errorf("client got the upstream's Connection header %q", c)
	}
	if resp.Header.Get("X-End") != "e" {
		t.Errorf("end-to-end response header X-End lost: %v", resp.Header)
	}
}

// TestPathVariantsCannotBypassRoutes sends spellings of /expensive that an
// upstream reads as /expensive (percent-encoding, dot segments, doubled
// slashes): each is matched by the /expensive route and counted by its
// rate limit, instead of slipping through the catch-all route.
func TestPathVariantsCannotBypassRoutes(t *testing.T) {
	up := startUpstream(t, "up", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: limited
    match: {path_prefix: /expensive}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - {name: free, upstream: up}
`, up.URL))
	if resp, _ := rawRequest(t, gw.Addr, "GET /expensive HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	for _, p := range []string{
		"/expensive", "/%65xpensive", "/%65%78pensive/x", "/free/../expensive", "/free/%2e%2e/expensive",
		"/./expensive", "//expensive", "/free/..%2fexpensive",
	} {
		resp, body := rawRequest(t, gw.Addr, "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 429 {
			t.Errorf("GET %s: %d %q, want 429 from the /expensive route's limit", p, resp.StatusCode, body)
		}
	}
	if r := get(t, newClient(t), gw.URL+"/cheap"); r.Code != 200 {
		t.Errorf("other path: %d", r.Code)
	}
}

// The upstream sees the path the gateway routed on: dot segments and
// percent-encoded letters are resolved before the request is forwarded, so
// an upstream cannot disagree with the gateway about which route applies.
func TestForwardedPathIsNormalized(t *testing.T) {
	up := startUpstream(t, "up", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	for raw, want := range map[string]string{
		"/expensive/../free?q=1": "/free",
		"/%65xpensive":           "/expensive",
		"/./a//b":                "/a/b",
	} {
		resp, body := rawRequest(t, gw.Addr, "GET "+raw+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 || body != "up "+want {
			t.Errorf("GET %s: %d %q, want the upstream to see %s", raw, resp.StatusCode, body, want)
		}
	}
}

// Headers over server.max_header_bytes are refused with 431 before any
// route runs.
func TestMaxHeaderBytes(t *testing.T) {
	up := startUpstream(t, "up", nil)
	gw := startGateway(t, parseConfig(t, `
server: {max_header_bytes: 4096}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	big := strings.Repeat("x", 8000)
	resp, _ := rawRequest(t, gw.Addr, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 431 {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
	if up.calls.Load() != 0 {
		t.Fatal("the upstream was called")
	}
}

// TestUpstreamConnectionClose checks that an upstream closing its
// connection after each response closes neither the client's connection nor
// loses the gateway's own headers: the client sends three requests on one
// connection and gets three answers, each with its RateLimit header.
func TestUpstreamConnectionClose(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: 1000, period: 1s, key: ip}
`, up.URL))
	conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	br := bufio.NewReader(conn)
	for i := 0; i < 3; i++ {
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" || resp.Close {
			t.Fatalf("request %d: status %d, body %q, close %v; want 200, \"ok\", kept open", i, resp.StatusCode, b, resp.Close)
		}
		if resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("request %d: RateLimit headers missing: %v", i, resp.Header)
		}
	}
	if n := up.calls.Load(); n != 3 {
		t.Errorf("upstream calls %d, want 3", n)
	}
}

// Hop-by-hop headers are stripped from an upstream's response whatever the
// case of their names.
func TestLowerCaseHopHeadersStripped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 4096)
				if _, err := c.Read(buf); err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nkeep-alive: timeout=5\r\nconnection: x-secret\r\nx-secret: 1\r\nproxy-authenticate: Basic\r\nx-kept: yes\r\n\r\nok")
			}(c)
		}
	}()
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, ln.Addr().String()))
	resp, body := rawRequest(t, gw.Addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	for _, h := range []string{"Keep-Alive", "X-Secret", "Proxy-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s: %q was forwarded", h, v)
		}
	}
	if resp.Header.Get("X-Kept") != "yes" {
		t.Error("an end-to-end header was lost")
	}
}

// TestStaleUpstreamConnection checks what happens when a target closes a
// pooled keep-alive connection (as servers do with idle ones). An event
// loop sees the close as it happens and drops the connection from its
// pool; the goroutine engine looks before sending on a pooled connection
// and takes another when the close has arrived. Every request then goes
// out on a live one. Should a request still meet the close (it arrives as
// the request goes out), an idempotent request is sent again on a new
// connection, unseen by the client; a POST, which the target might have
// processed, is not: it gets 502 and is never sent twice.
func TestStaleUpstreamConnection(t *testing.T) {
	for _, engine := range []string{"goroutine", "loop"} {
		t.Run(engine, func(t *testing.T) {
			up := startUpstream(t, "up", nil)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], idle_timeout: 1h}
routes:
  - name: all
    upstream: up
`, engine, up.URL))
			c := newClient(t)
			for i, tc := range []struct {
				method string
				code   int
			}{
				{"GET", 200},
				{"HEAD", 200},
				{"PUT", 200},
				{"POST", 502},
			} {
				if r := do(t, c, "GET", gw.URL+"/warm", nil, nil); r.Code != 200 {
					t.Fatalf("warm-up %d: %d", i, r.Code)
				}
				up.CloseClientConnections() // the pooled connection is now closed by the target
				before := up.calls.Load()
				r := do(t, c, tc.method, gw.URL+"/", nil, strings.NewReader("x"))
				want := tc.code
				if r.Code == 200 {
					want = 200 // the close was seen before sending
				}
				if r.Code != want {
					t.Errorf("%s on a closed pooled connection: %d, want %d", tc.method, r.Code, want)
				}
				if n := up.calls.Load() - before; n > 1 {
					t.Errorf("%s reached the target %d times", tc.method, n)
				}
			}
		})
	}
}

// TestUpstreamConnectionReuse checks that a response's connection goes back
// to the pool once its body was sent whole, however the body was framed
// (small, read whole; large, streamed; chunked, with or without trailers),
// and that a connection the target closes is not.
func TestUpstreamConnectionReuse(t *testing.T) {
	large := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB: streamed
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		body  string
		reuse bool
	}{
		{"small", func(w http.ResponseWriter) { io.WriteString(w, "small") }, "small", true},
		{"large", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", strconv.Itoa(len(large)))
			io.WriteString(w, large)
		}, large, true},
		{"chunked", func(w http.ResponseWriter) {
			io.WriteString(w, "part 1, ")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part 2")
		}, "part 1, part 2", true},
		{"trailer", func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "with ")
			w.(http.Flusher).Flush()
			io.WriteString(w, "trailer")
			w.Header().Set("X-Sum", "42")
		}, "with trailer", true},
		{"close", func(w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Length", strconv.Itoa(len(large)))
			io.WriteString(w, large)
		}, large, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var peers []string
			up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				peers = append(peers, r.RemoteAddr)
				mu.Unlock()
				tc.write(w)
			})
			gw := proxyTo(t, up)
			c := newClient(t)
			for i := 0; i < 2; i++ {
				if r := get(t, c, gw.URL+"/"); r.Code != 200 || r.Body != tc.body {
					t.Fatalf("request %d: %d, body of %d bytes, want 200 and %d bytes", i, r.Code, len(r.Body), len(tc.body))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if reused := peers[0] == peers[1]; reused != tc.reuse {
				t.Errorf("connection reused = %v, want %v (peers %v)", reused, tc.reuse, peers)
			}
		})
	}
}

// A target that closes before the end of a body it announced must not
// leave the client with a body that looks whole, nor its connection in the
// pool.
func TestUpstreamTruncatedBody(t *testing.T) {
	var calls atomic.Int64
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			io.WriteString(w, "fine")
			return
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", 200<<10, strings.Repeat("x", 100<<10))
		bw.Flush()
		conn.Close()
	})
	gw := proxyTo(t, up)
	c := newClient(t)
	if r, err := tryDo(c, "GET", gw.URL+"/", nil, nil); err == nil && len(r.Body) == 200<<10 {
		t.Errorf("truncated body arrived whole: %d bytes", len(r.Body))
	}
	if r := get(t, c, gw.URL+"/"); r.Code != 200 || r.Body != "fine" {
		t.Errorf("next request: %d %q, want 200 \"fine\"", r.Code, r.Body)
	}
}
