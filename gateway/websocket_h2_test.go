package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"

	"github.com/sluicehq/sluice/internal/testpki"
)

// inXConnect runs the calling test again in a child process whose
// environment has GODEBUG=http2xconnect=1, and reports whether the caller
// is that child (then it goes on with the test). Go's HTTP/2 server reads
// the setting from the environment once, when the process starts: only
// then does it announce SETTINGS_ENABLE_CONNECT_PROTOCOL and take
// extended CONNECT requests.
func inXConnect(t *testing.T) bool {
	t.Helper()
	if strings.Contains(os.Getenv("GODEBUG"), "http2xconnect=1") {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*waitLimit)
	defer cancel()
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GODEBUG="+os.Getenv("GODEBUG")+",http2xconnect=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("PASS")) {
		t.Fatalf("with GODEBUG=http2xconnect=1: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("with GODEBUG=http2xconnect=1:\n%s", out)
	}
	return false
}

// h2WS is a WebSocket over HTTP/2 (RFC 8441) from x/net/http2's client:
// frames it sends are masked, as a client's must be.
type h2WS struct {
	resp *http.Response
	out  *io.PipeWriter
	in   *bufio.Reader
}

// dialH2WS sends an extended CONNECT for a WebSocket at path to the
// gateway at addr (h2c by prior knowledge) with header, and returns the
// answer; the stream, when the answer is 200, is the WebSocket's, bounded
// by waitLimit and closed when the test ends.
func dialH2WS(t *testing.T, addr, path string, header http.Header) *h2WS {
	t.Helper()
	tr := h2cTransport()
	return dialH2WSOver(t, tr, "http://"+addr+path, header)
}

// dialH2WSOver is dialH2WS to url over tr.
func dialH2WSOver(t *testing.T, tr *http2.Transport, url string, header http.Header) *h2WS {
	t.Helper()
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodConnect, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set(":protocol", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("extended CONNECT: %v", err)
	}
	t.Cleanup(func() {
		pw.Close()
		resp.Body.Close()
	})
	return &h2WS{resp: resp, out: pw, in: bufio.NewReader(resp.Body)}
}

