package h2loop

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// post is a POST request's header block.
func (h *harness) post(path string, more ...string) []byte {
	return h.block(append([]string{":method", "POST", ":scheme", "http", ":authority", "example.test", ":path", path}, more...)...)
}

// TestOpenTakesStreamBeforeBody hands a stream over at its HEADERS: its
// body goes to Data as it comes, past the stream's window, as fast as the
// handler consumes it (WINDOW_UPDATE once half the window is consumed),
// and ends with the trailers.
func TestOpenTakesStreamBeforeBody(t *testing.T) {
	h := newHarness(t, Config{StreamWindow: 100})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/up"), false)
	if got := h.feed(); len(got) != 0 || len(h.opened) != 1 || len(h.served) != 0 {
		t.Fatalf("sent %+v, opened %d, served %d", got, len(h.opened), len(h.served))
	}
	s := h.opened[0]
	_ = h.fr.WriteData(1, false, []byte(strings.Repeat("a", 100)))
	if got := h.feed(); len(got) != 0 || len(h.body[1]) != 100 {
		t.Fatalf("sent %+v, body %d", got, len(h.body[1]))
	}
	// Past the window before any is consumed: a flow-control error.
	h.c.Consumed(s, 49)
	if got := h.sent(); len(got) != 0 {
		t.Fatalf("WINDOW_UPDATE before half the window was consumed: %+v", got)
	}
	h.c.Consumed(s, 51)
	if f := one(t, h.sent(), http2.FrameWindowUpdate); f.id != 1 || f.inc != 100 {
		t.Fatalf("WINDOW_UPDATE %+v, want 100 on stream 1", f)
	}
	_ = h.fr.WriteData(1, false, []byte(strings.Repeat("b", 60)))
	h.headers(1, h.block("x-sum", "ok"), true)
	h.feed()
	if len(h.body[1]) != 160 || !h.ended[1] || field(s.Trailer, "x-sum") != "ok" {
		t.Fatalf("body %d, ended %v, trailer %v", len(h.body[1]), h.ended[1], s.Trailer)
	}
	// The body ended: what is consumed now is not given back.
	h.c.Consumed(s, 60)
	if got := h.sent(); len(got) != 0 {
		t.Fatalf("WINDOW_UPDATE after the body's end: %+v", got)
	}
	h.c.Respond(s, 204, nil, nil)
	if f := one(t, h.sent(), http2.FrameHeaders); !f.end || h.c.Active() != 0 {
		t.Fatalf("answer %+v, active %d", f, h.c.Active())
	}
	if len(h.cancelled) != 0 {
		t.Fatal("a stream answered whole was cancelled")
	}
}

// TestTakenStreamWindowExceeded resets a taken stream whose client sends
// past what the handler consumed.
func TestTakenStreamWindowExceeded(t *testing.T) {
	h := newHarness(t, Config{StreamWindow: 100})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/up"), false)
	_ = h.fr.WriteData(1, false, []byte(strings.Repeat("a", 100)))
	_ = h.fr.WriteData(1, false, []byte("b"))
	rst(t, h.feed(), 1, http2.ErrCodeFlowControl)
	if len(h.cancelled) != 1 {
		t.Fatalf("cancelled %d, want the taken stream", len(h.cancelled))
	}
}

// TestTakenStreamContentLength resets a taken stream whose body is longer
// or shorter than its content-length.
func TestTakenStreamContentLength(t *testing.T) {
	h := newHarness(t, Config{})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/up", "content-length", "3"), false)
	_ = h.fr.WriteData(1, false, []byte("abcd"))
	rst(t, h.feed(), 1, http2.ErrCodeProtocol)
	h.headers(3, h.post("/up", "content-length", "3"), false)
	_ = h.fr.WriteData(3, true, []byte("ab"))
	rst(t, h.feed(), 3, http2.ErrCodeProtocol)
	if len(h.cancelled) != 2 {
		t.Fatalf("cancelled %d, want 2", len(h.cancelled))
	}
}

