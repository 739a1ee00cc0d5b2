//go:build linux

package gateway_test

import (
	"bytes"
	"context"
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
	"golang.org/x/net/http2/hpack"
)

// h2LoopsGateway starts a gateway on the loop engine with h2c on the
// loops (server.http2.loops) and a stream window of 64 KiB: the routes in
// YAML (routes, or ""), then one route "all" to up.
func h2LoopsGateway(t *testing.T, up *upstream, routes string) *testGateway {
	t.Helper()
	tg := startGateway(t, parseConfig(t, `
server: {engine: loop, http2: {loops: true, max_stream_buffer_bytes: 65536}}
upstreams:
  up: {targets: ["%s"]}
routes:
%s  - name: all
    upstream: up
`, up.URL, routes))
	if _, netHTTP := h2Settings(t, tg.Addr)[http2.SettingMaxFrameSize]; netHTTP {
		t.Fatal("the h2c connection is net/http's HTTP/2 server's, not the loops'")
	}
	return tg
}

// h2Settings returns the settings the gateway at addr sends first on an
// h2c connection.
func h2Settings(t *testing.T, addr string) map[http2.SettingID]uint32 {
	t.Helper()
	fr := h2Dial(t, addr)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	m := map[http2.SettingID]uint32{}
	_ = sf.ForeachSetting(func(s http2.Setting) error { m[s.ID] = s.Val; return nil })
	return m
}

// h2Client is an h2c connection of a test: its framer, and the decoder of
// its answers' header blocks, which puts their status in status.
type h2Client struct {
	*http2.Framer
	dec    *hpack.Decoder
	status string
}

// h2Dial opens an h2c connection (prior knowledge) to addr, closed when
// the test ends, and sends the preface and empty SETTINGS.
func h2Dial(t *testing.T, addr string) *h2Client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return h2Start(t, c)
}

// h2Start sends the preface and empty SETTINGS on c, an HTTP/2 client
// connection, and returns its client.
func h2Start(t *testing.T, c net.Conn) *h2Client {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	cl := &h2Client{Framer: http2.NewFramer(c, c)}
	cl.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			cl.status = f.Value
		}
	})
	if err := cl.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return cl
}

// h2Headers encodes a request's header block.
func h2Headers(fields ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// TestH2LoopsGoClient serves Go's HTTP/2 client (h2c, prior knowledge) on
// the loops: GET, HEAD, POST with a body, cookies, many requests at once
// on one connection; the upstream sees the HTTP/1.1 request the loops
// make of each (Host naming the target, X-Forwarded-*, the cookie crumbs
// joined), and the client the upstream's answer.
func TestH2LoopsGoClient(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Up", "1")
		fmt.Fprintf(w, "%s %s %s %q cookie=%q xff=%s proto=%s host=%s fhost=%s", r.Proto, r.Method, r.URL.RequestURI(), body,
			r.Header.Get("Cookie"), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Host, r.Header.Get("X-Forwarded-Host"))
	})
	tg := h2LoopsGateway(t, up, "")
	c := protoClient(t, "h2c", nil, "")
	req, _ := http.NewRequest("POST", tg.URL+"/a?q=1", strings.NewReader("hello"))
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	req.Host = "example.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`HTTP/1.1 POST /a?q=1 "hello" cookie="a=1; b=2" xff=127.0.0.1 proto=http host=%s fhost=example.test`, up.addr())
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != want || resp.Header.Get("X-Up") != "1" {
		t.Fatalf("POST: %s %d %v\n%q\nwant %q", resp.Proto, resp.StatusCode, resp.Header, body, want)
	}
	resp, err = c.Head(tg.URL + "/h")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			r, err := tryDo(c, "GET", fmt.Sprintf("%s/n%d", tg.URL, i), nil, nil)
			if err != nil || r.Code != 200 || !strings.Contains(r.Body, fmt.Sprintf("GET /n%d ", i)) {
				errs <- fmt.Errorf("request %d: %d %q %v", i, r.Code, r.Body, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// h2Answer reads frames from fr until stream id ends, answering the
// server's SETTINGS, and returns its status and body, or the code of its
// RST_STREAM (the connection's GOAWAY fails the test).
func h2Answer(t *testing.T, fr *h2Client, id uint32) (status, body string, reset http2.ErrCode, ok bool) {
	t.Helper()
	fr.status = ""
	var b strings.Builder
	for range 1000 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID == id {
				if _, err := fr.dec.Write(f.HeaderBlockFragment()); err != nil {
					t.Fatal(err)
				}
				if f.StreamEnded() {
					return fr.status, b.String(), 0, true
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				b.Write(f.Data())
				if f.StreamEnded() {
					return fr.status, b.String(), 0, true
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "", "", f.ErrCode, false
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", f.ErrCode)
		}
	}
	t.Fatalf("stream %d did not end in 1000 frames", id)
	return "", "", 0, false
}

// h2AwaitWindow reads frames until a WINDOW_UPDATE of stream id.
func h2AwaitWindow(t *testing.T, fr *h2Client, id uint32) {
	t.Helper()
	for range 1000 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("awaiting stream %d's window: %v", id, err)
		}
		if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == id {
			return
		}
	}
	t.Fatalf("no WINDOW_UPDATE of stream %d in 1000 frames", id)
}

// TestH2LoopsXNetTransport serves golang.org/x/net/http2's Transport
// (AllowHTTP, prior knowledge) on the loops, several requests on its one
// connection.
func TestH2LoopsXNetTransport(t *testing.T) {
	up := startUpstream(t, "up", nil)
	tg := h2LoopsGateway(t, up, "")
	tr := h2cTransport()
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: waitLimit}
	for i := range 5 {
		r := do(t, c, "GET", fmt.Sprintf("%s/x%d", tg.URL, i), nil, nil)
		if r.Code != 200 || r.Body != fmt.Sprintf("up /x%d", i) {
			t.Fatalf("request %d: %d %q", i, r.Code, r.Body)
		}
	}
}