// send sends one frame (FIN set) of opcode op with payload p.
func (c *h2WS) send(t *testing.T, op byte, p []byte) {
	t.Helper()
	b := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0x80|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, 0x80|127), uint64(n))
	}
	var key [4]byte
	_, _ = rand.Read(key[:])
	b = append(b, key[:]...)
	for i, x := range p {
		b = append(b, x^key[i%4])
	}
	if _, err := c.out.Write(b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// recv reads one frame (the upstream's, unmasked) and returns its opcode
// and payload.
func (c *h2WS) recv(t *testing.T) (byte, []byte, error) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(c.in, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(c.in, l[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(c.in, l[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	if h[1]&0x80 != 0 || h[0]&0x80 == 0 || n > 1<<20 {
		return 0, nil, fmt.Errorf("frame %x: masked, fragmented or too long", h)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(c.in, p)
	return h[0] & 0x0f, p, err
}

// echo sends a message and checks that it comes back.
func (c *h2WS) echo(t *testing.T, op byte, p []byte) {
	t.Helper()
	c.send(t, op, p)
	gotOp, got, err := c.recv(t)
	if err != nil || gotOp != op || !bytes.Equal(got, p) {
		t.Fatalf("echo of %d bytes: opcode %d, %d bytes, %v", len(p), gotOp, len(got), err)
	}
}

// closeCode reads frames until a close frame and returns its code.
func (c *h2WS) closeCode(t *testing.T) int {
	t.Helper()
	for range 1000 {
		op, p, err := c.recv(t)
		if err != nil {
			t.Fatalf("waiting for a close frame: %v", err)
		}
		if op == 0x8 && len(p) >= 2 {
			return int(binary.BigEndian.Uint16(p))
		}
	}
	t.Fatal("no close frame in 1000")
	return 0
}

// closeNormally sends a close frame 1000 and reads the one that answers.
func (c *h2WS) closeNormally(t *testing.T) {
	t.Helper()
	c.send(t, 0x8, []byte{0x03, 0xe8})
	if got := c.closeCode(t); got != 1000 {
		t.Errorf("the close frame's answer: %d, want 1000", got)
	}
}

// TestWebSocketOverHTTP2 opens WebSockets over HTTP/2 (RFC 8441: an
// extended CONNECT with :protocol websocket) through the gateway to an
// HTTP/1.1 WebSocket echo server, on h2c and on the TLS listener: the upstream gets an HTTP/1.1 handshake
// (GET, Upgrade, the gateway's X-Forwarded-For and X-Request-Id, the
// client's path), the client a 200, and many messages of every size pass
// both ways until a close handshake; the rate limit applies at the
// handshake (429), a WebSocket holds its concurrency slot for its
// lifetime without feeding the adaptive limit a sample (503 for a third
// while two are open; released when one closes), the idle timeout and
// shutdown close it with a close frame 1001 to both sides, one quiet for
// longer than server.write_timeout and read_timeout stays open, and a target's refusal is
// passed on. (The gateway answered the handshake as a plain
// CONNECT request, which no WebSocket server takes.)
func TestWebSocketOverHTTP2(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forH2Engines(t, func(t *testing.T, engine string) {
		t.Run("messages", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, "")
			c := dialH2WS(t, gw.Addr, "/chat?room=1", http.Header{"X-Client": {"yes"}})
			if c.resp.StatusCode != http.StatusOK || c.resp.Header.Get("Sec-Websocket-Accept") != "" {
				t.Fatalf("handshake: %d %v, want 200 without Sec-WebSocket-Accept", c.resp.StatusCode, c.resp.Header)
			}
			h := <-up.header
			if h.Get("X-Test-Target") != "/chat?room=1" || h.Get("Upgrade") != "websocket" || h.Get("Sec-Websocket-Version") != "13" ||
				h.Get("X-Client") != "yes" || h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Request-Id") == "" || h.Get(":protocol") != "" {
				t.Errorf("the upstream's handshake: %v", h)
			}
			for i := range 64 {
				size := []int{0, 1, 125, 126, 4096, 65535, 65536, 200000}[i%8]
				op := byte(1 + i%2) // text, binary
				c.echo(t, op, bytes.Repeat([]byte{byte('a' + i%26)}, size))
			}
			const burst = 100
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for i := range burst {
					c.send(t, 1, fmt.Appendf(nil, "msg %d", i))
				}
			}()
			for i := range burst {
				if _, got, err := c.recv(t); err != nil || string(got) != fmt.Sprintf("msg %d", i) {
					t.Fatalf("message %d: %q, %v", i, got, err)
				}
			}
			<-sent
			c.closeNormally(t)
			if got := <-up.closes; got != websocket.StatusNormalClosure {
				t.Errorf("the upstream read close status %v, want 1000", got)
			}
		})
		t.Run("rate limit", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, `    policies: {rate_limit: {limit: 1, period: 1h, key: route}}`)
			c := dialH2WS(t, gw.Addr, "/a", nil)
			for i := range 10 { // messages are not requests
				c.echo(t, 1, fmt.Appendf(nil, "%d", i))
			}
			if r := dialH2WS(t, gw.Addr, "/a", nil).resp; r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
				t.Fatalf("second handshake: %d %v, want 429 with Retry-After", r.StatusCode, r.Header)
			}
			c.echo(t, 1, []byte("still open"))
			c.closeNormally(t)
		})
		t.Run("concurrency slot", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, `    policies: {concurrency: {adaptive: {algorithm: aimd, min: 1, max: 2, initial: 2}}}`)
			c1 := dialH2WS(t, gw.Addr, "/a", nil)
			c2 := dialH2WS(t, gw.Addr, "/b", nil)
			if c1.resp.StatusCode != 200 || c2.resp.StatusCode != 200 {
				t.Fatalf("handshakes: %d, %d", c1.resp.StatusCode, c2.resp.StatusCode)
			}
			if r := dialH2WS(t, gw.Addr, "/c", nil).resp; r.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("third handshake while two hold the slots: %d, want 503", r.StatusCode)
			}
			gw.Clock.Advance(10 * time.Minute)
			c1.echo(t, 1, []byte("late"))
			c1.closeNormally(t)
			eventually(t, "the slot to be released", func() bool { return gw.routeStatus(t, "ws").ConcurrencyInFlight == 1 })
			c3 := dialH2WS(t, gw.Addr, "/c", nil)
			if c3.resp.StatusCode != 200 {
				t.Fatalf("handshake once a slot is free: %d", c3.resp.StatusCode)
			}
			c2.closeNormally(t)
			c3.closeNormally(t)
			eventually(t, "every slot to be released", func() bool { return gw.routeStatus(t, "ws").ConcurrencyInFlight == 0 })
			if got := gw.routeStatus(t, "ws").ConcurrencyLimit; got != 2 {
				t.Errorf("adaptive limit %d after WebSockets open for ten minutes, want 2 (no latency sample)", got)
			}
		})
		t.Run("idle timeout", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1m}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
			c := dialH2WS(t, gw.Addr, "/a", nil)
			c.echo(t, 1, []byte("hello"))
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := gw.Clock.BlockUntil(ctx, 1); err != nil { // the tunnel's idle timer
				t.Fatal(err)
			}
			gw.Clock.Advance(time.Minute)
			if got := c.closeCode(t); got != 1001 {
				t.Errorf("the client read close code %d, want 1001", got)
			}
			if got := <-up.closes; got != websocket.StatusGoingAway {
				t.Errorf("the upstream read close status %v, want 1001", got)
			}
		})
		t.Run("quiet past the timeouts", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s, write_timeout: 50ms, read_timeout: 50ms}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
			c := dialH2WS(t, gw.Addr, "/a", nil)
			c.echo(t, 1, []byte("hello"))
			time.Sleep(10 * 50 * time.Millisecond) // both timeouts are on the wall clock (net/http's)
			c.echo(t, 1, []byte("still open"))
			c.closeNormally(t)
		})
		t.Run("shutdown", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, "")
			c := dialH2WS(t, gw.Addr, "/a", nil)
			c.echo(t, 1, []byte("hello"))
			gw.stopped.Store(true) // stopped here
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- gw.Shutdown(ctx) }()
			c.echo(t, 1, []byte("during shutdown"))
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned %v with a WebSocket open before its deadline", err)
			default:
			}
			cancel() // the deadline
			if got := c.closeCode(t); got != 1001 {
				t.Errorf("the client read close code %d, want 1001", got)
			}
			if n, err := c.in.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("after the close frame: %d bytes, %v; want the stream's end (io.EOF)", n, err)
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
		t.Run("TLS", func(t *testing.T) {
			up := startWSUpstream(t)
			ca := testpki.NewCA(t)
			gw := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("a.test")), up.URL, ""))
			addr := serveTLS(t, gw)
			c := dialH2WSOver(t, &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "a.test"}}, "https://"+addr+"/tls", nil)
			if c.resp.StatusCode != http.StatusOK {
				t.Fatalf("handshake over TLS: %d", c.resp.StatusCode)
			}
			if h := <-up.header; h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Test-Target") != "/tls" {
				t.Errorf("the upstream's handshake: %v, want X-Forwarded-Proto https", h)
			}
			c.echo(t, 2, bytes.Repeat([]byte("x"), 70000))
			c.closeNormally(t)
		})
		t.Run("refused", func(t *testing.T) {
			up := startWSUpstream(t)
			gw := wsGateway(t, engine, up, "")
			r := dialH2WS(t, gw.Addr, "/forbidden", nil).resp
			body, _ := io.ReadAll(r.Body)
			if r.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "no sockets here") {
				t.Errorf("a refused handshake: %d %q, want the upstream's 403", r.StatusCode, body)
			}
		})
	})
}

