//go:build linux

package gateway_test

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2IdleNotKeptByFrames keeps an HTTP/2 connection without a stream
// busy with frames that open none: WINDOW_UPDATE frames, or a PING frame
// trickled one byte at a time. server.idle_timeout still ends it (GOAWAY
// or close), as net/http's HTTP/2 server ends it, whose idle timer only a
// stream stops; on the loops any byte kept it open, so a client held a
// connection forever for a byte per idle_timeout. (The loops read the wall
// clock, which the test cannot move: it sends until the connection ends,
// within waitLimit, rather than a fixed count that a slow machine could
// outlast.)
func TestH2IdleNotKeptByFrames(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		tg := serverGateway(t, engine, "idle_timeout: 300ms", up.URL)
		for name, send := range map[string]func(c net.Conn, cl *h2Client, i int) error{
			"WINDOW_UPDATE": func(_ net.Conn, cl *h2Client, _ int) error { return cl.WriteWindowUpdate(0, 1) },
			"trickled PING": func(c net.Conn, _ *h2Client, i int) error {
				ping := []byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
				_, err := c.Write(ping[i%len(ping) : i%len(ping)+1])
				return err
			},
		} {
			t.Run(name, func(t *testing.T) {
				c, err := net.DialTimeout("tcp", tg.Addr, waitLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				cl := h2Start(t, c)
				ended := make(chan struct{})
				go func() {
					defer close(ended)
					for {
						f, err := cl.ReadFrame()
						if err != nil {
							return
						}
						if _, ok := f.(*http2.GoAwayFrame); ok {
							return
						}
					}
				}()
				// A frame every 50ms, a sixth of the idle timeout, until the
				// connection ends: waitLimit bounds the wait, however slow
				// the machine (the loops' clock is the wall clock).
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				limit := time.After(waitLimit)
				for i := 0; ; i++ {
					select {
					case <-ended:
						return
					case <-limit:
						_ = c.Close()
						<-ended
						t.Fatal("frames without a stream kept the connection past its idle timeout")
					case <-tick.C:
					}
					if send(c, cl, i) != nil {
						<-ended
						return
					}
				}
			})
		}
	})
}

// TestH2IdleRunsFromExpiredStream: a stream whose request has not arrived
// whole within server.read_timeout is reset (CANCEL), and the
// connection's idle timeout runs from then, as from any stream's end: a
// request that comes next is served. (With read_timeout over
// idle_timeout, the loops measured the idle time from the last wake
// before the reset and sent GOAWAY with it: with idle_timeout under the
// second the loops wait at least between wakes, the reset comes more than
// idle_timeout after the wake before it.) The loops' own timers (see
// loopH2.idle): the loop engine with server.http2.loops.
func TestH2IdleRunsFromExpiredStream(t *testing.T) {
	up := startUpstream(t, "up", nil)
	tg := startGateway(t, parseConfig(t, `
server: {engine: loop, read_timeout: 1200ms, idle_timeout: 500ms, http2: {loops: true}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	fr := h2Dial(t, tg.Addr)
	head := func(method string, fields ...string) []byte {
		return h2Headers(append([]string{":method", method, ":scheme", "http", ":path", "/", ":authority", "x"}, fields...)...)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head("POST", "content-length", "10"), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if status, body, code, ok := h2Answer(t, fr, 1); ok || code != http2.ErrCodeCancel {
		t.Fatalf("stream 1 ended %v %q %q, reset %v; want reset CANCEL at read_timeout", ok, status, body, code)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: head("GET"), EndHeaders: true, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	if status, _, code, ok := h2Answer(t, fr, 3); !ok || status != "200" {
		t.Errorf("stream 3: %q, reset %v; want 200", status, code)
	}
}
