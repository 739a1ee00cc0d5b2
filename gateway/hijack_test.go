package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWebSocketHijackFails pipelines a plain request and a WebSocket
// handshake, then resets its connection while the target answers the
// handshake: the gateway cannot send the answers, so it closes the
// target's WebSocket (and frees what the handshake held), on both engines.
// (On the goroutine engine the plain request's answer waited in fasthttp's
// writer, whose flush failed before the connection was taken over: the
// function that carries the WebSocket never ran, and the target's
// connection stayed open for ever.)
func TestWebSocketHijackFails(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		ended := make(chan error, 1)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/ws" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			arrived <- struct{}{}
			<-release
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				ended <- err
				return
			}
			defer c.CloseNow()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_, _, err = c.Read(ctx)
			ended <- err
		}))
		t.Cleanup(up.Close)
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		t.Cleanup(free) // before up.Close, which waits for the handler
		_, c := pipelined(t, engine, up.URL, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the handshake never reached the target")
		}
		if engine == "loop" {
			// The loops answered the plain request themselves: read it, so
			// that the reset loses nothing the gateway holds.
			_ = c.SetReadDeadline(time.Now().Add(waitLimit))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("the plain request: %v", err)
			}
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close() // a reset
		free()
		select {
		case err := <-ended:
			var ce websocket.CloseError
			if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ce) && ce.Code == 0 {
				t.Errorf("the target's WebSocket: %v, want its connection closed", err)
			}
		case <-time.After(2 * waitLimit):
			t.Fatal("the target's WebSocket never ended")
		}
	})
}

// TestHTTP10StreamHijackFails pipelines two HTTP/1.0 requests, the second
// answered by a target's body of no length (sent until the connection
// closes, on a connection taken over), then resets its connection while
// the target answers: the gateway closes the target's body and ends the
// request, so the route's in-flight count comes back to 0, on both
// engines. (On the goroutine engine the first answer waited in fasthttp's
// writer, whose flush failed before the connection was taken over: the
// body, held for the function that sends it, was never closed, and the
// route counted the request in flight for ever.)
func TestHTTP10StreamHijackFails(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		arrived, release, done := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/stream" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			arrived <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "part")
			http.NewResponseController(w).Flush() // chunked: no length
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}))
		t.Cleanup(up.Close)
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		t.Cleanup(func() { free(); close(done) }) // before up.Close, which waits for the handler
		tg, c := pipelined(t, engine, up.URL, "GET /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /stream HTTP/1.0\r\nHost: x\r\n\r\n")
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the second request never reached the target")
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close() // a reset
		free()
		deadline := time.Now().Add(waitLimit)
		for {
			rs := tg.Status().Routes
			if len(rs) == 1 && rs[0].InFlight == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the route's requests in flight: %+v, want 0", rs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// pipelined starts a gateway on engine with one route to the target at
// url, and sends it requests on one connection, which it returns (closed
// when the test ends).
func pipelined(t *testing.T, engine, url, requests string) (*testGateway, net.Conn) {
	t.Helper()
	tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, url))
	c, err := net.DialTimeout("tcp", tg.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, requests); err != nil {
		t.Fatal(err)
	}
	return tg, c
}
