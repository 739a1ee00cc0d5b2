//go:build linux

package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// TestHTTP2FrameSplitAcrossReads sends frames in two writes each, the
// second only once the gateway has read the first (its socket's receive
// queue is empty): a read that holds part of a frame and no whole one
// must keep those bytes for the next. (The loops dropped them, gnet's
// Discard(0) discarding every byte buffered: the frames that followed
// were read from the middle of one, and the connection ended with
// GOAWAY "bad frame" or worse.)
func TestHTTP2FrameSplitAcrossReads(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		gw := gatewayTo(t, engine, closedAddr(t))
		c, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		h := newH2(t, c)
		var frame [17]byte
		for i, cut := range []int{1, 8, 9, 12} {
			frame = [17]byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0, byte(i + 1)}
			awaitRead(t, c)
			if _, err := c.Write(frame[:cut]); err != nil {
				t.Fatal(err)
			}
			awaitRead(t, c)
			if _, err := c.Write(frame[cut:]); err != nil {
				t.Fatal(err)
			}
			for {
				f, err := h.fr.ReadFrame()
				if err != nil {
					t.Fatalf("PING cut after %d bytes: %v", cut, err)
				}
				if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
					if p.Data[0] != byte(i+1) {
						t.Fatalf("PING cut after %d bytes: ACK of %v", cut, p.Data)
					}
					break
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					t.Fatalf("PING cut after %d bytes: GOAWAY %v %q", cut, g.ErrCode, g.DebugData())
				}
			}
		}
	})
}

// awaitRead waits until the server's end of c, a loopback TCP connection,
// has nothing left to read: its process has read what c sent.
func awaitRead(t *testing.T, c net.Conn) {
	t.Helper()
	local, remote := procAddr(c.RemoteAddr()), procAddr(c.LocalAddr())
	eventually(t, "the gateway reading what was sent", func() bool {
		f, err := os.Open("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue ...
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 && fields[1] == local && fields[2] == remote {
				return strings.HasSuffix(fields[4], ":00000000")
			}
		}
		t.Fatalf("no socket %s -> %s in /proc/net/tcp", local, remote)
		return false
	})
}

// procAddr is an IPv4 TCP address as /proc/net/tcp writes it.
func procAddr(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	ip := ta.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
}
