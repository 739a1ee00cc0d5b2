package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// loopTLSRoutes are the routes of the tests of TLS on the loops: "all" to
// the echo upstream, and "shared", which coalesces (a route the loops
// hand over).
const loopTLSRoutes = `
  - {name: shared, match: {path_prefix: /c}, upstream: up, policies: {coalesce: true}}
  - {name: all, upstream: up}
`

// loopTLSGateway starts a gateway on engine with a TLS listener, whose
// upstream answers "METHOD PATH PROTO LEN" (X-Forwarded-Proto, the body's
// length), or a body of n bytes for /big/n; extra is YAML for the server
// section. It returns the gateway, the TLS listener's address and the CA.
func loopTLSGateway(t *testing.T, engine, extra string) (*testGateway, string, *testpki.CA) {
	t.Helper()
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if n := 0; strings.HasPrefix(r.URL.Path, "/big/") {
			fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/big/"), &n)
			w.Write(bytes.Repeat([]byte("b"), n))
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %d", r.Method, r.URL.Path, r.Header.Get("X-Forwarded-Proto"), len(b))
	})
	cfg := parseConfig(t, `
server: {engine: %s%s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:`+loopTLSRoutes, engine, extra, certList(ca.Server("localhost", "127.0.0.1")), up.URL)
	tg := startGateway(t, cfg)
	return tg, serveTLS(t, tg), ca
}

// readResponse reads one response and its body from br.
func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading a body: %v", err)
	}
	return resp, string(b)
}

// TestLoopsServeTLS checks that the loops serve the TLS listener's
// HTTP/1.1 on server.engine loop, and only there: requests with and
// without bodies on one connection, the upstream told https, a large
// response that streams from a goroutine and the request after it on the
// same connection, back on its loop (nothing handed over).
func TestLoopsServeTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		tg, addr, ca := loopTLSGateway(t, engine, "")
		c := protoClient(t, "h1", ca.Pool, "")
		for i := range 3 {
			resp, err := c.Post("https://"+addr+"/p", "text/plain", strings.NewReader(strings.Repeat("x", i*1000)))
			if err != nil {
				t.Fatal(err)
			}
			if body, want := readAll(t, resp), fmt.Sprintf("POST /p https %d", i*1000); body != want {
				t.Errorf("request %d: %q, want %q", i, body, want)
			}
			resp, err = c.Get("https://" + addr + "/big/300000")
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp); body != strings.Repeat("b", 300000) {
				t.Errorf("streamed response %d: %d bytes, want 300000 b", i, len(body))
			}
		}
		served, handed := gateway.LoopTLSConns(tg.Gateway), gateway.LoopHandovers(tg.Gateway)
		if engine == "loop" && (served != 1 || handed != 0) {
			t.Errorf("the loops took %d TLS connections and handed %d over, want 1 and 0", served, handed)
		}
		if engine == "goroutine" && served != 0 {
			t.Errorf("the goroutine engine's loops took %d TLS connections", served)
		}
	})
}

// TestLoopTLSPipelinedAndSplit sends requests pipelined in one record,
// then a request cut into records of a few bytes, whose records are cut
// into writes of a few bytes (so that the loop reads records in pieces),
// on each engine.
func TestLoopTLSPipelinedAndSplit(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, addr, ca := loopTLSGateway(t, engine, "")
		c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"GET /1 https 0", "POST /2 https 3", "GET /3 https 0"} {
			if _, body := readResponse(t, br); body != want {
				t.Errorf("pipelined: %q, want %q", body, want)
			}
		}

		nc, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		sc := tls.Client(&trickleConn{Conn: nc, piece: 3}, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
		defer sc.Close()
		_ = sc.SetDeadline(time.Now().Add(waitLimit))
		req := "POST /split HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"
		for i := 0; i < len(req); i += 7 {
			if _, err := io.WriteString(sc, req[i:min(i+7, len(req))]); err != nil {
				t.Fatal(err)
			}
		}
		if _, body := readResponse(t, bufio.NewReader(sc)); body != "POST /split https 10" {
			t.Errorf("split request: %q", body)
		}
	})
}

