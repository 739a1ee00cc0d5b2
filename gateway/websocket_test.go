package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsUpstream is a WebSocket echo server (github.com/coder/websocket): it
// sends every message back as it came. closes receives the close status
// each connection ended with, as the server read it.
type wsUpstream struct {
	*httptest.Server
	open   atomic.Int64
	closes chan websocket.StatusCode
	header chan http.Header // the handshake's headers, as the server got them, with X-Test-Target and X-Test-Host
}

func startWSUpstream(t *testing.T) *wsUpstream {
	t.Helper()
	checkLeaks(t)
	u := &wsUpstream{closes: make(chan websocket.StatusCode, 64), header: make(chan http.Header, 64)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/forbidden" {
			http.Error(w, "no sockets here", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/broken" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h := r.Header.Clone()
		h.Set("X-Test-Target", r.URL.RequestURI())
		h.Set("X-Test-Host", r.Host)
		u.header <- h
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		u.open.Add(1)
		defer u.open.Add(-1)
		c.SetReadLimit(1 << 20)
		for {
			typ, msg, err := c.Read(context.Background())
			if err != nil {
				u.closes <- websocket.CloseStatus(err)
				c.CloseNow()
				return
			}
			if err := c.Write(context.Background(), typ, msg); err != nil {
				c.CloseNow()
				return
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// dialWS opens a WebSocket to url (http://...) through c.
func dialWS(t *testing.T, url string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: newClient(t)})
	if c != nil {
		c.SetReadLimit(1 << 20)
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

func mustDialWS(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := dialWS(t, url)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, code)
	}
	return c
}

// echo sends msg on c and checks that it comes back.
func echo(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Write(ctx, typ, msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	gotTyp, got, err := c.Read(ctx)
	if err != nil || gotTyp != typ || !bytes.Equal(got, msg) {
		t.Fatalf("echo of %d bytes: got %v, %d bytes, %v", len(msg), gotTyp, len(got), err)
	}
}

// readClose reads from c until it ends and returns the close status the
// gateway (or the upstream through it) sent.
func readClose(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for range 1000 {
		if _, _, err := c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
	t.Fatal("the connection did not close")
	return 0
}

func wsGateway(t *testing.T, engine string, up *wsUpstream, extra string) *testGateway {
	t.Helper()
	return startGateway(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1h}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ws
    upstream: up
%s`, engine, up.URL, extra))
}

func TestWebSocketManyMessagesBothWays(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, "")
		c := mustDialWS(t, gw.URL+"/chat?room=1")
		h := <-up.header
		if h.Get("Sec-Websocket-Key") == "" || h.Get("X-Forwarded-For") != "127.0.0.1" {
			t.Errorf("the upstream got Sec-WebSocket-Key %q, X-Forwarded-For %q", h.Get("Sec-Websocket-Key"), h.Get("X-Forwarded-For"))
		}
		for i := range 300 {
			size := []int{0, 1, 125, 126, 4096, 65535, 65536, 200000}[i%8]
			msg := bytes.Repeat([]byte{byte('a' + i%26)}, size)
			typ := websocket.MessageBinary
			if i%2 == 0 {
				typ = websocket.MessageText
			}
			echo(t, c, typ, msg)
		}
		// Many messages in flight at once, both ways.
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		const burst = 200
		sent := make(chan error, 1)
		go func() {
			for i := range burst {
				if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "msg %d", i)); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		for i := range burst {
			_, got, err := c.Read(ctx)
			if err != nil || string(got) != fmt.Sprintf("msg %d", i) {
				t.Fatalf("message %d: %q, %v", i, got, err)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if m := gw.metricsText(t); !strings.Contains(m, `sluice_requests_total{code="101",outcome="ok",route="ws"} 1`) {
			t.Errorf("the open WebSocket's handshake is not among the requests served:\n%s", m)
		}
		if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
			t.Errorf("close handshake through the gateway: %v", err)
		}
		if got := <-up.closes; got != websocket.StatusNormalClosure {
			t.Errorf("the upstream read close status %v, want 1000", got)
		}
	})
}

func TestWebSocketRateLimitAtHandshake(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, `    policies: {rate_limit: {limit: 1, period: 1h, key: route}}`)
		c := mustDialWS(t, gw.URL+"/a")
		for i := range 20 { // messages are not requests: the limit does not see them
			echo(t, c, websocket.MessageText, fmt.Appendf(nil, "%d", i))
		}
		_, resp, err := dialWS(t, gw.URL+"/a")
		if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("second handshake: %v, %+v; want 429 with Retry-After", err, resp)
		}
		echo(t, c, websocket.MessageText, []byte("still open"))
		c.Close(websocket.StatusNormalClosure, "")
	})
}

func TestWebSocketHoldsConcurrencySlotWithoutLatencySample(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		// AIMD cuts its limit on a sample of 5s or more: a WebSocket open
		// for ten minutes that fed it one would leave the limit below 2.
		gw := wsGateway(t, engine, up, `    policies: {concurrency: {adaptive: {algorithm: aimd, min: 1, max: 2, initial: 2}}}`)
		c1 := mustDialWS(t, gw.URL+"/a")
		c2 := mustDialWS(t, gw.URL+"/b")
		if st := gw.routeStatus(t, "ws"); st.ConcurrencyInFlight != 2 {
			t.Fatalf("in flight %d with two WebSockets open, want 2", st.ConcurrencyInFlight)
		}
		_, resp, err := dialWS(t, gw.URL+"/c")
		if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("third handshake while two hold the slots: %v %+v, want 503", err, resp)
		}
		if r := get(t, newClient(t), gw.URL+"/plain"); r.Code != http.StatusServiceUnavailable || r.errorBody(t).Error != "overloaded" {
			t.Fatalf("plain request while the slots are held: %d %s, want 503 overloaded", r.Code, r.Body)
		}
		gw.Clock.Advance(10 * time.Minute)
		echo(t, c1, websocket.MessageText, []byte("late"))
		c1.Close(websocket.StatusNormalClosure, "")
		eventually(t, "the slot to be released", func() bool { return gw.routeStatus(t, "ws").ConcurrencyInFlight == 1 })
		c3 := mustDialWS(t, gw.URL+"/c")
		c2.Close(websocket.StatusNormalClosure, "")
		c3.Close(websocket.StatusNormalClosure, "")
		eventually(t, "every slot to be released", func() bool { return gw.routeStatus(t, "ws").ConcurrencyInFlight == 0 })
		if got := gw.routeStatus(t, "ws").ConcurrencyLimit; got != 2 {
			t.Errorf("adaptive limit %d after WebSockets open for ten minutes, want 2 (no latency sample)", got)
		}
	})
}

func TestWebSocketIdleTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1m}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
		c := mustDialWS(t, gw.URL+"/a")
		echo(t, c, websocket.MessageText, []byte("hello"))
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := gw.Clock.BlockUntil(ctx, 1); err != nil { // the tunnel's idle timer
			t.Fatal(err)
		}
		gw.Clock.Advance(time.Minute)
		if got := readClose(t, c); got != websocket.StatusGoingAway {
			t.Errorf("the client read close status %v, want 1001", got)
		}
		if got := <-up.closes; got != websocket.StatusGoingAway {
			t.Errorf("the upstream read close status %v, want 1001", got)
		}
	})
}

func TestWebSocketShutdownSendsGoingAway(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, "")
		c := mustDialWS(t, gw.URL+"/a")
		echo(t, c, websocket.MessageText, []byte("hello"))
		gw.stopped.Store(true) // stopped here
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- gw.Shutdown(ctx) }()
		// Shutdown waits for the open WebSocket, which still carries.
		echo(t, c, websocket.MessageText, []byte("during shutdown"))
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v with a WebSocket open before its deadline", err)
		default:
		}
		cancel() // the deadline
		if got := readClose(t, c); got != websocket.StatusGoingAway {
			t.Errorf("the client read close status %v, want 1001", got)
		}
		if got := <-up.closes; got != websocket.StatusGoingAway {
			t.Errorf("the upstream read close status %v, want 1001", got)
		}
		if err := <-done; err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 WebSocket") {
			t.Errorf("Shutdown = %v, want the WebSocket named", err)
		}
		if err := <-gw.served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}

func TestWebSocketRefusedHandshakes(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, `    policies: {circuit_breaker: {consecutive_failures: 2, open_for: 1m}}`)
		_, resp, err := dialWS(t, gw.URL+"/forbidden")
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a handshake the upstream refuses: %v %+v, want its 403", err, resp)
		}
		for range 2 { // two failed handshakes open the breaker
			if _, resp, _ := dialWS(t, gw.URL+"/broken"); resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("a handshake the upstream fails: %+v, want its 503", resp)
			}
		}
		if r := get(t, newClient(t), gw.URL+"/plain"); r.Code != http.StatusServiceUnavailable || r.errorBody(t).Error != "circuit_open" {
			t.Fatalf("after two failed handshakes: %d %s, want 503 circuit_open", r.Code, r.Body)
		}
	})
}

func TestWebSocketUpstreamUnreachable(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw := gatewayTo(t, engine, closedAddr(t))
		_, resp, err := dialWS(t, gw.URL+"/a")
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("handshake to a closed port: %v %+v, want 502", err, resp)
		}
	})
}

// TestWebSocketRouteRulesAndTrustedProxy has a handshake from a trusted
// proxy on a route that rewrites, changes headers and keeps the Host: the
// upstream sees all of it, as a plain request would, and the client the
// response rules' header.
func TestWebSocketRouteRulesAndTrustedProxy(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := startGateway(t, parseConfig(t, `
trusted_proxies: [127.0.0.1/32]
server: {engine: %s, websocket_idle_timeout: 1h}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ws
    upstream: up
    rewrite: {strip_prefix: /ws, add_prefix: /chat}
    preserve_host: true
    headers:
      request: {set: {X-Env: prod}, remove: [X-Secret]}
      response: {set: {X-Served-By: sluice}}
`, engine, up.URL))
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		hdr := http.Header{"X-Secret": {"s"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"example.com"}}
		c, resp, err := websocket.Dial(ctx, gw.URL+"/ws/room?x=1", &websocket.DialOptions{HTTPClient: newClient(t), HTTPHeader: hdr})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		if got := resp.Header.Get("X-Served-By"); got != "sluice" {
			t.Errorf("the 101's X-Served-By = %q, want the response rule's sluice", got)
		}
		h := <-up.header
		for name, want := range map[string]string{"X-Test-Target": "/chat/room?x=1", "X-Test-Host": gw.Addr, "X-Env": "prod",
			"X-Secret": "", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "example.com", "X-Forwarded-For": "127.0.0.1"} {
			if got := h.Get(name); got != want {
				t.Errorf("the upstream got %s %q, want %q", name, got, want)
			}
		}
		echo(t, c, websocket.MessageText, []byte("ruled"))
		c.Close(websocket.StatusNormalClosure, "")
	})
}

// TestWebSocketTargetInterimAnswer has a target answer a WebSocket
// handshake with a 103 Early Hints and nothing more: the client gets a
// 502. (The 103 was passed on as the final answer: the client, which
// reads a 1xx as interim, waited for another until its connection
// closed.)
func TestWebSocketTargetInterimAnswer(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"))
			_, _ = br.ReadByte() // until the gateway closes the connection
		})
		gw := gatewayTo(t, engine, up.addr)
		res := exchangeRaw(t, gw.Addr, "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 1)
		if res[0].Code != http.StatusBadGateway {
			t.Errorf("a handshake the target answers 103: %d, want 502", res[0].Code)
		}
	})
}