// TestH2LoopsBridged serves on a goroutine (the HTTP/2 engine's handler)
// the streams the loops do not serve as HTTP/1.1, which they refused
// before: a body past 64 KiB, a path to normalize, request trailers, a
// route that is not the loops' (coalescing), and an answer that streams
// from a goroutine (past 64 KiB). The connection serves on.
func TestH2LoopsBridged(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/large" {
			_, _ = w.Write(bytes.Repeat([]byte("l"), 100<<10))
			return
		}
		fmt.Fprintf(w, "up %s %d %s", r.URL.Path, n, r.Trailer.Get("X-T"))
	})
	tg := h2LoopsGateway(t, up, `  - name: coalesced
    match: {path_prefix: /co/}
    upstream: up
    policies: {coalesce: true}
`)
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	_ = fr.WriteWindowUpdate(0, 1<<20)
	get := func(path string) []byte {
		return h2Headers(":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", path)
	}
	id := uint32(1)
	check := func(what string, write func(id uint32), want string) {
		t.Helper()
		write(id)
		status, body, code, ok := h2Answer(t, fr, id)
		if !ok || status != "200" || body != want {
			t.Errorf("%s: %s %.40q (%d bytes) %v, want 200 %.40q", what, status, body, len(body), code, want)
		}
		id += 2
	}
	check("a body past 64 KiB", func(id uint32) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/", "content-length", "70000")})
		for sent := 0; sent < 70000; sent += 10000 {
			if sent == 60000 {
				h2AwaitWindow(t, fr, id) // the stream's 64 KiB window
			}
			_ = fr.WriteData(id, sent+10000 >= 70000, make([]byte, 10000))
		}
	}, "up / 70000 ")
	check("a path to normalize", func(id uint32) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true, BlockFragment: get("/a/../b")})
	}, "up /b 0 ")
	check("trailers", func(id uint32) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/", "trailer", "x-t")})
		_ = fr.WriteData(id, false, []byte("x"))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true, BlockFragment: h2Headers("x-t", "1")})
	}, "up / 1 1")
	check("a coalescing route", func(id uint32) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true, BlockFragment: get("/co/x")})
	}, "up /co/x 0 ")
	check("an answer past 64 KiB", func(id uint32) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true, BlockFragment: get("/large")})
	}, strings.Repeat("l", 100<<10))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true, BlockFragment: get("/ok")})
	if status, body, code, ok := h2Answer(t, fr, id); !ok || status != "200" || body != "up /ok 0 " {
		t.Errorf("then: %s %q %v", status, body, code)
	}
}

// TestH2LoopsPolicies answers h2c requests the route's policies refuse as
// the loops answer HTTP/1.1 ones: 429 with Retry-After past the rate
// limit, 404 without a route.
func TestH2LoopsPolicies(t *testing.T) {
	up := startUpstream(t, "up", nil)
	tg := startGateway(t, parseConfig(t, `
server: {engine: loop, http2: {loops: true}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: api
    match: {path_prefix: /api/}
    upstream: up
    policies:
      rate_limit: {algorithm: token_bucket, limit: 2, period: 1m, key: ip}
`, up.URL))
	c := protoClient(t, "h2c", nil, "")
	var codes []int
	for range 3 {
		r := do(t, c, "GET", tg.URL+"/api/x", nil, nil)
		codes = append(codes, r.Code)
		if r.Code == 429 && r.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Errorf("codes %v, want [200 200 429]", codes)
	}
	if r := do(t, c, "GET", tg.URL+"/other", nil, nil); r.Code != 404 {
		t.Errorf("no route: %d", r.Code)
	}
}

