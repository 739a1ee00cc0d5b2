package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// heldConn is a client connection of these tests: dialed, and holding
// its place under server.max_connections once the gateway served it.
type heldConn struct {
	net.Conn
	br   *bufio.Reader
	sent chan error // the GET's write (the TLS handshake first)
}

// dialHeld dials addr (over TLS with ca's roots when ca is not nil) and
// sends a GET from a goroutine (a TLS handshake waits for the gateway to
// serve the connection), without reading its answer (see answered).
func dialHeld(t *testing.T, addr string, ca *testpki.CA) *heldConn {
	t.Helper()
	return dialHeldFrom(t, "127.0.0.1", addr, ca)
}

// dialHeldFrom is dialHeld from the loopback address from.
func dialHeldFrom(t *testing.T, from, addr string, ca *testpki.CA) *heldConn {
	t.Helper()
	d := net.Dialer{Timeout: waitLimit, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if ca != nil {
		c = tls.Client(c, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	}
	h := &heldConn{Conn: c, br: bufio.NewReader(c), sent: make(chan error, 1)}
	go func() {
		_, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		h.sent <- err
	}()
	t.Cleanup(func() {
		c.Close()
		<-h.sent
	})
	return h
}

// answered reads the answer to the GET dialHeld sent, and fails unless it
// is 200.
func (h *heldConn) answered(t *testing.T) {
	t.Helper()
	if err := <-h.sent; err != nil {
		t.Fatalf("sending a GET: %v", err)
	}
	h.sent <- nil // for the cleanup
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("answer %d, want 200", resp.StatusCode)
	}
}

// hold sends the first line of a GET's head, and no more: the connection
// is busy (its request arriving), not idle between requests, so it keeps
// its place under server.max_connections while others wait (an idle one
// would be closed to make room, see reclaim_linux_test.go).
func (h *heldConn) hold(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(h, "GET /x HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
}

// awaitOpen waits until n connections hold places under
// server.max_connections.
func awaitOpen(t *testing.T, gw *testGateway, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d connections open", n), func() bool { return gateway.OpenSlots(gw.Gateway) == n })
}

// awaitWaits waits until the gateway's listeners have waited for n
// connections past server.max_connections.
func awaitWaits(t *testing.T, gw *testGateway, n uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d waits", n), func() bool { return gateway.ConnWaits(gw.Gateway) == n })
}

func okUpstream(t *testing.T) *upstream {
	return startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// checkWaitsForSlot: with max_connections 2, two connections served and
// kept busy, a third is not served (its listener waits, and takes no
// other) until one of the two closes; then it is, and the count falls to
// zero once all close.
func checkWaitsForSlot(t *testing.T, gw *testGateway, addr string, ca *testpki.CA) {
	a, b := dialHeld(t, addr, ca), dialHeld(t, addr, ca)
	a.answered(t)
	b.answered(t)
	a.hold(t)
	b.hold(t)
	awaitOpen(t, gw, 2)
	c := dialHeld(t, addr, ca)
	awaitWaits(t, gw, 1)
	if n := gateway.OpenSlots(gw.Gateway); n != 2 {
		t.Fatalf("%d connections open past max_connections 2", n)
	}
	d, err := net.DialTimeout("tcp", addr, waitLimit) // queued in the kernel behind c
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a.Close()
	c.answered(t)
	awaitOpen(t, gw, 2)  // b and c; d waits, or took the place of c once c was idle
	awaitWaits(t, gw, 2) // c's, then d's, once its listener took it from the queue
	b.Close()
	c.Close()
	d.Close()
	awaitOpen(t, gw, 0)
	if m := gw.metricsText(t); !strings.Contains(m, "sluice_connection_waits_total 2") {
		t.Errorf("metrics lack sluice_connection_waits_total 2:\n%s", grepLines(m, "sluice_connection"))
	}
}

// TestMaxConnectionsWait: past server.max_connections the plaintext
// listener serves the connection it accepted only once another closes,
// on both engines.
func TestMaxConnectionsWait(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := serverGateway(t, engine, "max_connections: 2", okUpstream(t).URL)
		checkWaitsForSlot(t, gw, gw.Addr, nil)
	})
}

// TestMaxConnectionsWaitTLS: the TLS listener waits too, and its
// connections count with the plaintext listener's.
func TestMaxConnectionsWaitTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 2", certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		addr := serveTLS(t, gw)
		checkWaitsForSlot(t, gw, addr, ca)
		// One plaintext and one TLS connection fill the bound together.
		p, s := dialHeld(t, gw.Addr, nil), dialHeld(t, addr, ca)
		p.answered(t)
		s.answered(t)
		p.hold(t)
		s.hold(t)
		c := dialHeld(t, addr, ca)
		awaitWaits(t, gw, 3)
		if m := gw.metricsText(t); !strings.Contains(m, `sluice_connections_open{listener="plain"} 1`) ||
			!strings.Contains(m, `sluice_connections_open{listener="tls"} 1`) {
			t.Errorf("metrics:\n%s", grepLines(m, "sluice_connections_open"))
		}
		p.Close()
		c.answered(t)
		s.Close()
		c.Close()
		awaitOpen(t, gw, 0)
	})
}

