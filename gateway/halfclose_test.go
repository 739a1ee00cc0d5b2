package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// TestHalfClosedClientStreamed: a client that shuts down its sending side
// after a request whose response streams (a body larger than the loops
// send themselves) gets the whole response, then the connection closes.
func TestHalfClosedClientStreamed(t *testing.T) {
	const size = 1 << 20
	body := strings.Repeat("s", size)
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			io.WriteString(w, body)
		})
		gw := gatewayTo(t, engine, up.addr())
		c, br := dialClient(t, gw.Addr)
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(b) != body {
			t.Fatalf("answer %d with %d bytes (%v), want 200 with %d", resp.StatusCode, len(b), err, size)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("after the answer: %v, want the connection closed", err)
		}
	})
}

// TestHalfClosedClientLeft: a client that shuts down its sending side
// while its request waits upstream is taken to have left, as nginx takes
// it: the request is cancelled (the target sees its connection close), and
// the client is answered 499 before its connection closes; so it is when
// it shuts its side at once, and when the request has waited upstream past
// the gateway's watch delay first. (On the loops, a client that shut its
// side once the request had waited that long lost its connection with no
// answer.)
func TestHalfClosedClientLeft(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, after := range []time.Duration{0, gateway.WatchDelay + 50*time.Millisecond} {
			t.Run(fmt.Sprintf("after %v", after), func(t *testing.T) {
				g := newGate(1)
				t.Cleanup(g.open)
				cancelled := make(chan struct{}, 1)
				up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
					g.wait(r)
					if r.Context().Err() != nil {
						cancelled <- struct{}{}
					}
				})
				gw := gatewayTo(t, engine, up.addr())
				c, br := dialClient(t, gw.Addr)
				io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
				g.awaitArrivals(t, 1)
				// At least this long: a slower machine only waits longer.
				time.Sleep(after)
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-cancelled:
				case <-time.After(waitLimit):
					t.Fatal("the target's connection is still open after the client left")
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 499 {
					t.Fatalf("answer %v (%v), want 499", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				if _, err := br.ReadByte(); err != io.EOF {
					t.Errorf("after the answer: %v, want the connection closed", err)
				}
			})
		}
	})
}
