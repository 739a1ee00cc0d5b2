//go:build linux

package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2LoopsBridgeResetAwaitingWindow has an h2c client on the loops
// open no window for a streamed answer, then reset the stream while the
// bridge's goroutine waits for the window: the upstream's answer ends
// (its writes fail), for an answer the loops began (unstreamed) and for
// one of a route they do not serve (ServeHTTP), and the connection serves
// on.
func TestH2LoopsBridgeResetAwaitingWindow(t *testing.T) {
	for _, path := range []string{"/stream", "/co/stream"} {
		t.Run(path, func(t *testing.T) {
			ended := make(chan struct{}, 1)
			up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/stream") {
					fmt.Fprint(w, "ok")
					return
				}
				defer func() { ended <- struct{}{} }()
				w.Header().Set("Content-Type", "text/event-stream")
				buf := []byte("data: " + strings.Repeat("x", 1000) + "\n\n")
				for range 100000 { // bounded: 100 MB, far past what may be held
					if _, err := w.Write(buf); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			})
			tg := h2LoopsGateway(t, up, `  - name: coalesced
    match: {path_prefix: /co/}
    upstream: up
    policies: {coalesce: true}
`)
			fr := h2Dial(t, tg.Addr)
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
				BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", path)})
			for headed := false; !headed; {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatal(err)
				}
				if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == 1 {
					_, _ = fr.dec.Write(h.HeaderBlockFragment())
					headed = true
				}
			}
			_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
			select {
			case <-ended:
			case <-time.After(waitLimit):
				t.Fatal("the upstream's answer did not end after the client reset the stream")
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, EndStream: true,
				BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/ok")})
			_ = fr.WriteWindowUpdate(3, 1<<20)
			if status, body, code, ok := h2Answer(t, fr, 3); !ok || status != "200" || body != "ok" {
				t.Errorf("then: %s %q %v", status, body, code)
			}
		})
	}
}

// TestH2LoopsBridgeRapidReset opens bridged streams (a body of unknown
// length, each a goroutine) and resets each at once: the resets count
// against the connection's bound, which ends it (GOAWAY
// ENHANCE_YOUR_CALM) before 3000 of them.
func TestH2LoopsBridgeRapidReset(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	tg := h2LoopsGateway(t, up, "")
	fr := h2Dial(t, tg.Addr)
	for i := range 3000 {
		id := uint32(2*i + 1)
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/r")}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the gateway closed the connection
		}
	}
	for range 10000 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", g.ErrCode)
			}
			return
		}
	}
	t.Fatal("no GOAWAY in 10000 frames")
}

