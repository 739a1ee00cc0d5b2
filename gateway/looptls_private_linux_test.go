package gateway

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// recordConn is the loop's socket under a loopTLS in these tests: Next
// returns the records a client sent (in), and Write hands what the loop
// sends to the client's sockSwitch (peer), as a read event would.
type recordConn struct {
	gnet.Conn
	in     []byte
	peer   *sockSwitch
	writes int // how many writes the loop made
}

func (c *recordConn) Next(int) ([]byte, error) {
	b := c.in
	c.in = c.in[:0] // the loop copies what it keeps before the next event
	return b, nil
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.writes++
	c.peer.own = append(c.peer.own[:len(c.peer.in)], p...)
	c.peer.in = c.peer.own
	return len(p), nil
}

func (c *recordConn) OutboundBuffered() int { return 0 }

// loopTLSPair returns a loopTLS, whose handshake was made over loopback
// TCP, over a recordConn, and the client's tls.Conn, whose sockSwitch the
// loopTLS writes to and whose records go to the recordConn's in (see
// send). Neither reads its socket any more.
func loopTLSPair(tb testing.TB) (*loopTLS, *tls.Conn, *sockSwitch) {
	tb.Helper()
	cert, roots, ln := tlsListener(tb)
	// No session tickets: nothing is left unread on the socket once both
	// handshakes return.
	accepted := acceptSwitched(tb, ln, &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true})
	raw, err := net.DialTimeout("tcp", ln.Addr().String(), waitLimit)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { raw.Close() })
	_ = raw.SetDeadline(time.Now().Add(waitLimit))
	csw := newSockSwitch(raw)
	cc := tls.Client(csw, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := cc.Handshake(); err != nil {
		tb.Fatal(err)
	}
	s := <-accepted
	if s.err != nil {
		tb.Fatal(s.err)
	}
	csw.raw, s.sw.raw = nil, nil
	t := &loopTLS{Conn: &recordConn{peer: csw}, l: &loop{}, tc: s.tc, sw: s.sw}
	return t, cc, csw
}

// send has the client write each of msgs (a record each at least) and the
// loop read them in one read event.
func send(tb testing.TB, t *loopTLS, cc *tls.Conn, csw *sockSwitch, msgs ...[]byte) {
	tb.Helper()
	for _, m := range msgs {
		if _, err := cc.Write(m); err != nil {
			tb.Fatal(err)
		}
	}
	rc := t.Conn.(*recordConn)
	rc.in = append(rc.in, csw.out...)
	csw.out = csw.out[:0]
}

// BenchmarkLoopTLSRecords is the TLS layer of one keep-alive request on a
// loop, without sockets: the client's request record decrypted in one
// read event (feed), its plaintext consumed, the answer encrypted and
// sent (Write), and the client's decryption of it. The client's share
// (a record encrypted, one decrypted) is in ns/op too.
func BenchmarkLoopTLSRecords(b *testing.B) {
	t, cc, csw := loopTLSPair(b)
	req := []byte("GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	answer := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Wed, 02 Dec 2026 02:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 24\r\nConnection: keep-alive\r\n\r\nhello from the upstream\n")
	got := make([]byte, 2*len(answer))
	b.ReportAllocs()
	for b.Loop() {
		send(b, t, cc, csw, req)
		if !t.feed() {
			b.Fatal("feed failed")
		}
		if !bytes.Equal(t.plain[t.off:], req) {
			b.Fatalf("decrypted %q", t.plain[t.off:])
		}
		_, _ = t.Discard(len(req))
		t.settle()
		if _, err := t.Write(answer); err != nil {
			b.Fatal(err)
		}
		if n, err := cc.Read(got); err != nil || n != len(answer) {
			b.Fatalf("the client read %d bytes, %v", n, err)
		}
	}
}

// TestLoopTLSReadsEveryRecord feeds a loop's loopTLS records cut at every
// kind of place (in a header, in a body, at a record's end, several
// records at once, records of 16 KiB) and checks after every read event
// that it decrypted every record it had whole: tls.Conn, asked once more,
// has nothing (errNoRecord).
func TestLoopTLSReadsEveryRecord(t *testing.T) {
	lt, cc, csw := loopTLSPair(t)
	var want []byte
	for i, n := range []int{1, 2, 100, 3, 16 << 10, 40000, 7, 1} {
		m := bytes.Repeat([]byte{byte('a' + i)}, n)
		want = append(want, m...)
		if _, err := cc.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	records := csw.out
	csw.out = nil
	rc := lt.Conn.(*recordConn)
	var got []byte
	for i := 0; len(records) > 0; i++ {
		if i > 1000 {
			t.Fatal("more than 1000 read events")
		}
		cut := min([]int{1, 4, 1, 5, 6, 300, 17000, 3, 20000, 50000}[i%10], len(records))
		rc.in = append(rc.in, records[:cut]...)
		records = records[cut:]
		if !lt.feed() {
			t.Fatalf("read event %d: feed failed", i)
		}
		got = append(got, lt.plain[lt.off:]...)
		_, _ = lt.Discard(lt.InboundBuffered())
		lt.settle()
		if lt.sw.recordIn() {
			t.Fatalf("read event %d: a record left to read", i)
		}
		if n, err := lt.tc.Read(make([]byte, tlsChunk)); n != 0 || !errors.Is(err, errNoRecord) {
			t.Fatalf("read event %d: tls.Conn still had %d bytes (%v)", i, n, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("decrypted %d bytes, want %d", len(got), len(want))
	}
}
