package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// h2TLSDial opens a TLS connection to addr whose client chooses HTTP/2 by
// ALPN, closed when the test ends, and starts HTTP/2 on it.
func h2TLSDial(t *testing.T, addr string, ca *testpki.CA) *h2Client {
	t.Helper()
	c, _ := dialTLS(t, addr, ca.Pool, "h2")
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	return h2Start(t, c)
}

// h2Server names the HTTP/2 server whose first SETTINGS come on fr:
// "net/http" (its HTTP/2 server sends SETTINGS_MAX_FRAME_SIZE) or "loops"
// (which do not); both give server.http2.max_stream_buffer_bytes as the
// stream window.
func h2Server(t *testing.T, fr *h2Client) string {
	t.Helper()
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	if w, _ := sf.Value(http2.SettingInitialWindowSize); w != 1<<20 {
		t.Errorf("stream window %d, want server.http2.max_stream_buffer_bytes, 1 MiB", w)
	}
	if _, ok := sf.Value(http2.SettingMaxFrameSize); ok {
		return "net/http"
	}
	return "loops"
}

// TestH2LoopsOverTLS serves Go's HTTP/2 client over TLS (ALPN h2) with
// server.http2.loops: on server.engine loop the loops take the connection
// (their stream window, and LoopTLSConns counts them), on the goroutine
// engine net/http's HTTP/2 server keeps it; on both, requests with and
// without bodies, many at once on the one connection, the upstream told
// https.
func TestH2LoopsOverTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		tg, addr, ca := loopTLSGateway(t, engine, ", http2: {loops: true}")
		server, taken := "net/http", uint64(0)
		if engine == "loop" {
			server, taken = "loops", 2 // the settings' and the client's
		}
		if got := h2Server(t, h2TLSDial(t, addr, ca)); got != server {
			t.Errorf("served by %s, want %s", got, server)
		}
		c := protoClient(t, "h2", ca.Pool, "")
		for i := range 3 {
			resp, err := c.Post("https://"+addr+"/p", "text/plain", strings.NewReader(strings.Repeat("x", i*1000)))
			if err != nil {
				t.Fatal(err)
			}
			if body, want := readAll(t, resp), fmt.Sprintf("POST /p https %d", i*1000); resp.ProtoMajor != 2 || body != want {
				t.Errorf("request %d: %s %q, want HTTP/2 %q", i, resp.Proto, body, want)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := range 50 {
			wg.Go(func() {
				r, err := tryDo(c, "GET", fmt.Sprintf("https://%s/n%d", addr, i), nil, nil)
				if want := fmt.Sprintf("GET /n%d https 0", i); err != nil || r.Code != 200 || r.Body != want {
					errs <- fmt.Errorf("request %d: %d %q %v, want %q", i, r.Code, r.Body, err, want)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := gateway.LoopTLSConns(tg.Gateway); n != taken {
			t.Errorf("the loops took %d TLS connections, want %d", n, taken)
		}
	})
}

// TestH2LoopsOverTLSOff turns server.http2.loops off: HTTP/2 over TLS
// stays on net/http's HTTP/2 server, while the loops take HTTP/1.1.
func TestH2LoopsOverTLSOff(t *testing.T) {
	tg, addr, ca := loopTLSGateway(t, "loop", ", http2: {loops: false}")
	if got := h2Server(t, h2TLSDial(t, addr, ca)); got != "net/http" {
		t.Errorf("served by %s, want net/http", got)
	}
	r := do(t, protoClient(t, "h2", ca.Pool, ""), "GET", "https://"+addr+"/a", nil, nil)
	if r.Code != 200 || r.Body != "GET /a https 0" {
		t.Errorf("%d %q", r.Code, r.Body)
	}
	if n := gateway.LoopTLSConns(tg.Gateway); n != 0 {
		t.Errorf("the loops took %d TLS connections", n)
	}
}

// TestH2LoopsOverTLSBridged serves over TLS what the loops do not serve
// themselves (a route that coalesces) through the bridge, and the upstream
// is told https (the bridged request carries the connection's TLS state:
// it was told http before), then the next stream on the connection.
func TestH2LoopsOverTLSBridged(t *testing.T) {
	_, addr, ca := loopTLSGateway(t, "loop", ", http2: {loops: true}")
	fr := h2TLSDial(t, addr, ca)
	get := func(id uint32, path string) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
			BlockFragment: h2Headers(":method", "GET", ":scheme", "https", ":authority", "localhost", ":path", path)})
	}
	get(1, "/c/x")
	if status, body, code, ok := h2Answer(t, fr, 1); !ok || status != "200" || body != "GET /c/x https 0" {
		t.Errorf("a coalescing route: %s %q %v, want 200 \"GET /c/x https 0\"", status, body, code)
	}
	get(3, "/ok")
	if status, body, code, ok := h2Answer(t, fr, 3); !ok || status != "200" || body != "GET /ok https 0" {
		t.Errorf("then: %s %q %v", status, body, code)
	}
}