// TestLoopTLSPipelinedBurst sends 100 pipelined requests, each in a
// record of its own, in one write: first with the client's Finished (the
// handshake may read some of them), then on the open connection; each
// burst is answered in order, on each engine.
func TestLoopTLSPipelinedBurst(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, addr, ca := loopTLSGateway(t, engine, "")
		nc, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		hc := &holdConn{Conn: nc}
		sc := tls.Client(hc, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
		defer sc.Close()
		_ = sc.SetDeadline(time.Now().Add(waitLimit))
		if err := sc.Handshake(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(sc)
		for burst := range 2 {
			for i := range 100 {
				if _, err := fmt.Fprintf(sc, "GET /%d/%d HTTP/1.1\r\nHost: x\r\n\r\n", burst, i); err != nil {
					t.Fatal(err)
				}
			}
			if err := hc.release(); err != nil {
				t.Fatal(err)
			}
			hc.held = hc.held[:0]
			for i := range 100 {
				if _, body := readResponse(t, br); body != fmt.Sprintf("GET /%d/%d https 0", burst, i) {
					t.Fatalf("burst %d, answer %d: %q", burst, i, body)
				}
			}
		}
	})
}

// trickleConn writes what it is given in pieces of piece bytes, one
// write each.
type trickleConn struct {
	net.Conn
	piece int
}

func (c *trickleConn) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += c.piece {
		if _, err := c.Conn.Write(p[i:min(i+c.piece, len(p))]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// holdConn passes its first write (the ClientHello) and holds the next
// ones until release sends them in one write.
type holdConn struct {
	net.Conn
	n    int
	held []byte
}

func (c *holdConn) Write(p []byte) (int, error) {
	if c.n++; c.n == 1 {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	return len(p), nil
}

func (c *holdConn) release() error {
	_, err := c.Conn.Write(c.held)
	return err
}

// TestLoopTLSRequestWithFinished has a TLS 1.3 client send its first
// request in the same write as its Finished: the handshake may read the
// request's records too, and the loop must serve them although no read
// event announces them.
func TestLoopTLSRequestWithFinished(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, addr, ca := loopTLSGateway(t, engine, "")
		for i := range 5 {
			nc, err := net.DialTimeout("tcp", addr, waitLimit)
			if err != nil {
				t.Fatal(err)
			}
			hc := &holdConn{Conn: nc}
			sc := tls.Client(hc, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
			_ = sc.SetDeadline(time.Now().Add(waitLimit))
			if err := sc.Handshake(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(sc, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if err := hc.release(); err != nil {
				t.Fatal(err)
			}
			if _, body := readResponse(t, bufio.NewReader(sc)); body != "GET /first https 0" {
				t.Errorf("connection %d: %q", i, body)
			}
			sc.Close()
		}
	})
}

// TestLoopTLSClientEndsItsSide has clients end their sending side after
// a request, by close_notify (the TLS connection's CloseWrite) or by a
// TCP half-close: each is answered, on each engine.
func TestLoopTLSClientEndsItsSide(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, addr, ca := loopTLSGateway(t, engine, "")
		for _, how := range []string{"close_notify", "tcp"} {
			c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
			if _, err := io.WriteString(c, "GET /"+how+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			var err error
			if how == "close_notify" {
				err = c.CloseWrite()
			} else {
				err = c.NetConn().(*net.TCPConn).CloseWrite()
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, body := readResponse(t, br); body != "GET /"+how+" https 0" {
				t.Errorf("%s: %q", how, body)
			}
		}
	})
}

// TestLoopTLSHandsOver sends the loops TLS requests they hand over to the
// goroutine engine: Expect: 100-continue, a chunked body, a coalescing
// route, a WebSocket; each works, on each engine, and the requests after
// them on the same connection too.
func TestLoopTLSHandsOver(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		tg, addr, ca := loopTLSGateway(t, engine, "")
		c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "POST /expect HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("Expect: 100-continue: %q %v", line, err)
		}
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "body"+
			"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"+
			"GET /c/shared HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /after HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"POST /expect https 4", "POST /chunked https 5", "GET /c/shared https 0", "GET /after https 0"} {
			if _, body := readResponse(t, br); body != want {
				t.Errorf("%q, want %q", body, want)
			}
		}
		if engine == "loop" && gateway.LoopHandovers(tg.Gateway) == 0 {
			t.Error("the loops handed nothing over")
		}

		ws := startWSUpstream(t)
		wg := startGateway(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1h}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), ws.URL))
		wc, resp, err := dialWSVia(t, protoClient(t, "h1", ca.Pool, ""), "https://"+serveTLS(t, wg)+"/ws")
		if err != nil {
			t.Fatalf("WebSocket over TLS: %v %+v", err, resp)
		}
		if h := <-ws.header; h.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("WebSocket: X-Forwarded-Proto %q, want https", h.Get("X-Forwarded-Proto"))
		}
		for i := range 20 {
			echo(t, wc, websocket.MessageText, []byte(strings.Repeat(fmt.Sprint(i), 1000)))
		}
		wc.Close(websocket.StatusNormalClosure, "")
	})
}