// TestMaxConnectionsH2C: an h2c connection holds its place until it
// closes, on both engines.
func TestMaxConnectionsH2C(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := serverGateway(t, engine, "max_connections: 1", okUpstream(t).URL)
		first := protoClient(t, "h2c", nil, "")
		if r := get(t, first, gw.URL+"/x"); r.Code != 200 {
			t.Fatalf("h2c: %d", r.Code)
		}
		awaitOpen(t, gw, 1)
		c := dialHeld(t, gw.Addr, nil)
		awaitWaits(t, gw, 1)
		first.CloseIdleConnections()
		c.answered(t)
		c.Close()
		awaitOpen(t, gw, 0)
	})
}

// checkPathsRelease opens connections on addr (over TLS with ca's roots
// when ca is not nil) that each take one of the paths a connection may
// take between the engines, and checks that each one's place under
// server.max_connections is freed once it closes: after a client's
// close, after a refused head's lingering close, after a hand-over from
// the loops to the goroutine engine, after an HTTP/2 connection. ws, when
// not "", is the URL of a WebSocket route: a tunnel's place is freed too.
func checkPathsRelease(t *testing.T, gw *testGateway, engine, addr string, ca *testpki.CA, ws string) {
	t.Run("client close", func(t *testing.T) {
		c := dialHeld(t, addr, ca)
		c.answered(t)
		awaitOpen(t, gw, 1)
		c.Close()
		awaitOpen(t, gw, 0)
	})
	t.Run("refused head, lingering close", func(t *testing.T) {
		c := dialHeld(t, addr, ca)
		c.answered(t)
		io.WriteString(c, "POST /tier HTTP/1.1\r\nHost: x\r\nX-Tier: small\r\nX-Tier: big\r\nContent-Length: 5\r\n\r\nhello")
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !resp.Close {
			t.Fatalf("answer %d (close %v), want 400 that closes", resp.StatusCode, resp.Close)
		}
		if _, err := c.br.ReadByte(); err != io.EOF { // the gateway shut its side: it lingers
			t.Fatalf("after the 400: %v, want EOF", err)
		}
		c.Close()
		awaitOpen(t, gw, 0)
	})
	t.Run("handed to the goroutine engine", func(t *testing.T) {
		before := gateway.LoopHandovers(gw.Gateway)
		c := dialHeld(t, addr, ca)
		c.answered(t)
		io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		c.answered(t)
		if got := gateway.LoopHandovers(gw.Gateway); engine == "loop" && got != before+1 {
			t.Errorf("handovers %d, want %d", got, before+1)
		}
		c.Close()
		awaitOpen(t, gw, 0)
	})
	t.Run("HTTP/2", func(t *testing.T) {
		proto, url := "h2c", "http://"+addr
		var cl *http.Client
		if ca != nil {
			proto, url = "h2", "https://"+addr
			cl = protoClient(t, proto, ca.Pool, "localhost")
		} else {
			cl = protoClient(t, proto, nil, "")
		}
		if r := get(t, cl, url+"/x"); r.Code != 200 {
			t.Fatalf("%s: %d", proto, r.Code)
		}
		awaitOpen(t, gw, 1)
		cl.CloseIdleConnections()
		awaitOpen(t, gw, 0)
	})
	if ws == "" {
		return
	}
	t.Run("WebSocket tunnel", func(t *testing.T) {
		c := mustDialWS(t, ws)
		echo(t, c, websocket.MessageText, []byte("hi"))
		awaitOpen(t, gw, 1)
		c.Close(websocket.StatusNormalClosure, "")
		awaitOpen(t, gw, 0)
	})
	t.Run("h2c upgrade", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		awaitOpen(t, gw, 1)
		c.Close()
		awaitOpen(t, gw, 0)
	})
}

