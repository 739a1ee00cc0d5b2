//go:build linux

package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2LoopsBridgeClientNotReading streams an answer (flushed as the
// upstream writes it, without end) to an h2c client on the loops that
// gives it no window: the upstream's writes stop once the bridge and the
// sockets hold what they can, and after server.write_timeout the stream
// is reset while the connection serves on.
func TestH2LoopsBridgeClientNotReading(t *testing.T) {
	var wrote atomic.Int64
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			fmt.Fprint(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		buf := []byte("data: " + strings.Repeat("x", 1000) + "\n\n")
		for range 100000 { // bounded: 100 MB, far past what may be held
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			wrote.Add(int64(len(buf)))
		}
	})
	tg := serverGateway(t, "loop", "write_timeout: 1s, http2: {loops: true}", up.URL)
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/stream")})
	status, _, code, ok := h2Answer(t, fr, 1)
	if ok || code == http2.ErrCodeNo {
		t.Fatalf("the stream ended %s (code %v): want it reset", status, code)
	}
	// What the upstream wrote is what the bridge, the upstream connection
	// and the sockets hold: not the 100 MB it had to send.
	if n := wrote.Load(); n > 16<<20 {
		t.Errorf("the upstream wrote %d MiB to a client that took nothing", n>>20)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/ok")})
	_ = fr.WriteWindowUpdate(3, 1<<20)
	if status, body, code, ok := h2Answer(t, fr, 3); !ok || status != "200" || body != "ok" {
		t.Errorf("then: %s %q %v", status, body, code)
	}
}

// TestH2LoopsBridgeResetMidBody resets a stream whose body the upstream
// is reading: the upstream's request ends (its body breaks off), and the
// connection serves on.
func TestH2LoopsBridgeResetMidBody(t *testing.T) {
	arrived, got := make(chan struct{}, 1), make(chan error, 1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			fmt.Fprint(w, "ok")
			return
		}
		arrived <- struct{}{}
		_, err := io.Copy(io.Discard, r.Body)
		got <- err
	})
	tg := h2LoopsGateway(t, up, "")
	fr := h2Dial(t, tg.Addr)
	// No content-length: bridged, and streamed upstream as it comes.
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/up")})
	for range 3 {
		_ = fr.WriteData(1, false, make([]byte, 15000))
	}
	h2AwaitWindow(t, fr, 1) // the upstream read half the window
	select {
	case <-arrived:
	case <-time.After(waitLimit):
		t.Fatal("the request did not reach the upstream")
	}
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	select {
	case err := <-got:
		if err == nil {
			t.Error("the upstream read a whole body from a stream reset midway")
		}
	case <-time.After(waitLimit):
		t.Fatal("the upstream's request did not end")
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, EndStream: true,
		BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/ok")})
	if status, body, code, ok := h2Answer(t, fr, 3); !ok || status != "200" || body != "ok" {
		t.Errorf("then: %s %q %v", status, body, code)
	}
}

// TestH2LoopsBridgeConnectionClose closes an h2c connection on the loops
// with 100 bridged streams whose bodies the upstream is reading: every
// upstream request ends (its body breaks off), and no goroutine is left
// (the start helpers check).
func TestH2LoopsBridgeConnectionClose(t *testing.T) {
	const n = 100
	arrived := make(chan struct{}, n)
	var ended atomic.Int32
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		_, _ = io.Copy(io.Discard, r.Body)
		ended.Add(1)
	})
	tg := h2LoopsGateway(t, up, "")
	c, err := net.DialTimeout("tcp", tg.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	for i := range n {
		id := uint32(2*i + 1)
		// No content-length: a body of unknown length, bridged, and
		// streamed to the upstream as it comes.
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", fmt.Sprintf("/s%d", i))})
		_ = fr.WriteData(id, false, []byte("body"))
	}
	for i := range n {
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatalf("%d of %d requests reached the upstream", i, n)
		}
	}
	c.Close()
	eventually(t, "every upstream request to end", func() bool { return ended.Load() == n })
}