// TestLoopTLSFloodCloses has a client send more than a loop keeps of
// pipelined requests while its request waits for the target: its
// connection closes (as on the plaintext listener), on each engine's
// loops; the goroutine engine reads one request at a time and is not
// tested here.
func TestLoopTLSFloodCloses(t *testing.T) {
	ca := testpki.NewCA(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	tg := startGateway(t, parseConfig(t, tlsGatewayConfig, "loop", certList(ca.Server("127.0.0.1")), up.URL, ""))
	c, br := dialTLS(t, serveTLS(t, tg), ca.Pool, "http/1.1")
	if _, err := io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-arrived
	flood := bytes.Repeat([]byte("GET /more HTTP/1.1\r\nHost: x\r\n\r\n"), 3<<20/32)
	_, _ = c.Write(flood) // fails once the gateway closes
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection of a client that floods is still open")
	}
	once.Do(func() { close(release) })
}

// TestLoopTLSPartialRequestLeaves has a client send part of a request's
// head and close: the loop drops the connection, and serves the next.
func TestLoopTLSPartialRequestLeaves(t *testing.T) {
	_, addr, ca := loopTLSGateway(t, "loop", "")
	c, _ := dialTLS(t, addr, ca.Pool, "http/1.1")
	if _, err := io.WriteString(c, "GET /half HTTP/1.1\r\nHo"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
	if _, err := io.WriteString(c, "GET /whole HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, body := readResponse(t, br); body != "GET /whole https 0" {
		t.Errorf("%q", body)
	}
}

// TestLoopTLSReadHeaderTimeout has a client send part of a request's head
// and stall: the loop closes its connection once
// server.read_header_timeout has passed.
func TestLoopTLSReadHeaderTimeout(t *testing.T) {
	_, addr, ca := loopTLSGateway(t, "loop", ", read_header_timeout: 200ms")
	c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
	if _, err := io.WriteString(c, "GET /stall HTTP/1.1\r\nHo"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := br.ReadByte(); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stalled request was answered")
		}
	case <-ctx.Done():
		t.Fatal("a stalled request's connection is still open")
	}
}

// TestLoopTLSLimits checks the plaintext listener's limits on the TLS
// listener's HTTP/1.1, after decryption: a head over
// server.max_header_bytes is refused (431, or 400) and a body over
// server.max_body_bytes too (413), on each engine.
func TestLoopTLSLimits(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, addr, ca := loopTLSGateway(t, engine, ", max_header_bytes: 4096, max_body_bytes: 1000")
		c, br := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "GET /long HTTP/1.1\r\nHost: x\r\nX-Long: "+strings.Repeat("l", 8000)+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readResponse(t, br); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a head over max_header_bytes: %d, want 431 or 400", resp.StatusCode)
		}
		c, br = dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n"+strings.Repeat("b", 2000)); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readResponse(t, br); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over max_body_bytes: %d, want 413", resp.StatusCode)
		}
	})
}