// pathsRoutes are the routes of checkPathsRelease's gateway: /tier has a
// route header (sent twice, refused), /ws goes to a WebSocket echo
// upstream, everything else to up.
const pathsRoutes = `
upstreams:
  up: {targets: ["%s"]}
  ws: {targets: ["%s"]}
routes:
  - {name: tier, match: {path_prefix: /tier, headers: {X-Tier: small}}, upstream: up}
  - {name: ws, match: {path_prefix: /ws}, upstream: ws}
  - {name: all, upstream: up}
`

// TestMaxConnectionsPathsRelease: a plaintext connection's place is freed
// once it closes, whichever path it took, on both engines; the count
// returns to zero each time.
func TestMaxConnectionsPathsRelease(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ws := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, "server: {engine: %s, max_connections: 4}"+pathsRoutes, engine, okUpstream(t).URL, ws.URL))
		checkPathsRelease(t, gw, engine, gw.Addr, nil, gw.URL+"/ws")
	})
}

// TestMaxConnectionsTLSPathsRelease: the same for the TLS listener's
// connections (HTTP/1.1 on the loops or the goroutine engine, HTTP/2 on
// the loops or net/http's engine).
func TestMaxConnectionsTLSPathsRelease(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := startGateway(t, parseConfig(t, "server: {engine: %s, max_connections: 4}\ntls: {listen: 127.0.0.1:0, certificates: %s}"+pathsRoutes,
			engine, certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL, "http://127.0.0.1:1"))
		checkPathsRelease(t, gw, engine, serveTLS(t, gw), ca, "")
	})
}

// TestMaxConnectionsIdleTimeout: a connection the gateway closes for
// idleness frees its place, and the connection that waited for it is
// served.
func TestMaxConnectionsIdleTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := serverGateway(t, engine, "max_connections: 1, idle_timeout: 100ms", okUpstream(t).URL)
		a := dialHeld(t, gw.Addr, nil)
		a.answered(t)
		if _, err := a.br.ReadByte(); err != io.EOF { // closed when idle
			t.Fatalf("idle connection: %v, want EOF", err)
		}
		awaitOpen(t, gw, 0)
		b := dialHeld(t, gw.Addr, nil)
		b.answered(t)
		b.Close()
		awaitOpen(t, gw, 0)
	})
}

// TestMaxConnectionsReload: a lower max_connections cuts no connection
// open (each is still served), and the connections after wait; a higher
// one serves a connection that waits at once.
func TestMaxConnectionsReload(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := okUpstream(t)
		gw := serverGateway(t, engine, "max_connections: 2", up.URL)
		a, b := dialHeld(t, gw.Addr, nil), dialHeld(t, gw.Addr, nil)
		a.answered(t)
		b.answered(t)
		if err := gw.Apply(oneRouteConfig(t, engine, "max_connections: 1", "", up.URL)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*heldConn{a, b} {
			io.WriteString(c, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
			c.answered(t)
			c.hold(t)
		}
		c := dialHeld(t, gw.Addr, nil)
		awaitWaits(t, gw, 1)
		if err := gw.Apply(oneRouteConfig(t, engine, "max_connections: 3", "", up.URL)); err != nil {
			t.Fatal(err)
		}
		c.answered(t)
		a.Close()
		b.Close()
		c.Close()
		awaitOpen(t, gw, 0)
	})
}

