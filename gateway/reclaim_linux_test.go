package gateway_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// closedByGateway fails unless the gateway closed h (its next read ends
// without a byte, before the test's deadline).
func (h *heldConn) closedByGateway(t *testing.T, what string) {
	t.Helper()
	if b, err := h.br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %q, %v; want it closed by the gateway", what, b, err)
	}
}

// again sends h another GET and reads its answer (200).
func (h *heldConn) again(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(h, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h.answered(t)
}

// awaitIdle waits until n of gw's connections are idle between requests.
func awaitIdle(t *testing.T, gw *testGateway, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d connections idle", n), func() bool { return gateway.IdleConns(gw.Gateway) == n })
}

// wantMetric fails unless gw's metrics have the line line.
func wantMetric(t *testing.T, gw *testGateway, line string) {
	t.Helper()
	if m := gw.metricsText(t); !strings.Contains(m, line+"\n") {
		t.Errorf("metrics lack %s:\n%s", line, grepLines(m, "sluice_connection"))
	}
}

// checkReclaim, with max_connections 2 on addr (over TLS with ca's roots
// when ca is not nil): a connection that comes while both places are
// held by connections idle between requests is served in the place of
// the one idle longest, which is closed; one whose next request is
// arriving is never closed for it, and its request is served.
func checkReclaim(t *testing.T, gw *testGateway, addr string, ca *testpki.CA) {
	a := dialHeld(t, addr, ca)
	a.answered(t)
	awaitIdle(t, gw, 1)
	b := dialHeld(t, addr, ca)
	b.answered(t)
	awaitIdle(t, gw, 2) // a is idle longest
	c := dialHeld(t, addr, ca)
	c.answered(t)
	a.closedByGateway(t, "the connection idle longest")
	b.again(t)
	awaitIdle(t, gw, 2)
	// c is idle longest now; b's next request arrives, slowly.
	b.hold(t)
	awaitIdle(t, gw, 1)
	d := dialHeld(t, addr, ca)
	d.answered(t)
	c.closedByGateway(t, "the idle connection")
	if _, err := io.WriteString(b, "Host: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b.answered(t) // its request, arriving, was not cut
	if w := gateway.ConnWaits(gw.Gateway); w != 2 {
		t.Errorf("%d waits, want 2", w)
	}
	wantMetric(t, gw, "sluice_connections_reclaimed_total 2")
	b.Close()
	d.Close()
	awaitOpen(t, gw, 0)
}

// TestMaxConnectionsReclaimIdle: at server.max_connections, the
// plaintext listener's new connection takes the place of the connection
// idle longest between requests, on both engines.
func TestMaxConnectionsReclaimIdle(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := serverGateway(t, engine, "max_connections: 2", okUpstream(t).URL)
		checkReclaim(t, gw, gw.Addr, nil)
	})
}

// TestMaxConnectionsReclaimIdleTLS: the same on the TLS listener.
func TestMaxConnectionsReclaimIdleTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 2", certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		checkReclaim(t, gw, serveTLS(t, gw), ca)
	})
}

// TestMaxConnectionsReclaimTurningIdle: a connection that waits for a
// place while none is idle takes the place of the first that turns idle,
// once that one's answer is sent whole, on both engines and listeners.
func TestMaxConnectionsReclaimTurningIdle(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up, release := firstWaitsUpstream(t)
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 1", certList(ca.Server("localhost", "127.0.0.1")), up.URL)
		addr := serveTLS(t, gw)
		a := dialHeld(t, gw.Addr, nil) // busy upstream
		eventually(t, "the first request upstream", func() bool { return up.calls.Load() == 1 })
		c := dialHeld(t, addr, ca)
		awaitWaits(t, gw, 1)
		close(release)
		a.answered(t) // whole
		a.closedByGateway(t, "the connection turned idle")
		c.answered(t)
		wantMetric(t, gw, "sluice_connections_reclaimed_total 1")
		c.Close()
		awaitOpen(t, gw, 0)
	})
}

// checkPerClient, with max_connections_per_client 2 on addr (over TLS
// with ca's roots when ca is not nil): a client's third connection is
// closed at its accept, unanswered, while another client is served; once
// one of the first two closes, the client's next one is served.
func checkPerClient(t *testing.T, gw *testGateway, addr string, ca *testpki.CA, refused int) {
	a, b := dialHeld(t, addr, ca), dialHeld(t, addr, ca)
	a.answered(t)
	b.answered(t)
	c := dialHeld(t, addr, ca)
	c.closedByGateway(t, "the client's third connection")
	other := dialHeldFrom(t, "127.0.0.2", addr, ca)
	other.answered(t)
	wantMetric(t, gw, fmt.Sprintf("sluice_connections_refused_total %d", refused))
	a.Close()
	awaitOpen(t, gw, 2)
	d := dialHeld(t, addr, ca)
	d.answered(t)
	for _, h := range []*heldConn{b, c, other, d} {
		h.Close()
	}
	awaitOpen(t, gw, 0)
}

// TestMaxConnectionsPerClient: past server.max_connections_per_client a
// client's new connection is closed at accept, on both listeners and
// engines; the other clients' are served.
func TestMaxConnectionsPerClient(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections_per_client: 2", certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		addr := serveTLS(t, gw)
		t.Run("plain", func(t *testing.T) { checkPerClient(t, gw, gw.Addr, nil, 1) })
		t.Run("tls", func(t *testing.T) { checkPerClient(t, gw, addr, ca, 2) })
	})
}

// TestMaxConnectionsAcceptDuringShutdown: a connection the loops take
// once they drain for Shutdown (accepted just before it began) is closed
// and its place freed at once, rather than kept open until its
// read_header_timeout or Shutdown's end.
func TestMaxConnectionsAcceptDuringShutdown(t *testing.T) {
	gw := serverGateway(t, "loop", "read_header_timeout: 1h", okUpstream(t).URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the loops to start", func() bool { return gateway.LoopsStarted(gw.Gateway) }) // Serve runs on its own goroutine
	gateway.EnrollWhileDraining(gw.Gateway, nc)
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if b, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d, %v; want the connection closed", b, err)
	}
	awaitOpen(t, gw, 0)
}

// firstWaitsUpstream starts an upstream that answers "ok", the first
// request once release is closed.
func firstWaitsUpstream(t *testing.T) (*upstream, chan struct{}) {
	release := make(chan struct{})
	var calls atomic.Int64
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release // the first request waits
		}
		io.WriteString(w, "ok")
	})
	return up, release
}