// TestExtendedConnectNeedsGODEBUG pins what the gateway's HTTP/2 does
// without GODEBUG=http2xconnect=1, as README says: its settings do not
// announce SETTINGS_ENABLE_CONNECT_PROTOCOL, and an extended CONNECT's
// stream is reset (PROTOCOL_ERROR), so clients open WebSockets over
// HTTP/1.1. (When Go's default changes, this fails: README and
// websocket_h2.go are to be told.)
func TestExtendedConnectNeedsGODEBUG(t *testing.T) {
	if strings.Contains(os.Getenv("GODEBUG"), "http2xconnect=1") {
		t.Skip("GODEBUG has http2xconnect=1")
	}
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, "")
		h := dialH2(t, gw.Addr)
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok {
			t.Fatalf("first frame %v, want SETTINGS", f)
		}
		if v, ok := sf.Value(http2.SettingEnableConnectProtocol); ok && v != 0 {
			t.Errorf("SETTINGS_ENABLE_CONNECT_PROTOCOL = %d without GODEBUG=http2xconnect=1", v)
		}
		h.headers(t, 1, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test",
			":path", "/a", "sec-websocket-version", "13")
		if st, _ := h.read(t, 1); st != "RST PROTOCOL_ERROR" {
			t.Errorf("an extended CONNECT: %s, want RST PROTOCOL_ERROR", st)
		}
	})
}