// TestMaxConnectionsShutdownWhileWaiting: Shutdown returns though a
// plaintext and a TLS connection wait past max_connections (their
// listeners wait for a place), and closes them unanswered.
func TestMaxConnectionsShutdownWhileWaiting(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 1", certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		addr := serveTLS(t, gw)
		// A connection that sent nothing yet holds the place: it is not
		// idle between requests, which would give its place, and
		// Shutdown closes it.
		a, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		awaitOpen(t, gw, 1)
		p, s := dialHeld(t, gw.Addr, nil), dialHeld(t, addr, ca)
		awaitWaits(t, gw, 2)
		gw.stop(t) // fails the test unless Shutdown and Serve return nil within waitLimit
		for _, c := range []*heldConn{p, s} {
			<-c.sent
			c.sent <- nil
			if resp, err := http.ReadResponse(c.br, nil); err == nil {
				t.Errorf("answered %d after shutdown", resp.StatusCode)
			}
		}
		awaitOpen(t, gw, 0)
	})
}

// TestShutdownWaitsForLingeringClose: Shutdown returns only once a
// connection lingering after a refused head has closed its socket (it
// stops the lingering): its place is free when Shutdown returns.
func TestShutdownWaitsForLingeringClose(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, "server: {engine: %s}"+pathsRoutes, engine, okUpstream(t).URL, "http://127.0.0.1:1"))
		c := dialHeld(t, gw.Addr, nil)
		c.answered(t)
		io.WriteString(c, "POST /tier HTTP/1.1\r\nHost: x\r\nX-Tier: small\r\nX-Tier: big\r\nContent-Length: 5\r\n\r\nhello")
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if _, err := c.br.ReadByte(); err != io.EOF { // the gateway shut its side: it lingers
			t.Fatalf("after the 400: %v, want EOF", err)
		}
		gw.stop(t)
		if n := gateway.OpenSlots(gw.Gateway); n != 0 {
			t.Errorf("%d connections open after Shutdown returned", n)
		}
	})
}

// TestMaxConnectionsSilentConnection: a new connection that sends nothing
// (over TLS: nothing after its handshake) is closed once
// server.read_header_timeout has passed since it was accepted, as the
// goroutine engine closes it, not after server.idle_timeout: it holds its
// place under max_connections no longer than a head may take to arrive.
// The loops waited idle_timeout for its first byte.
func TestMaxConnectionsSilentConnection(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 1, read_header_timeout: 100ms, idle_timeout: 1h",
			certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		addr := serveTLS(t, gw)
		for _, tc := range []struct {
			name string
			addr string
			ca   *testpki.CA
		}{{"plain", gw.Addr, nil}, {"tls", addr, ca}} {
			t.Run(tc.name, func(t *testing.T) {
				c, err := net.DialTimeout("tcp", tc.addr, waitLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(waitLimit))
				if tc.ca != nil {
					tlc := tls.Client(c, &tls.Config{RootCAs: tc.ca.Pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
					if err := tlc.Handshake(); err != nil {
						t.Fatal(err)
					}
					c = tlc
				}
				// Both engines close it unanswered.
				if got, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("silent connection: %v after %q; want it closed by the gateway within read_header_timeout", err, got)
				}
				awaitOpen(t, gw, 0)
				h := dialHeld(t, tc.addr, tc.ca) // its place is free
				h.answered(t)
				h.Close()
				awaitOpen(t, gw, 0)
			})
		}
	})
}
