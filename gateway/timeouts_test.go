package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// TestClientLeaveCancels has a client close its connection while its
// request waits for a target that does not answer (on a route without a
// timeout): the gateway closes its connection to the target at once
// rather than waiting for the answer or response_header_timeout, and
// serves the next client.
func TestClientLeaveCancels(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(1)
		t.Cleanup(g.open)
		cancelled := make(chan struct{}, 1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hang" {
				fmt.Fprint(w, "ok")
				return
			}
			g.wait(r)
			if r.Context().Err() != nil {
				cancelled <- struct{}{}
			}
		})
		gw := gatewayTo(t, engine, up.addr())
		c, _ := dialClient(t, gw.Addr)
		io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
		g.awaitArrivals(t, 1)
		c.Close()
		select {
		case <-cancelled:
		case <-time.After(waitLimit):
			t.Fatal("the target's connection is still open after the client left")
		}
		if r := get(t, newClient(t), gw.URL+"/next"); r.Code != 200 || r.Body != "ok" {
			t.Fatalf("next request: %d %q", r.Code, r.Body)
		}
	})
}

// TestWriteTimeoutCutsStream has a client stop reading a response that
// streams without end: after server.write_timeout without progress the
// gateway closes the client's connection and the target's, which then
// stops writing.
func TestWriteTimeoutCutsStream(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		cut := make(chan struct{})
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("s"), 32<<10)
			deadline := time.Now().Add(waitLimit)
			for time.Now().Before(deadline) {
				if _, err := w.Write(chunk); err != nil {
					close(cut)
					return
				}
				w.(http.Flusher).Flush()
			}
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, write_timeout: 100ms}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		c, br := dialClient(t, gw.Addr)
		io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		// The client reads nothing more.
		select {
		case <-cut:
		case <-time.After(waitLimit):
			t.Fatal("the target still streams to a client that stopped reading")
		}
		if _, err := io.Copy(io.Discard, resp.Body); err == nil {
			t.Error("the stream ended cleanly, want it cut")
		}
	})
}

// TestWriteTimeoutCutsPipeline has a client pipeline requests and read
// none of the answers: once the answers fill every buffer on the way and
// server.write_timeout passes without the client reading, the gateway
// closes the connection. The answers the client then reads are whole and
// in order, up to the close.
func TestWriteTimeoutCutsPipeline(t *testing.T) {
	const requests, size = 512, 64 << 10
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			fmt.Fprintf(w, "%-*s", size, r.URL.Path)
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, write_timeout: 100ms}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		c, br := dialClient(t, gw.Addr)
		var reqs strings.Builder
		for i := range requests {
			fmt.Fprintf(&reqs, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		io.WriteString(c, reqs.String())
		eventually(t, "the gateway to take the connection", func() bool { return gateway.OpenConns(gw.Gateway) == 1 })
		eventually(t, "the gateway to close the connection", func() bool { return gateway.OpenConns(gw.Gateway) == 0 })
		read := 0
		for ; read < requests; read++ {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				break
			}
			if want := fmt.Sprintf("%-*s", size, fmt.Sprintf("/%d", read)); string(b) != want {
				t.Fatalf("answer %d: %.20q, want %.20q", read, b, want)
			}
		}
		if read == requests {
			t.Errorf("read all %d answers from a connection the gateway closed", read)
		}
	})
}