// TestWebSocketOverHTTP2TargetNotSwitching sends WebSocket handshakes
// over HTTP/2 to a target that answers them with a 200 and a page (a
// server that serves the GET and ignores the upgrade) or with a 103
// Early Hints and nothing more: the client gets a 502 each time. (The
// 200 was passed on, and the interim 103 made net/http answer 200: to an
// HTTP/2 client a 2xx means the WebSocket is open, and it read the page
// as frames.)
func TestWebSocketOverHTTP2TargetNotSwitching(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if r.URL.Path == "/early" {
				_, _ = c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"))
				_, _ = br.ReadByte() // until the gateway closes the connection
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n<html></html>"))
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.addr))
		h := dialH2(t, gw.Addr)
		for i, path := range []string{"/page", "/early"} {
			id := uint32(2*i + 1)
			h.headers(t, id, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test",
				":path", path, "sec-websocket-version", "13")
			if st, body := h.read(t, id); st != "502" {
				t.Errorf("%s: %s %q, want 502", path, st, body)
			}
		}
	})
}

// TestWebSocketOverHTTP2SlowHandshake opens a WebSocket over HTTP/2
// whose target accepts the handshake only after server.read_timeout has
// passed for it: messages then pass both ways. The target knows the time
// has passed by an event, not a clock: a witness request, which it sends
// through the gateway once the handshake has reached it, with a body that
// never ends, has been ended by its own read deadline, which runs from a
// later start. (The stream's read deadline, running since the request
// came, was lifted only once the target had answered: by then it had
// passed, net/http had closed the request's body, and the WebSocket ended
// at its first read.)
func TestWebSocketOverHTTP2SlowHandshake(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forH2Engines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		gwAddr := make(chan string, 1) // the gateway's, for the one handshake
		witness := make(chan error, 1) // the witness's end, before the handshake's answer
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/witness" {
				_, _ = io.Copy(io.Discard, r.Body)
				return
			}
			witness <- readTimedOut(<-gwAddr)
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(context.Background())
				if err != nil || c.Write(context.Background(), typ, msg) != nil {
					return
				}
			}
		}))
		defer up.Close()
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, read_timeout: 50ms}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, up.URL))
		gwAddr <- gw.Addr
		c := dialH2WS(t, gw.Addr, "/slow", nil)
		if c.resp.StatusCode != http.StatusOK {
			t.Fatalf("handshake: %d", c.resp.StatusCode)
		}
		if err := <-witness; err != nil {
			t.Fatalf("the witness: %v", err)
		}
		c.echo(t, 1, []byte("after a slow handshake"))
		c.closeNormally(t)
	})
}

// readTimedOut sends the gateway at addr, over h2c, a POST to /witness
// whose body never ends, and returns nil once the gateway has ended it,
// as server.read_timeout makes it do; an error if the wait reached
// waitLimit instead.
func readTimedOut(addr string) error {
	tr := h2cTransport()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/witness", pr)
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("not ended by the read timeout in %v", waitLimit)
	}
	return nil
}

// h2cTransport is golang.org/x/net/http2's client over h2c with prior
// knowledge.
func h2cTransport() *http2.Transport {
	return &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
}