// TestOpenDeclined holds the body whole, as before, when the handler does
// not take the stream; a stream that ends with its HEADERS is not offered.
func TestOpenDeclined(t *testing.T) {
	h := newHarness(t, Config{})
	asked := 0
	h.onOpen = func(*Stream) bool { asked++; return false }
	h.headers(1, h.post("/up"), false)
	_ = h.fr.WriteData(1, true, []byte("abc"))
	h.headers(3, h.get("/"), true)
	h.feed()
	if asked != 1 || len(h.served) != 2 || string(h.served[0].Body) != "abc" {
		t.Fatalf("asked %d, served %d", asked, len(h.served))
	}
}

// TestAnswerInParts sends an answer's HEADERS, DATA that flow control
// holds back (Pending, Writable when some goes), and trailers after it.
func TestAnswerInParts(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/rpc"), false)
	h.feed()
	s := h.opened[0]
	h.c.SetPaced(s, true)
	h.c.WriteHeaders(s, 200, []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}}, false)
	if f := one(t, h.sent(), http2.FrameHeaders); f.end || field(f.fields, ":status") != "200" {
		t.Fatalf("HEADERS %+v", f)
	}
	h.c.WriteData(s, []byte("0123456789abcdef"), false)
	if n, end := dataBytes(h.sent(), 1); n != 10 || end || h.c.Pending(s) != 6 || h.c.BlockedBytes() != 6 || h.c.StalledBytes() != 0 {
		t.Fatalf("sent %d (end %v), pending %d, blocked %d, stalled %d", n, end, h.c.Pending(s), h.c.BlockedBytes(), h.c.StalledBytes())
	}
	h.c.WriteData(s, []byte("gh"), false)
	h.c.WriteTrailers(s, []hpack.HeaderField{{Name: "grpc-status", Value: "0"}})
	if got := h.sent(); len(got) != 0 || h.c.BlockedBytes() != 8 {
		t.Fatalf("sent %+v with no window; blocked %d", got, h.c.BlockedBytes())
	}
	_ = h.fr.WriteWindowUpdate(1, 5)
	if n, _ := dataBytes(h.feed(), 1); n != 5 || len(h.writable) != 1 {
		t.Fatalf("sent %d, writable %d", n, len(h.writable))
	}
	h.c.SetPaced(s, false) // its writer is done: the connection bounds the wait
	if h.c.StalledBytes() != 3 {
		t.Fatalf("stalled %d once not paced, want 3", h.c.StalledBytes())
	}
	_ = h.fr.WriteWindowUpdate(1, 100)
	got := h.feed()
	if n, end := dataBytes(got, 1); n != 3 || end {
		t.Fatalf("sent %d (end %v), want the last 3 and no end", n, end)
	}
	// The trailers, then RST_STREAM NO_ERROR: the client was still
	// sending its body (RFC 9113 section 8.1).
	tr, last := got[len(got)-2], got[len(got)-1]
	if tr.typ != http2.FrameHeaders || !tr.end || field(tr.fields, "grpc-status") != "0" {
		t.Fatalf("frame %+v, want the trailers", tr)
	}
	if last.typ != http2.FrameRSTStream || last.code != http2.ErrCodeNo {
		t.Fatalf("last frame %+v, want RST_STREAM NO_ERROR", last)
	}
	if h.c.Active() != 0 || h.c.BlockedBytes() != 0 {
		t.Fatalf("active %d, blocked %d", h.c.Active(), h.c.BlockedBytes())
	}
}

