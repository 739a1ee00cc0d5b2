package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBytesOutOfStreamedBody checks the bytes_out of responses whose body
// streams, on both engines: a chunked answer of unknown length logs the
// bytes it had (over HTTP/2 too), and one whose client leaves halfway logs fewer than its
// Content-Length, at least those the client read (it logged the
// Content-Length, or -1 without one).
func TestBytesOutOfStreamedBody(t *testing.T) {
	const (
		chunk    = 8 << 10
		chunks   = 40
		total    = 64 << 20 // the answer the client leaves
		readFrom = 1 << 20  // what it reads first
	)
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			p := []byte(strings.Repeat("x", chunk))
			if r.URL.Path == "/chunked" {
				for range chunks {
					_, _ = w.Write(p)
					w.(http.Flusher).Flush() // no Content-Length: chunked
				}
				return
			}
			w.Header().Set("Content-Length", fmt.Sprint(total))
			for sent := 0; sent < total; sent += chunk {
				if _, err := w.Write(p); err != nil {
					return // the gateway closed: its client left
				}
			}
		})
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`, engine, up.URL))
		h2c := &http.Client{Transport: &http.Transport{Protocols: new(http.Protocols)}, Timeout: waitLimit}
		h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
		t.Cleanup(h2c.CloseIdleConnections)
		for id, c := range map[string]*http.Client{"chunked": newClient(t), "chunked-h2c": h2c} {
			r := do(t, c, "GET", gw.URL+"/chunked", http.Header{"X-Request-Id": {id}}, nil)
			if len(r.Body) != chunk*chunks {
				t.Fatalf("%s answer of %d bytes, want %d", id, len(r.Body), chunk*chunks)
			}
		}

		c, err := net.Dial("tcp", gw.Addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		fmt.Fprintf(c, "GET /left HTTP/1.1\r\nHost: x\r\nX-Request-Id: left\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.CopyN(io.Discard, resp.Body, readFrom); n != readFrom {
			t.Fatalf("read %d bytes of the answer: %v", n, err)
		}
		_ = c.Close() // unread bytes left: the gateway's writes fail

		byID := map[any]map[string]any{}
		for _, l := range logs.requests(t, 3) {
			byID[l["request_id"]] = l
		}
		for _, id := range []string{"chunked", "chunked-h2c"} {
			if got := byID[id]["bytes_out"]; got != float64(chunk*chunks) {
				t.Errorf("%s answer: bytes_out %v, want %d", id, got, chunk*chunks)
			}
		}
		if got, _ := byID["left"]["bytes_out"].(float64); got < readFrom || got >= total {
			t.Errorf("answer whose client left after %d bytes: bytes_out %v, want at least that and less than its %d", readFrom, byID["left"]["bytes_out"], total)
		}
	})
}

// TestInFlightUntilBodyEnds checks that a request whose body streams
// counts in its route's and its target's in-flight gauges until its body
// has ended, on both engines: they read 1 while the upstream stalls in the
// middle of the body, and 0 once the body has been sent.
func TestInFlightUntilBodyEnds(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		release := make(chan struct{})
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "first ")
			w.(http.Flusher).Flush() // chunked: the body streams
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "last")
		})
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`, engine, up.URL))
		defer close(release)
		c := newClient(t)
		resp, err := c.Get(gw.URL + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, len("first "))
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatal(err)
		}
		gauges := func() (route, target float64) {
			route, _ = seriesValue(t, gw, "sluice_route_in_flight_requests", "route", "api")
			target, _ = seriesValue(t, gw, "sluice_target_in_flight_requests", "upstream", "up")
			return route, target
		}
		// The request was recorded as streaming before its first bytes
		// went out: the gauges hold it now.
		if route, target := gauges(); route != 1 || target != 1 {
			t.Errorf("while the body stalls: route in flight %v, target in flight %v; want 1 and 1", route, target)
		}
		release <- struct{}{}
		if rest, err := io.ReadAll(resp.Body); err != nil || string(rest) != "last" {
			t.Fatalf("rest of the body %q, %v", rest, err)
		}
		logs.requests(t, 1) // the body has ended
		if route, target := gauges(); route != 0 || target != 0 {
			t.Errorf("after the body: route in flight %v, target in flight %v; want 0 and 0", route, target)
		}
	})
}

// TestStreamedFromHTTP2Target checks a body streamed from an HTTP/2 (h2c)
// target, on both engines: the request holds its route's in-flight gauge
// while the body stalls, and is recorded once the body has ended, with
// the bytes sent as its bytes_out (it was recorded at the head, with -1).
func TestStreamedFromHTTP2Target(t *testing.T) {
	const part = 100 << 10 // over the size read whole
	forEngines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		release := make(chan struct{})
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("a", part))
			w.(http.Flusher).Flush() // no Content-Length
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, strings.Repeat("b", part))
		}))
		up.Config.Protocols = new(http.Protocols)
		up.Config.Protocols.SetUnencryptedHTTP2(true)
		up.Start()
		t.Cleanup(up.Close)
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: h2c}
routes:
  - {name: api, upstream: up}
`, engine, up.URL))
		defer close(release)
		resp, err := newClient(t).Get(gw.URL + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if n, err := io.CopyN(io.Discard, resp.Body, part); n != part {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		if n, _ := seriesValue(t, gw, "sluice_route_in_flight_requests", "route", "api"); n != 1 {
			t.Errorf("while the body stalls: route in flight %v, want 1", n)
		}
		release <- struct{}{}
		if n, err := io.Copy(io.Discard, resp.Body); n != part || err != nil {
			t.Fatalf("rest of the body: %d bytes, %v", n, err)
		}
		if got := logs.requests(t, 1)[0]["bytes_out"]; got != float64(2*part) {
			t.Errorf("bytes_out %v, want %d", got, 2*part)
		}
	})
}
