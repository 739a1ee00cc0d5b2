package gateway_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream is a TCP server on loopback that speaks HTTP by hand, to
// play targets that break the protocol. Each connection runs serve.
type rawUpstream struct {
	ln     net.Listener
	addr   string
	open   atomic.Int64 // connections not yet closed
	closed chan struct{}
	wg     sync.WaitGroup
}

// startRaw starts a rawUpstream whose connections run serve, which gets a
// reader of the connection and returns when done with it (the connection
// is then closed).
func startRaw(t testing.TB, serve func(c net.Conn, br *bufio.Reader)) *rawUpstream {
	t.Helper()
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, addr: ln.Addr().String(), closed: make(chan struct{}, 1024)}
	var mu sync.Mutex
	var conns []net.Conn
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			u.open.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer func() {
					c.Close()
					u.open.Add(-1)
					u.closed <- struct{}{}
				}()
				_ = c.SetDeadline(time.Now().Add(2 * waitLimit))
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		u.wg.Wait()
	})
	return u
}

// serveRequests reads requests from br one after another, and answers each
// with answer(path); it returns at the connection's end or when answer
// returns false. Each request's body is read whole before answer is
// called, which may read it again.
func serveRequests(c net.Conn, br *bufio.Reader, answer func(r *http.Request) bool) {
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !answer(r) {
			return
		}
	}
}

// untilClosed blocks until the peer closes c (or c's deadline passes).
func untilClosed(c net.Conn) {
	_, _ = io.Copy(io.Discard, c)
}

// resetConn closes c with a reset (RST) instead of an orderly close.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// clientConn dials addr and returns the connection with a reader, closed
// when the test ends.
func dialClient(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(2 * waitLimit))
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTripRaw sends a GET for path on c and reads the response whole.
func roundTripRaw(t testing.TB, c net.Conn, br *bufio.Reader, method, path string) (*http.Response, string, error) {
	t.Helper()
	if _, err := io.WriteString(c, method+" "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}
