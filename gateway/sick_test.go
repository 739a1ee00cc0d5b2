package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sickUpstream answers /ok with 200 "ok" and every other path as its
// case says, on connections of its own (see startRaw).
func sickUpstream(t *testing.T, sick func(c net.Conn, r *http.Request)) *rawUpstream {
	return startRaw(t, func(c net.Conn, br *bufio.Reader) {
		serveRequests(c, br, func(r *http.Request) bool {
			if r.URL.Path == "/ok" {
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				return err == nil
			}
			sick(c, r)
			return false
		})
	})
}

// TestSickUpstreams has targets hang, reset or answer garbage, before
// their headers or in the middle of a body: the client gets a 502 or a 504
// when nothing was sent to it yet, and a body cut short on a closed
// connection when the headers had gone already. Either way the sick
// connection is closed, the next request is served (the pool is not
// poisoned), and no goroutine is left behind.
func TestSickUpstreams(t *testing.T) {
	large := 1 << 20 // streamed, not read whole
	for _, tt := range []struct {
		name string
		sick func(c net.Conn, r *http.Request)
		code int // 0: the headers go out, the body is cut short
	}{
		{"hang before headers", func(c net.Conn, r *http.Request) { untilClosed(c) }, 504},
		{"hang in headers", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-")
			untilClosed(c)
		}, 504},
		{"hang in a small body", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			untilClosed(c)
		}, 504},
		{"hang in a streamed body", func(c net.Conn, r *http.Request) {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", large, strings.Repeat("b", 100<<10))
			untilClosed(c)
		}, 0},
		{"hang in a chunked body", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			untilClosed(c)
		}, 0},
		{"reset before headers", func(c net.Conn, r *http.Request) { resetConn(c) }, 502},
		{"close before headers", func(c net.Conn, r *http.Request) {}, 502},
		{"reset in a small body", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			resetConn(c)
		}, 502},
		{"reset in a streamed body", func(c net.Conn, r *http.Request) {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", large, strings.Repeat("b", 100<<10))
			resetConn(c)
		}, 0},
		{"not HTTP", func(c net.Conn, r *http.Request) { io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n") }, 502},
		{"bad status line", func(c net.Conn, r *http.Request) { io.WriteString(c, "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n") }, 502},
		{"bad Content-Length", func(c net.Conn, r *http.Request) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx") }, 502},
		{"negative Content-Length", func(c net.Conn, r *http.Request) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx") }, 502},
		{"conflicting Content-Length", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc")
		}, 502},
		{"Content-Length and chunked", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL")
		}, 502},
		{"bad chunk size", func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
			untilClosed(c)
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				up := sickUpstream(t, tt.sick)
				// The goroutine engine's wait for headers is on the wall
				// clock: long enough that a healthy answer on a loaded
				// machine is never cut, short enough for the hangs.
				wait := "1s"
				if engine == "loop" {
					wait = "100ms" // on the gateway's fake clock, advanced below
				}
				gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"], response_header_timeout: %s}
routes:
  - {name: all, upstream: up}
`, engine, up.addr, wait))
				c, br := dialClient(t, gw.Addr)
				if resp, body, err := roundTripRaw(t, c, br, "GET", "/ok"); err != nil || body != "ok" {
					t.Fatalf("first request: %v %q %v", resp, body, err)
				}
				base := goroutines()

				if tt.code == 504 && engine == "loop" {
					// The loops time the wait for headers on the gateway's
					// clock; the goroutine engine on the connection's.
					go func() {
						if gw.Clock.BlockUntil(t.Context(), 1) == nil {
							gw.Clock.Advance(100 * time.Millisecond)
						}
					}()
				}
				resp, body, err := roundTripRaw(t, c, br, "GET", "/sick")
				switch {
				case tt.code != 0 && (err != nil || resp.StatusCode != tt.code):
					t.Fatalf("%v %q %v, want %d", resp, body, err, tt.code)
				case tt.code == 0 && err == nil:
					t.Fatalf("%v %d bytes, want a response cut short", resp, len(body))
				case tt.code == 0:
					if _, err := br.ReadByte(); err == nil {
						t.Errorf("the client's connection is still open after a cut body")
					}
					c, br = dialClient(t, gw.Addr)
				}
				eventually(t, "the sick connection to close", func() bool { return up.open.Load() == 0 })
				for i := range 2 {
					if resp, body, err := roundTripRaw(t, c, br, "GET", "/ok"); err != nil || body != "ok" {
						t.Fatalf("request %d after: %v %q %v", i, resp, body, err)
					}
				}
				eventually(t, "goroutines to return to their number before", func() bool {
					return goroutines() <= base
				})
			})
		})
	}
}

// goroutines counts the goroutines but for the idle workers of the pools
// that gnet and fasthttp keep for a while (they end by themselves) and
// fasthttp's clock of the Date header (one, started on first use).
func goroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "ants/v2.(*goWorker)") && !strings.Contains(g, "fasthttp.(*workerPool).workerFunc") &&
			!strings.Contains(g, "fasthttp.updateServerDate") {
			count++
		}
	}
	return count
}
