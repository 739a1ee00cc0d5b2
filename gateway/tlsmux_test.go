package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// dialTLS opens a TLS connection to addr that asks for protos by ALPN
// (none: no ALPN), closed when the test ends.
func dialTLS(t testing.TB, addr string, roots *x509.CertPool, protos ...string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: waitLimit}, Config: &tls.Config{RootCAs: roots, NextProtos: protos}}
	nc, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*tls.Conn)
	_ = c.SetDeadline(time.Now().Add(2 * waitLimit))
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestTLSHandshakeBounded has a client open a TCP connection to the TLS
// listener and send nothing: the gateway closes it once
// server.read_header_timeout has passed, and meanwhile serves other
// clients (the stalled handshake holds no one up), on each engine, with
// and without ALPN.
func TestTLSHandshakeBounded(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s, read_header_timeout: 300ms}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("127.0.0.1")), up.URL))
		addr := serveTLS(t, tg)
		stalled, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer stalled.Close()
		for _, protos := range [][]string{nil, {"http/1.1"}} {
			c, br := dialTLS(t, addr, ca.Pool, protos...)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("ALPN %v, while a handshake stalls: %v", protos, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Errorf("ALPN %v: %d %q, want 200 \"ok\"", protos, resp.StatusCode, body)
			}
		}
		_ = stalled.SetReadDeadline(time.Now().Add(waitLimit))
		n, err := stalled.Read(make([]byte, 1))
		if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a client that never starts its handshake: read %d bytes, %v; want its connection closed", n, err)
		}
	})
}

// TestTLSClientLeaves has a client of the TLS listener's HTTP/1.1 close
// its connection while its request waits for the target: the attempt is
// cut (the target's connection closed), as on the plaintext listener, on
// each engine.
func TestTLSClientLeaves(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		arrived, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
			case <-time.After(waitLimit):
			}
		})
		tg := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("127.0.0.1")), up.URL, ""))
		addr := serveTLS(t, tg)
		c, _ := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the request never reached the target")
		}
		c.Close()
		select {
		case <-cancelled:
		case <-time.After(waitLimit):
			t.Fatal("the target's connection is still open after the client left")
		}
	})
}

// TestShutdownWithTLSConnections shuts a gateway down while its TLS
// listener has an HTTP/1.1 request in flight, an idle HTTP/1.1
// connection, an idle HTTP/2 one and a handshake that stalls (with a
// read_header_timeout far beyond the test): the request in flight is
// answered, the other connections are closed, Shutdown returns nil, and
// nothing is left running (the start helpers check), on each engine.
func TestShutdownWithTLSConnections(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		g := newGate(1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/held" {
				g.wait(r)
			}
			_, _ = io.WriteString(w, "ok")
		})
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s, read_header_timeout: 1h, idle_timeout: 1h}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("127.0.0.1")), up.URL))
		addr := serveTLS(t, tg)

		idle, idleR := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.ReadResponse(idleR, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("first request on the idle connection: %v %v", resp, err)
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		h2 := protoClient(t, "h2", ca.Pool, "")
		if r := get(t, h2, "https://"+addr+"/"); r.Code != 200 {
			t.Fatalf("HTTP/2 request: %d %q", r.Code, r.Body)
		}
		stalled, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer stalled.Close()
		busy, busyR := dialTLS(t, addr, ca.Pool, "http/1.1")
		if _, err := io.WriteString(busy, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		g.awaitArrivals(t, 1)

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			tg.stop(t)
		}()
		// Shutdown closes the idle connection and ends the handshake,
		// then waits for the request in flight.
		for _, c := range []net.Conn{idle, stalled} {
			_ = c.SetReadDeadline(time.Now().Add(waitLimit))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("an idle connection at shutdown: read %d bytes, %v; want it closed", n, err)
			}
		}
		g.open()
		resp, err := http.ReadResponse(busyR, nil)
		if err != nil {
			t.Fatalf("the request in flight at shutdown: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("the request in flight at shutdown: %d %q, want 200 \"ok\"", resp.StatusCode, body)
		}
		select {
		case <-stopped:
		case <-time.After(waitLimit):
			t.Fatal("Shutdown did not return")
		}
		if c, err := net.DialTimeout("tcp", addr, waitLimit); err == nil {
			c.Close()
			t.Error("the TLS listener still accepts after Shutdown")
		}
	})
}

// TestTLSIgnoresH2CUpgrade sends a request asking to upgrade to h2c over
// the TLS listener's HTTP/1.1, where h2c has no place (RFC 7540 section
// 3.2): it is answered on HTTP/1.1, as a request whose Upgrade the
// gateway does not take, on each engine.
func TestTLSIgnoresH2CUpgrade(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		tg := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("127.0.0.1")), up.URL, ""))
		c, br := dialTLS(t, serveTLS(t, tg), ca.Pool, "http/1.1")
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.ProtoMajor != 1 || string(body) != "ok" {
			t.Errorf("%s %d %q, want HTTP/1.1 200 \"ok\"", resp.Proto, resp.StatusCode, body)
		}
	})
}

// TestTLSPlainHTTPAnswered sends a plaintext HTTP request to the TLS
// listener: the gateway answers 400 and closes, as net/http's and nginx's
// TLS listeners do, so that the client learns its mistake (the connection
// was closed without a word), and the upstream never sees it.
func TestTLSPlainHTTPAnswered(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, certList(ca.Server("127.0.0.1")), up.URL))
		c, err := net.DialTimeout("tcp", serveTLS(t, tg), waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a plaintext request to the TLS listener: %v, want a 400", err)
		}
		_, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
		if n, err := br.ReadByte(); err == nil {
			t.Errorf("the connection stayed open: read %q", n)
		}
		if n := up.calls.Load(); n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
	})
}

// TestTLSHandshakesCounted lets the TLS listener run one handshake at a
// time and holds that one with a client that never starts it: a second
// client's handshake waits (its connection in the listen queue) until the
// first client leaves, then completes and is served. (Every connection got
// a handshake goroutine at once: a flood of connections held as many
// goroutines, and their signatures, as it sent, for read_header_timeout.)
func TestTLSHandshakesCounted(t *testing.T) {
	gateway.SetMaxHandshakes(t, 1)
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	tg := startGateway(t, parseConfig(t, `
server: {read_header_timeout: 1m}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, certList(ca.Server("127.0.0.1")), up.URL))
	addr := serveTLS(t, tg)
	stalled, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	type dialed struct {
		c   *tls.Conn
		err error
	}
	second := make(chan dialed, 1)
	go func() {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: waitLimit}, "tcp", addr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
		second <- dialed{c, err}
	}()
	select {
	case d := <-second:
		if d.c != nil {
			d.c.Close()
		}
		t.Fatalf("a second handshake ended (%v) while the only one allowed was held", d.err)
	case <-time.After(200 * time.Millisecond): // a lower bound: a slow machine only waits longer
	}
	stalled.Close()
	var d dialed
	select {
	case d = <-second:
	case <-time.After(waitLimit):
		t.Fatal("the second handshake did not end once the first client left")
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.c.Close()
	_ = d.c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(d.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(d.c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the second client: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
}
