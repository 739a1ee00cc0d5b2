package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// TestShutdownAfterStreamedAnswer: a keep-alive connection whose streamed
// answer (its head sent before shutdown began) ends while the gateway
// drains, and another request is still upstream, is closed, not kept
// waiting for its next request: Shutdown returns once the other request
// is answered. The loops gave it back to a draining loop, where it
// waited server.idle_timeout, holding Shutdown to its deadline and its
// place under server.max_connections.
func TestShutdownAfterStreamedAnswer(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		busy, streaming := newGate(1), newGate(1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/busy":
				busy.wait(r)
				io.WriteString(w, "busy")
			case "/stream":
				io.WriteString(w, strings.Repeat("a", 100<<10))
				w.(http.Flusher).Flush()
				streaming.wait(r)
				io.WriteString(w, "end")
			default:
				io.WriteString(w, "ok")
			}
		})
		defer busy.open()
		defer streaming.open()
		gw := serverGateway(t, engine, "idle_timeout: 1h", up.URL)
		dial := func() (net.Conn, *bufio.Reader) {
			c, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			_ = c.SetDeadline(time.Now().Add(waitLimit))
			return c, bufio.NewReader(c)
		}
		idle, idleBr := dial() // closed by the shutdown: draining has begun then
		io.WriteString(idle, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		mustAnswer(t, idleBr)
		a, aBr := dial()
		io.WriteString(a, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(aBr, nil)
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("streamed answer: %v %v", resp, err)
		}
		b, bBr := dial()
		io.WriteString(b, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
		busy.awaitArrivals(t, 1)

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			gw.stop(t) // Shutdown and Serve return nil, every place is freed
		}()
		if _, err := idleBr.ReadByte(); err != io.EOF {
			t.Fatalf("idle connection at shutdown: %v, want EOF", err)
		}
		streaming.open()
		if body, err := io.ReadAll(resp.Body); err != nil || !strings.HasSuffix(string(body), "end") {
			t.Fatalf("streamed body: %d bytes, %v", len(body), err)
		}
		// a is closed, or back on its loop beside b.
		var aClosed atomic.Bool
		go func() {
			if _, err := aBr.ReadByte(); err != nil {
				aClosed.Store(true)
			}
		}()
		eventually(t, "the streamed connection closed or back on its loop", func() bool {
			return aClosed.Load() || (engine == "loop" && gateway.OpenConns(gw.Gateway) == 2)
		})
		busy.open()
		mustAnswer(t, bBr)
		select {
		case <-stopped:
		case <-time.After(waitLimit / 2):
			t.Errorf("Shutdown still waits %v after every request was answered (the streamed connection closed: %v)", waitLimit/2, aClosed.Load())
			<-stopped
		}
	})
}

// mustAnswer reads an answer from br, and its body.
func mustAnswer(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if _, err := readAnswer(br, http.MethodGet); err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
}