// TestH2LoopsBridgeContentLengthMismatch sends requests that declare a
// content-length of 10 and send 10 bytes then an HTTP/1.1 request line
// as DATA, to a stream the loops bridge at its HEADERS (gRPC), to one
// they bridge whole (a coalescing route) and to one they serve: each is
// reset, and no upstream reads the extra bytes. The gRPC call's excess
// comes once its upstream (h2c, which answers only at the body's end)
// has read the first 10 bytes: its body then ends in an error, in every
// round. (net/http's HTTP/2 server may answer the other two once the
// declared length is in, before the second DATA frame comes, the
// HTTP/1.1 upstream answering at once: the other rounds' streams may
// end in an answer, never in another reset.)
func TestH2LoopsBridgeContentLengthMismatch(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startWireUpstream(t, nil)
		grpcUp := startBodyReader(t, 10)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
  grpc: {targets: ["%s"]}
routes:
  - name: grpc
    match: {path_prefix: /g/}
    upstream: grpc
  - name: coalesced
    match: {path_prefix: /co/}
    upstream: up
    policies: {coalesce: true}
  - {name: all, upstream: up}
`, engine, up.addr, grpcUp.URL))
		for _, c := range []struct{ path, ct string }{{"/g/x", "application/grpc"}, {"/co/x", ""}, {"/x", ""}} {
			fr := h2Dial(t, tg.Addr)
			fields := []string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", c.path, "content-length", "10"}
			if c.ct != "" {
				fields = append(fields, "content-type", c.ct)
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: h2Headers(fields...)})
			_ = fr.WriteData(1, false, []byte("0123456789"))
			if c.ct != "" {
				select {
				case <-grpcUp.got:
				case <-time.After(waitLimit):
					t.Fatal("the gRPC upstream did not read the declared 10 bytes")
				}
			}
			_ = fr.WriteData(1, true, []byte("GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"))
			if status, _, code, ok := h2Answer(t, fr, 1); ok && ((engine == "loop" && !h2LoopsOff) || c.ct != "") {
				t.Errorf("%s %q: answered %s, want a reset", c.path, c.ct, status)
			} else if !ok && code != http2.ErrCodeProtocol {
				t.Errorf("%s %q: reset %v, want PROTOCOL_ERROR", c.path, c.ct, code)
			}
		}
		select {
		case r := <-grpcUp.ended:
			if r.err == nil || r.n != 10 {
				t.Errorf("the gRPC upstream read %d bytes of the body, then %v; want 10, then an error", r.n, r.err)
			}
		case <-time.After(waitLimit):
			t.Fatal("the gRPC upstream's read of the body did not end")
		}
		for _, r := range up.requests() {
			if strings.Contains(r.Target, "smuggled") || len(r.Body) > 10 {
				t.Errorf("the upstream saw %s %s with a body of %d bytes", r.Method, r.Target, len(r.Body))
			}
		}
	})
}

// bodyReader is an h2c upstream whose handler reads its request's body
// whole: it reports on got once it has read want bytes, and on ended how
// many it read and the error the read ended in (nil at the body's end),
// then answers 200.
type bodyReader struct {
	*httptest.Server
	got   chan struct{}
	ended chan bodyRead
}

// bodyRead is what a bodyReader's handler read of a body.
type bodyRead struct {
	n   int64
	err error
}

func startBodyReader(t *testing.T, want int64) *bodyReader {
	t.Helper()
	checkLeaks(t)
	u := &bodyReader{got: make(chan struct{}, 4), ended: make(chan bodyRead, 4)}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.CopyN(io.Discard, r.Body, want)
		if err == nil {
			u.got <- struct{}{}
			var more int64
			more, err = io.Copy(io.Discard, r.Body)
			n += more
		}
		u.ended <- bodyRead{n, err}
	}))
	u.Config.Protocols = new(http.Protocols)
	u.Config.Protocols.SetUnencryptedHTTP2(true)
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// TestH2LoopsBridgeSocketUnread has an h2c client on the loops open its
// windows wide for a streamed answer and never read its socket: the
// bridge stops taking the upstream's answer once the connection's output
// waits unread past its bound, until server.write_timeout closes the
// connection. (The windows being open, it handed the loop all the upstream
// sent, which the connection's output buffer held: tens of MiB a second.)
func TestH2LoopsBridgeSocketUnread(t *testing.T) {
	var wrote atomic.Int64
	ended := make(chan struct{}, 1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		w.Header().Set("Content-Type", "text/event-stream")
		buf := []byte("data: " + strings.Repeat("x", 16000) + "\n\n")
		for range 20000 { // bounded: 320 MB, far past what may be held
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			wrote.Add(int64(len(buf)))
		}
	})
	tg := serverGateway(t, "loop", "write_timeout: 3s, http2: {loops: true}", up.URL)
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = fr.WriteWindowUpdate(0, 1<<31-1-65535)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/stream")})
	select {
	case <-ended:
	case <-time.After(waitLimit):
		t.Fatal("the upstream's answer did not end")
	}
	// What the upstream wrote is what the bridge, the connection's output,
	// the upstream connection and the sockets hold.
	if n := wrote.Load(); n > 16<<20 {
		t.Errorf("the upstream wrote %d MiB to a client that read nothing", n>>20)
	}
}

// TestH2LoopsBridgeWideWindowsRead streams a 32 MB answer to an h2c
// client on the loops that opens its windows wide and reads: the answer
// arrives whole, the bridge going on each time the client has read the
// connection's output.
func TestH2LoopsBridgeWideWindowsRead(t *testing.T) {
	const parts, size = 2000, 16000
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		buf := []byte(strings.Repeat("x", size))
		for range parts {
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	tg := h2LoopsGateway(t, up, "")
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = fr.WriteWindowUpdate(0, 1<<31-1-65535)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/stream")})
	n := 0
	for range 100000 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			n += len(f.Data())
			if f.StreamEnded() {
				if n != parts*size {
					t.Errorf("the answer has %d bytes, want %d", n, parts*size)
				}
				return
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("reset %v after %d bytes", f.ErrCode, n)
		}
	}
	t.Fatal("the answer did not end in 100000 frames")
}