// TestH2LoopsOverTLSNotHTTP2 has a client that chose h2 by ALPN send an
// HTTP/1.1 request: the loop closes the connection without an answer, as
// net/http's HTTP/2 server does.
func TestH2LoopsOverTLSNotHTTP2(t *testing.T) {
	_, addr, ca := loopTLSGateway(t, "loop", ", http2: {loops: true}")
	c, br := dialTLS(t, addr, ca.Pool, "h2")
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("answered (%q...): the connection is open", b)
	}
}

// TestH2LoopsOverTLSCloseNotify has the client end its side with
// close_notify while its connection is idle: the loop closes the
// connection.
func TestH2LoopsOverTLSCloseNotify(t *testing.T) {
	_, addr, ca := loopTLSGateway(t, "loop", ", http2: {loops: true}")
	c, _ := dialTLS(t, addr, ca.Pool, "h2")
	fr := h2Start(t, c)
	if got := h2Server(t, fr); got != "loops" {
		t.Fatalf("served by %s, want the loops", got)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := fr.ReadFrame(); err != nil {
			return // closed (SETTINGS' ack, then the end)
		}
	}
	t.Fatal("the connection is still open after close_notify")
}

// TestH2LoopsOverTLSShutdown drains an HTTP/2 connection over TLS on the
// loops: GOAWAY, the request in flight answered, then the connection
// closed and Shutdown done.
func TestH2LoopsOverTLSShutdown(t *testing.T) {
	ca := testpki.NewCA(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "late")
	})
	tg := tlsGateway(t, "loop", "http2: {loops: true}", certList(ca.Server("localhost", "127.0.0.1")), up.URL)
	fr := h2TLSDial(t, serveTLS(t, tg), ca)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "https", ":authority", "x", ":path", "/hold")})
	<-arrived
	stopped := make(chan struct{})
	go func() { tg.stop(t); close(stopped) }()
	var goaway *http2.GoAwayFrame
	for range 100 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = g
			break
		}
	}
	if goaway == nil || goaway.ErrCode != http2.ErrCodeNo || goaway.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v", goaway)
	}
	close(release)
	if status, body, code, ok := h2Answer(t, fr, 1); !ok || status != "200" || body != "late" {
		t.Fatalf("the request in flight: %s %q %v", status, body, code)
	}
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("the connection is still open")
	}
	<-stopped
}

// TestH2LoopsOverTLSH2load loads HTTP/2 over TLS on the loops with h2load
// (Debian's nghttp2-client), when it is installed: every request
// succeeds.
func TestH2LoopsOverTLSH2load(t *testing.T) {
	path, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("no h2load")
	}
	tg, addr, _ := loopTLSGateway(t, "loop", ", http2: {loops: true}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-n", "2000", "-c", "4", "-m", "8", "https://"+addr+"/load").CombinedOutput()
	if err != nil {
		t.Fatalf("h2load: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored") ||
		!strings.Contains(string(out), "2000 2xx") || !strings.Contains(string(out), "Application protocol: h2") {
		t.Fatalf("h2load:\n%s", out)
	}
	if n := gateway.LoopTLSConns(tg.Gateway); n != 4 {
		t.Errorf("the loops took %d TLS connections, want h2load's 4", n)
	}
}

// TestH2LoopsOverTLSUnreadAnswers opens its windows wide, asks for large
// answers over TLS on the loops and never reads: once the answers waiting
// to be sent pass their bound, the loop takes nothing more from the
// connection, and closes it when the client sends on past the bound of
// its decrypted, unread input.
func TestH2LoopsOverTLSUnreadAnswers(t *testing.T) {
	ca := testpki.NewCA(t)
	answer := make([]byte, 60000)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "60000") // read whole by the loop, not streamed
		_, _ = w.Write(answer)
	})
	tg := tlsGateway(t, "loop", "http2: {loops: true}", certList(ca.Server("localhost", "127.0.0.1")), up.URL)
	raddr, _ := net.ResolveTCPAddr("tcp", serveTLS(t, tg))
	raw, err := net.DialTCP("tcp", nil, raddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetReadBuffer(4096)
	_ = raw.SetDeadline(time.Now().Add(waitLimit))
	c := tls.Client(raw, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	b.WriteString(http2.ClientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = fr.WriteWindowUpdate(0, 1<<30)
	block := h2Headers(":method", "GET", ":scheme", "https", ":authority", "localhost", ":path", "/unread")
	for id := uint32(1); id < 2*200; id += 2 {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
	}
	sent := 0
	for sent < 64<<20 {
		for b.Len() < 16<<10 {
			_ = fr.WriteWindowUpdate(0, 1) // filler the loop decrypts, and takes only while it sends
		}
		n, err := c.Write(b.Bytes())
		sent += n
		b.Reset()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("after %d bytes: %v", sent, err)
			}
			break
		}
	}
	if sent < 1<<20 || sent >= 64<<20 {
		t.Fatalf("the connection ended after %d bytes", sent)
	}
}
