package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// recordConn is a client's socket under its tls.Conn that keeps, while
// holding, what tls.Conn writes (a record per write) instead of sending
// it, so that a test sends records cut where it likes.
type recordConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	kept    [][]byte // the records kept
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.kept = append(c.kept, append([]byte(nil), p...))
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// TestMaxConnectionsReclaimHalfRecord: a connection whose next request
// has begun to arrive, in a TLS record not whole yet (pipelined behind
// the last one, in the same segment), is not closed to make room at
// server.max_connections: its request is served, on both engines; the
// waiting connection takes its place once it is idle.
func TestMaxConnectionsReclaimHalfRecord(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		gw := tlsGateway(t, engine, "max_connections: 1", certList(ca.Server("localhost", "127.0.0.1")), okUpstream(t).URL)
		addr := serveTLS(t, gw)
		raw, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(waitLimit))
		rc := &recordConn{Conn: raw}
		tc := tls.Client(rc, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		rc.holding = true
		rc.mu.Unlock()
		for range 2 {
			if _, err := io.WriteString(tc, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		rc.mu.Lock()
		if len(rc.kept) != 2 {
			t.Fatalf("%d records written, want 2", len(rc.kept))
		}
		first, second := rc.kept[0], rc.kept[1]
		rc.mu.Unlock()
		// The first request, and the first bytes of the second's record.
		if _, err := raw.Write(append(first, second[:3]...)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(tc)
		readOK(t, br, "the first request")
		other := dialHeld(t, addr, ca) // waits for a place
		awaitWaits(t, gw, 1)
		if _, err := raw.Write(second[3:]); err != nil {
			t.Fatal(err)
		}
		readOK(t, br, "the request whose record was arriving")
		other.answered(t) // in its place, once it is idle
		tc.Close()
		other.Close()
		awaitOpen(t, gw, 0)
	})
}

// readOK reads an answer from br and fails unless it is 200.
func readOK(t *testing.T, br *bufio.Reader, what string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", what, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: answer %d, want 200", what, resp.StatusCode)
	}
}

// TestMaxConnectionsReclaimPipelined: a connection that turns idle while
// a connection waits for a place, with its next request read already
// (pipelined), serves that request; the place goes to the waiting
// connection once it is idle with nothing read, rather than at its
// idle_timeout, on both engines.
func TestMaxConnectionsReclaimPipelined(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up, release := firstWaitsUpstream(t)
		gw := serverGateway(t, engine, "max_connections: 1, idle_timeout: 1h", up.URL)
		a, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		_ = a.SetDeadline(time.Now().Add(waitLimit))
		const get = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"
		if _, err := io.WriteString(a, get+get); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the first request upstream", func() bool { return up.calls.Load() == 1 })
		other := dialHeld(t, gw.Addr, nil)
		awaitWaits(t, gw, 1)
		close(release)
		br := bufio.NewReader(a)
		readOK(t, br, "the first request")
		readOK(t, br, "the pipelined request")
		other.answered(t) // in a's place
		if b, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read %q, %v; want the connection idle longest closed", b, err)
		}
		other.Close()
		awaitOpen(t, gw, 0)
	})
}

// TestMaxConnectionsReclaimAfterStream: a connection idle after an
// answer streamed to it (on the loops, from a goroutine, and back on its
// loop) is closed to make room as any idle one, on both engines.
func TestMaxConnectionsReclaimAfterStream(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush() // chunked: streamed
		})
		gw := serverGateway(t, engine, "max_connections: 1, idle_timeout: 1h", up.URL)
		a := dialHeld(t, gw.Addr, nil)
		a.answered(t)
		awaitIdle(t, gw, 1)
		other := dialHeld(t, gw.Addr, nil)
		other.answered(t)
		a.closedByGateway(t, "the connection idle after its stream")
		wantMetric(t, gw, "sluice_connections_reclaimed_total 1")
		other.Close()
		awaitOpen(t, gw, 0)
	})
}
