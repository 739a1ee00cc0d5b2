package gateway

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestSockSwitchFedRecords checks what the loops rely on in crypto/tls: a
// tls.Conn over a sockSwitch that a loop owns reads the records it is
// fed, one byte at a time here, and when it has no more returns
// errNoRecord without making it sticky: the next Read, once more bytes
// came, goes on where it stopped. Its writes wait in the switch for the
// loop to send, in order.
func TestSockSwitchFedRecords(t *testing.T) {
	cert, roots, ln := tlsListener(t)
	accepted := acceptSwitched(t, ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	cc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_ = cc.SetDeadline(time.Now().Add(waitLimit))
	s := <-accepted
	if s.err != nil {
		t.Fatal(s.err)
	}
	s.sw.raw = nil // the loop's now

	const msg = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(cc, msg); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64)
	one := make([]byte, 1)
	for i := 0; len(got) < len(msg); i++ {
		if i > 1000 {
			t.Fatalf("after %d bytes fed, read %q", i, got)
		}
		n, err := s.tc.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		if !errors.Is(err, errNoRecord) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read with no record whole: %v, want errNoRecord", err)
		}
		if _, err := io.ReadFull(s.raw, one); err != nil { // the loop's next read event
			t.Fatal(err)
		}
		s.sw.in = append(s.sw.in, one...)
	}
	if string(got) != msg {
		t.Fatalf("read %q, want %q", got, msg)
	}

	for _, m := range []string{"first ", "second"} {
		if _, err := io.WriteString(s.tc, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.raw.Write(s.sw.out); err != nil { // the loop sends them
		t.Fatal(err)
	}
	b := make([]byte, len("first second"))
	if _, err := io.ReadFull(cc, b); err != nil || string(b) != "first second" {
		t.Fatalf("the client read %q %v, want the writes in order", b, err)
	}
}

// switchedServer is the server's side of a TLS connection over a
// sockSwitch on its socket raw, its handshake done, or how accepting or
// the handshake failed (err).
type switchedServer struct {
	raw net.Conn
	sw  *sockSwitch
	tc  *tls.Conn
	err error
}

// acceptSwitched accepts one connection on ln, closed when the test
// ends, and makes the server's handshake with cfg over a sockSwitch,
// within waitLimit; the channel receives how it went.
func acceptSwitched(tb testing.TB, ln net.Listener, cfg *tls.Config) <-chan switchedServer {
	accepted := make(chan switchedServer, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- switchedServer{err: err}
			return
		}
		tb.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		sw := newSockSwitch(c)
		tc := tls.Server(sw, cfg)
		accepted <- switchedServer{raw: c, sw: sw, tc: tc, err: tc.Handshake()}
	}()
	return accepted
}