// TestH2LoopsClientReset cancels an h2c request on the loops (the client
// resets its stream) while the upstream holds it: the attempt is cut and
// the upstream sees its connection go.
func TestH2LoopsClientReset(t *testing.T) {
	checkClientReset(t, func(up *upstream) *testGateway { return h2LoopsGateway(t, up, "") })
}

// TestH2LoopsShutdown drains an h2c connection on the loops: GOAWAY, the
// request in flight answered, then the connection closed and Shutdown
// done.
func TestH2LoopsShutdown(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "late")
	})
	tg := h2LoopsGateway(t, up, "")
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/hold")})
	<-arrived
	stopped := make(chan struct{})
	go func() { tg.stop(t); close(stopped) }()
	var goaway *http2.GoAwayFrame
	for goaway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = g
		}
	}
	if goaway.ErrCode != http2.ErrCodeNo || goaway.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v, last stream %d", goaway.ErrCode, goaway.LastStreamID)
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

// TestH2LoopsOnByDefault checks that the loops serve h2c by default on
// the loop engine (their SETTINGS lack SETTINGS_MAX_FRAME_SIZE, which
// net/http's HTTP/2 server sends), and that server.http2.loops false gives
// it to net/http's HTTP/2 server; both give
// server.http2.max_stream_buffer_bytes (1 MiB) as the stream window.
func TestH2LoopsOnByDefault(t *testing.T) {
	up := startUpstream(t, "up", nil)
	for _, c := range []struct{ http2, want string }{{"{}", "loops"}, {"{loops: false}", "net/http"}} {
		tg := startGateway(t, parseConfig(t, `
server: {engine: loop, http2: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, c.http2, up.URL))
		settings := h2Settings(t, tg.Addr)
		got := "loops"
		if _, ok := settings[http2.SettingMaxFrameSize]; ok {
			got = "net/http"
		}
		if got != c.want || settings[http2.SettingInitialWindowSize] != 1<<20 {
			t.Errorf("http2 %s: served by %s, stream window %d; want %s, 1 MiB", c.http2, got, settings[http2.SettingInitialWindowSize], c.want)
		}
	}
}

// TestH2LoopsH2load loads h2c on the loops with h2load (Debian's
// nghttp2-client), when it is installed: every request succeeds.
func TestH2LoopsH2load(t *testing.T) {
	path, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("no h2load")
	}
	up := startUpstream(t, "up", nil)
	tg := h2LoopsGateway(t, up, "")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-n", "2000", "-c", "4", "-m", "8", tg.URL+"/load").CombinedOutput()
	if err != nil {
		t.Fatalf("h2load: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored") ||
		!strings.Contains(string(out), "2000 2xx") {
		t.Fatalf("h2load:\n%s", out)
	}
}

// TestH2LoopsUnreadAnswers opens its windows wide, asks for large answers
// on an h2c connection on the loops and never reads: once the answers
// waiting to be sent pass their bound, the loop takes nothing more from
// the connection, and closes it when the client sends on past the bound
// of its unread input.
func TestH2LoopsUnreadAnswers(t *testing.T) {
	answer := make([]byte, 60000)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "60000") // read whole by the loop, not streamed
		_, _ = w.Write(answer)
	})
	tg := h2LoopsGateway(t, up, "")
	raddr, _ := net.ResolveTCPAddr("tcp", tg.Addr)
	c, err := net.DialTCP("tcp", nil, raddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadBuffer(4096)
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	b.WriteString(http2.ClientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = fr.WriteWindowUpdate(0, 1<<30)
	block := h2Headers(":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", "/unread")
	for id := uint32(1); id < 2*200; id += 2 {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
	}
	sent := 0
	for sent < 64<<20 {
		for b.Len() < 16<<10 {
			_ = fr.WriteWindowUpdate(0, 1) // filler the loop reads, and takes only while it sends
		}
		// A timeout is a gateway that takes nothing for waitLimit and
		// keeps the connection: the whole exchange may take longer on a
		// slow machine.
		_ = c.SetWriteDeadline(time.Now().Add(waitLimit))
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
