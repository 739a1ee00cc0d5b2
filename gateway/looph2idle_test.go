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
