package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// tlsListener returns a certificate for 127.0.0.1, the pool that
// verifies it, and a listener on loopback, closed when the test ends.
func tlsListener(tb testing.TB) (tls.Certificate, *x509.CertPool, net.Listener) {
	tb.Helper()
	ca := testpki.NewCA(tb)
	p := ca.Server("127.0.0.1")
	cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return cert, ca.Pool, ln
}

// tlsPair returns both ends of a TLS connection on loopback, handshake
// done: the server's as the goroutine engine gets it, and the client's.
func tlsPair(t *testing.T) (*tlsConn, *tls.Conn) {
	t.Helper()
	cert, roots, ln := tlsListener(t)
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		sc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		_ = sc.SetDeadline(time.Now().Add(waitLimit))
		_ = sc.Handshake() // a failure fails the client's
		accepted <- sc
	}()
	cc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	_ = cc.SetDeadline(time.Now().Add(waitLimit))
	sc := <-accepted
	t.Cleanup(func() { sc.Close() })
	return &tlsConn{Conn: sc}, cc
}

// waitLimit bounds the waits of these tests; a passing test never waits
// for it.
const waitLimit = 20 * time.Second

// TestTLSConnWaitLeft checks the watch of a client on the TLS listener's
// HTTP/1.1: bytes that come (a pipelined request) end it without a cut
// and are read next, whole and in order; a deadline that passes ends it
// without a cut; a client that closes (a close_notify first, then the
// end of the stream) has left.
func TestTLSConnWaitLeft(t *testing.T) {
	s, c := tlsPair(t)
	if _, err := io.WriteString(c, "GET /next HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	if s.waitLeft() {
		t.Fatal("a client that sent bytes is taken to have left")
	}
	if s.waitLeft() { // a byte already read ahead: no read at all
		t.Fatal("a second watch with a byte read ahead found the client gone")
	}
	got := make([]byte, len("GET /next HTTP/1.1\r\n"))
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "GET /next HTTP/1.1\r\n" {
		t.Fatalf("read after the watch: %q %v, want the bytes sent", got, err)
	}

	_ = s.SetReadDeadline(aLongTimeAgo) // as clientWatch.stop ends a watch
	if s.waitLeft() {
		t.Fatal("a watch ended by its deadline found the client gone")
	}
	_ = s.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(c, "x"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if n, err := s.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read after a watch ended by its deadline: %q %v, want \"x\"", b[:n], err)
	}

	c.Close()
	if !s.waitLeft() {
		t.Fatal("a client that closed is not taken to have left")
	}
}