// TestAnswerEndsWithEmptyData ends a streamed answer with an empty DATA
// frame when its last part is empty.
func TestAnswerEndsWithEmptyData(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.feed()
	s := h.served[0]
	h.c.WriteHeaders(s, 200, nil, false)
	h.c.WriteData(s, []byte("x"), false)
	h.sent()
	h.c.WriteData(s, nil, true)
	if f := one(t, h.sent(), http2.FrameData); !f.end || len(f.data) != 0 {
		t.Fatalf("got %+v, want an empty DATA ending the stream", f)
	}
	// Nothing after the end.
	h.c.WriteData(s, []byte("late"), false)
	h.c.WriteTrailers(s, nil)
	if got := h.sent(); len(got) != 0 {
		t.Fatalf("sent %+v after the end", got)
	}
}

// TestTakenStreamCancelled cancels a taken stream that the client resets
// after its answer's HEADERS, with its answer held back: the handler may
// be waiting to write more.
func TestTakenStreamCancelled(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/rpc"), false)
	h.feed()
	s := h.opened[0]
	h.c.WriteHeaders(s, 200, nil, false)
	h.c.WriteData(s, []byte("abc"), true)
	h.sent()
	_ = h.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	h.feed()
	if len(h.cancelled) != 1 || h.c.BlockedBytes() != 0 {
		t.Fatalf("cancelled %d, blocked %d", len(h.cancelled), h.c.BlockedBytes())
	}
}

// TestTakenStreamNotExpired leaves a taken stream's body to its handler:
// ExpireArriving does not reset it.
func TestTakenStreamNotExpired(t *testing.T) {
	h := newHarness(t, Config{})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.post("/rpc"), false)
	h.feed()
	h.onOpen = nil
	h.headers(3, h.post("/held"), false)
	h.feed()
	h.c.ExpireArriving(time.Now().Add(time.Hour))
	rst(t, h.sent(), 3, http2.ErrCodeCancel)
	if h.c.Active() != 1 || len(h.cancelled) != 0 {
		t.Fatalf("active %d, cancelled %d: want the taken stream left", h.c.Active(), len(h.cancelled))
	}
}

// TestExtendedConnect serves RFC 8441's extended CONNECT when offered:
// the setting, :protocol taken to the stream; without the offer, or with
// :protocol on another method, the request is malformed. A CONNECT
// without :protocol goes to the handler, as net/http's HTTP/2 server
// hands it to its own.
func TestExtendedConnect(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test", ":path", "/ws"), false)
	rst(t, h.feed(), 1, http2.ErrCodeProtocol)

	h = newHarness(t, Config{ConnectProtocol: true})
	h.onOpen = func(*Stream) bool { return true }
	h.headers(1, h.block(":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test", ":path", "/ws"), false)
	h.feed()
	if len(h.opened) != 1 || h.opened[0].Protocol != "websocket" || h.opened[0].Method != "CONNECT" {
		t.Fatalf("opened %+v", h.opened)
	}
	h.headers(3, h.block(":method", "GET", ":protocol", "websocket", ":scheme", "http", ":authority", "a.test", ":path", "/ws"), false)
	rst(t, h.feed(), 3, http2.ErrCodeProtocol)
	h.headers(5, h.block(":method", "CONNECT", ":authority", "a.test:443"), false)
	if got := h.feed(); len(got) != 0 || len(h.opened) != 2 || h.opened[1].Method != "CONNECT" || h.opened[1].Authority != "a.test:443" ||
		h.opened[1].Path != "" || h.opened[1].Malformed {
		t.Fatalf("sent %+v, opened %+v", got, h.opened)
	}
}

func TestConnectProtocolSetting(t *testing.T) {
	h := &harness{t: t}
	c, err := NewConn(Config{ConnectProtocol: true}, h)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	h.fr = http2.NewFramer(&h.in, &h.out)
	h.dec = hpack.NewDecoder(4096, nil)
	got := h.sent()
	if len(got) == 0 || got[0].set[http2.SettingEnableConnectProtocol] != 1 {
		t.Fatalf("server preface %+v, want ENABLE_CONNECT_PROTOCOL 1", got)
	}
}
