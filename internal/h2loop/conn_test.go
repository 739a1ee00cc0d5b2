package h2loop

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice"
)

func TestServerPreface(t *testing.T) {
	c, err := NewConn(Config{MaxConcurrentStreams: 7, MaxHeaderListSize: 4096, ConnWindow: 1 << 20}, &harness{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c}
	h.fr = http2.NewFramer(&h.in, &h.out)
	got := h.sent()
	if len(got) != 2 || got[0].typ != http2.FrameSettings || got[1].typ != http2.FrameWindowUpdate {
		t.Fatalf("server preface %+v", got)
	}
	want := map[http2.SettingID]uint32{http2.SettingMaxConcurrentStreams: 7, http2.SettingMaxHeaderListSize: 4096, http2.SettingInitialWindowSize: 64 << 10}
	for id, v := range want {
		if got[0].set[id] != v {
			t.Errorf("%v = %d, want %d", id, got[0].set[id], v)
		}
	}
	if got[1].id != 0 || got[1].inc != 1<<20-65535 {
		t.Errorf("connection window update %+v", got[1])
	}
}

func TestInvalidConfig(t *testing.T) {
	_, err := NewConn(Config{MaxConcurrentStreams: -1, StreamWindow: -5}, &harness{})
	if !errors.Is(err, sluice.ErrInvalidOptions) || !errors.Is(err, ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "MaxConcurrentStreams") || !strings.Contains(err.Error(), "StreamWindow") {
		t.Fatalf("err = %v", err)
	}
}

func TestGetAnswered(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/a?b=c", "accept", "text/plain", "cookie", "a=1", "cookie", "b=2"), true)
	if got := h.feed(); len(got) != 0 || len(h.served) != 1 {
		t.Fatalf("sent %+v, served %d", got, len(h.served))
	}
	s := h.served[0]
	if s.Method != "GET" || s.Scheme != "http" || s.Authority != "example.test" || s.Path != "/a?b=c" || s.ContentLength != -1 ||
		len(s.Header) != 3 || field(s.Header, "accept") != "text/plain" || s.Header[2].Value != "b=2" {
		t.Fatalf("stream %+v", s)
	}
	h.c.Respond(s, 200, []hpack.HeaderField{{Name: "content-type", Value: "text/plain"}}, []byte("hello"))
	got := h.sent()
	if len(got) != 2 || got[0].typ != http2.FrameHeaders || got[0].end || field(got[0].fields, ":status") != "200" ||
		field(got[0].fields, "content-type") != "text/plain" || got[1].typ != http2.FrameData || !got[1].end || string(got[1].data) != "hello" {
		t.Fatalf("answer %+v", got)
	}
	if h.c.Active() != 0 {
		t.Fatalf("%d streams open after the answer", h.c.Active())
	}
	// A bodiless answer is one HEADERS frame that ends the stream.
	h.headers(3, h.get("/b"), true)
	h.feed()
	h.c.Respond(h.served[1], 204, nil, nil)
	if f := one(t, h.sent(), http2.FrameHeaders); !f.end || field(f.fields, ":status") != "204" {
		t.Fatalf("204: %+v", f)
	}
}

// TestFedInPieces feeds a request a byte at a time: a frame is read only
// once it is whole.
func TestFedInPieces(t *testing.T) {
	h := &harness{t: t}
	c, _ := NewConn(Config{}, h)
	h.c = c
	h.fr = http2.NewFramer(&h.in, &h.out)
	h.enc = hpack.NewEncoder(&h.encBuf)
	h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) { h.fields = append(h.fields, f) })
	h.in.WriteString(Preface)
	_ = h.fr.WriteSettings()
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/p", "content-length", "3"), false)
	_ = h.fr.WriteData(1, true, []byte("abc"))
	all := h.in.Bytes()
	pending := 0
	for i := range all {
		pending++
		n := c.Feed(all[i+1-pending : i+1])
		pending -= n
		if pending > frameHeaderLen+maxFrame {
			t.Fatalf("%d bytes left unread", pending)
		}
	}
	if pending != 0 || len(h.served) != 1 || string(h.served[0].Body) != "abc" || h.served[0].ContentLength != 3 {
		t.Fatalf("pending %d, served %+v", pending, h.served)
	}
}

func TestPostBodyAndConnectionWindow(t *testing.T) {
	h := newHarness(t, Config{ConnWindow: 65535, StreamWindow: 50000})
	body := strings.Repeat("x", 40000)
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/p", "content-length", "40000"), false)
	_ = h.fr.WriteData(1, false, []byte(body[:16000]))
	_ = h.fr.WriteData(1, false, []byte(body[16000:32000]))
	if got := h.feed(); len(got) != 0 {
		t.Fatalf("sent %+v before half the connection window was used", got)
	}
	_ = h.fr.WriteData(1, true, []byte(body[32000:]))
	f := one(t, h.feed(), http2.FrameWindowUpdate)
	if f.id != 0 || f.inc != 40000 {
		t.Fatalf("window update %+v, want 40000 on the connection", f)
	}
	if len(h.served) != 1 || string(h.served[0].Body) != body {
		t.Fatal("the body did not arrive whole")
	}
}

func TestPing(t *testing.T) {
	h := newHarness(t, Config{})
	_ = h.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	_ = h.fr.WritePing(true, [8]byte{9}) // an answer: not answered
	f := one(t, h.feed(), http2.FramePing)
	if !f.ack || string(f.data) != "\x01\x02\x03\x04\x05\x06\x07\x08" {
		t.Fatalf("ping answer %+v", f)
	}
}

func TestSettingsAcknowledged(t *testing.T) {
	h := newHarness(t, Config{})
	_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
	_ = h.fr.WriteSettingsAck() // the client's ack of ours: nothing to send
	if f := one(t, h.feed(), http2.FrameSettings); !f.ack {
		t.Fatalf("%+v, want SETTINGS ACK", f)
	}
	_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100}) // below 16384
	goAway(t, h, h.feed(), http2.ErrCodeProtocol)
}

func TestPrefaceAndFirstFrame(t *testing.T) {
	for name, first := range map[string]func(h *harness){
		"ping first":  func(h *harness) { _ = h.fr.WritePing(false, [8]byte{}) },
		"ack first":   func(h *harness) { _ = h.fr.WriteSettingsAck() },
		"bad preface": func(h *harness) { h.in.Reset(); h.in.WriteString("GET / HTTP/1.1\r\nHost: x\r\n\r\n") },
	} {
		t.Run(name, func(t *testing.T) {
			h := &harness{t: t}
			h.c, _ = NewConn(Config{}, h)
			h.fr = http2.NewFramer(&h.in, &h.out)
			h.in.WriteString(Preface)
			first(h)
			got := h.feed()
			goAway(t, h, got[1:], http2.ErrCodeProtocol) // after the server's preface
		})
	}
}

func TestFrameTooLargeNotBuffered(t *testing.T) {
	h := newHarness(t, Config{})
	// Only the header of a frame longer than 16384 bytes: the connection
	// ends at once rather than wait for its payload.
	h.in.Write([]byte{0, 0x40, 1, byte(http2.FrameData), 0, 0, 0, 0, 1})
	goAway(t, h, h.feed(), http2.ErrCodeFrameSize)
}

func TestContinuation(t *testing.T) {
	h := newHarness(t, Config{})
	b := h.get("/c", "x-long", strings.Repeat("v", 100))
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10], EndStream: true})
	_ = h.fr.WriteContinuation(1, false, b[10:50])
	_ = h.fr.WriteContinuation(1, true, b[50:])
	h.feed()
	if len(h.served) != 1 || h.served[0].Path != "/c" || len(field(h.served[0].Header, "x-long")) != 100 {
		t.Fatalf("served %+v", h.served)
	}
	// A CONTINUATION of another stream, or none when one is due.
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:10], EndStream: true})
	_ = h.fr.WritePing(false, [8]byte{})
	goAway(t, h, h.feed(), http2.ErrCodeProtocol)
}

func TestTrailers(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/t"), false)
	_ = h.fr.WriteData(1, false, []byte("body"))
	h.headers(1, h.block("x-checksum", "abc"), true)
	h.feed()
	if len(h.served) != 1 || field(h.served[0].Trailer, "x-checksum") != "abc" || string(h.served[0].Body) != "body" {
		t.Fatalf("served %+v", h.served)
	}
	// Trailers that do not end the stream, or with a pseudo-header field,
	// are malformed.
	h.headers(3, h.block(":method", "POST", ":scheme", "http", ":path", "/t"), false)
	h.headers(3, h.block("x-a", "b"), false)
	rst(t, h.feed(), 3, http2.ErrCodeProtocol)
	h.headers(5, h.block(":method", "POST", ":scheme", "http", ":path", "/t"), false)
	h.headers(5, h.block(":path", "/x"), true)
	rst(t, h.feed(), 5, http2.ErrCodeProtocol)
	// A HEADERS frame on a half-closed stream.
	h.headers(7, h.get("/t"), true)
	h.headers(7, h.block("x-a", "b"), true)
	goAway(t, h, h.feed(), http2.ErrCodeStreamClosed)
}

// TestMalformed resets malformed requests (RFC 9113 section 8.1.1) and
// keeps serving the connection: every header block went through the
// decoder, whose table the next request's block uses.
func TestMalformed(t *testing.T) {
	for name, fields := range map[string][]string{
		"upper-case name":       {":method", "GET", ":scheme", "http", ":path", "/", "X-Upper", "1"},
		"pseudo after regular":  {":method", "GET", ":scheme", "http", "accept", "x", ":path", "/"},
		"unknown pseudo":        {":method", "GET", ":scheme", "http", ":path", "/", ":foo", "x"},
		"duplicate pseudo":      {":method", "GET", ":method", "GET", ":scheme", "http", ":path", "/"},
		"response pseudo":       {":status", "200", ":method", "GET", ":scheme", "http", ":path", "/"},
		"no path":               {":method", "GET", ":scheme", "http"},
		"empty path":            {":method", "GET", ":scheme", "http", ":path", ""},
		"no scheme":             {":method", "GET", ":path", "/"},
		"CONNECT with a path":   {":method", "CONNECT", ":authority", "example.test:443", ":path", "/"},
		"CONNECT with scheme":   {":method", "CONNECT", ":authority", "example.test:443", ":scheme", "http"},
		"CONNECT, no authority": {":method", "CONNECT"},
		"userinfo":              {":method", "GET", ":scheme", "http", ":authority", "u@a.test", ":path", "/"},
		"userinfo in host":      {":method", "GET", ":scheme", "https", ":path", "/", "host", "u@a.test"},
		"extended CONNECT":      {":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":path", "/"},
		"value with newline":    {":method", "GET", ":scheme", "http", ":path", "/", "x-a", "a\nb"},
		"bad name":              {":method", "GET", ":scheme", "http", ":path", "/", "x a", "b"},
		"path with CRLF":        {":method", "GET", ":scheme", "http", ":path", "/a HTTP/1.1\r\nx-b: 1"},
		"path with NUL":         {":method", "GET", ":scheme", "http", ":path", "/a\x00"},
		"path with DEL":         {":method", "GET", ":scheme", "http", ":path", "/a\x7f"},
		"method with CRLF":      {":method", "GET\r\nx-b: 1", ":scheme", "http", ":path", "/"},
		"scheme with CRLF":      {":method", "GET", ":scheme", "http\r\nx-b: 1", ":path", "/"},
		"authority with CRLF":   {":method", "GET", ":scheme", "http", ":authority", "a\r\nx-b: 1", ":path", "/"},
		"path with tab CR":      {":method", "GET", ":scheme", "http", ":path", "/a\tb\r"},
		"authority with NUL":    {":method", "GET", ":scheme", "http", ":authority", "a\x00b", ":path", "/"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.headers(1, h.block(fields...), true)
			rst(t, h.feed(), 1, http2.ErrCodeProtocol)
			h.headers(3, h.get("/next", "x-a", "kept in the table"), true)
			if got := h.feed(); len(got) != 0 || len(h.served) != 1 || field(h.served[0].Header, "x-a") != "kept in the table" {
				t.Fatalf("next request: sent %+v, served %+v", got, h.served)
			}
		})
	}
}

// TestMalformedAnswered hands the malformed requests that net/http's
// HTTP/2 server (or the gateway behind it) answers rather than resets to
// the handler, Malformed, as they came: at their HEADERS to Open when a
// body is to come, else to Serve; content-length fields that are no
// length reset a stream whose body is to come (net/http's server reads a
// length of 0, which the body then exceeds).
func TestMalformedAnswered(t *testing.T) {
	for name, fields := range map[string][]string{
		"connection":          {":method", "GET", ":scheme", "http", ":path", "/", "connection", "close"},
		"keep-alive":          {":method", "GET", ":scheme", "http", ":path", "/", "keep-alive", "timeout=5"},
		"proxy-connection":    {":method", "GET", ":scheme", "http", ":path", "/", "proxy-connection", "close"},
		"upgrade":             {":method", "GET", ":scheme", "http", ":path", "/", "upgrade", "h2c"},
		"transfer-encoding":   {":method", "GET", ":scheme", "http", ":path", "/", "transfer-encoding", "chunked"},
		"te gzip":             {":method", "GET", ":scheme", "http", ":path", "/", "te", "gzip"},
		"two lengths":         {":method", "POST", ":scheme", "http", ":path", "/", "content-length", "1", "content-length", "2"},
		"signed length":       {":method", "POST", ":scheme", "http", ":path", "/", "content-length", "+1"},
		"length not a number": {":method", "POST", ":scheme", "http", ":path", "/", "content-length", "1x"},
		"method with space":   {":method", "GET /a", ":scheme", "http", ":path", "/"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.headers(1, h.block(fields...), true)
			if got := h.feed(); len(got) != 0 || len(h.served) != 1 || !h.served[0].Malformed || h.served[0].Method != fields[1] ||
				len(h.served[0].Header) != (len(fields)-6)/2 {
				t.Fatalf("sent %+v, served %+v", got, h.served)
			}
			h.onOpen = func(*Stream) bool { return true }
			h.headers(3, h.block(fields...), false)
			got := h.feed()
			if strings.Contains(name, "length") && name != "two lengths" {
				rst(t, got, 3, http2.ErrCodeProtocol)
				return
			}
			if len(got) != 0 || len(h.opened) != 1 || !h.opened[0].Malformed {
				t.Fatalf("sent %+v, opened %+v", got, h.opened)
			}
		})
	}
	// The stream's answer is the handler's; without a StreamHandler such
	// a stream is reset.
	h := newHarnessOf(t, Config{}, func(h *harness) Handler { return struct{ Handler }{h} })
	h.headers(1, h.block(":method", "GET", ":scheme", "http", ":path", "/", "connection", "close"), true)
	rst(t, h.feed(), 1, http2.ErrCodeProtocol)
	h.headers(3, h.block(":method", "CONNECT", ":authority", "a.test:443"), true)
	rst(t, h.feed(), 3, http2.ErrCodeProtocol)
	h.headers(5, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", "5"), true)
	rst(t, h.feed(), 5, http2.ErrCodeProtocol)
	if len(h.served) != 0 {
		t.Fatalf("served %+v", h.served)
	}
}

// TestServedForTheServerToJudge: a space in :path, an :authority that is
// no host and a :path that is an absolute URI make no malformed request (RFC 9113 section 8.2.1 forbids
// control bytes only); they are served, and the server answers them, as
// net/http's HTTP/2 server hands them to its handler.
func TestServedForTheServerToJudge(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "GET", ":scheme", "http", ":path", "/a b"), true)
	h.headers(3, h.block(":method", "GET", ":scheme", "http", ":authority", "a b/c", ":path", "/"), true)
	h.headers(5, h.block(":method", "GET", ":scheme", "http", ":path", "http://b/c"), true)
	if got := h.feed(); len(got) != 0 || len(h.served) != 3 || h.served[0].Path != "/a b" || h.served[1].Authority != "a b/c" || h.served[2].Path != "http://b/c" {
		t.Fatalf("sent %+v, served %+v", got, h.served)
	}
}

func TestOptionsStar(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "OPTIONS", ":scheme", "http", ":path", "*"), true)
	h.feed()
	if len(h.served) != 1 || h.served[0].Path != "*" {
		t.Fatalf("served %+v", h.served)
	}
}

// TestContentLengthMismatch: a body held whole that ends short of its
// content-length, or with none, is handed to Serve Malformed (net/http's
// HTTP/2 path answers it 400); DATA past the length reset the stream, and
// so does a taken stream's body that ends short (its handler may have
// sent the request on).
func TestContentLengthMismatch(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", "5"), false)
	_ = h.fr.WriteData(1, true, []byte("abc"))
	h.headers(3, h.block(":method", "HEAD", ":scheme", "http", ":path", "/", "content-length", "5"), true)
	if got := h.feed(); len(got) != 0 || len(h.served) != 2 || !h.served[0].Malformed || string(h.served[0].Body) != "abc" ||
		h.served[0].ContentLength != 5 || !h.served[1].Malformed {
		t.Fatalf("sent %+v, served %+v", got, h.served)
	}
	h.headers(5, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", "2"), false)
	_ = h.fr.WriteData(5, false, []byte("abc"))
	rst(t, h.feed(), 5, http2.ErrCodeProtocol)
	h.onOpen = func(*Stream) bool { return true }
	h.headers(7, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", "5"), false)
	_ = h.fr.WriteData(7, true, []byte("abc"))
	rst(t, h.feed(), 7, http2.ErrCodeProtocol)
	if len(h.served) != 2 {
		t.Fatalf("served %d, want 2", len(h.served))
	}
}

func TestStreamIDs(t *testing.T) {
	for name, c := range map[string]struct {
		write func(h *harness)
		code  http2.ErrCode
	}{
		"even id":             {func(h *harness) { h.headers(2, h.get("/"), true) }, http2.ErrCodeProtocol},
		"id going down":       {func(h *harness) { h.headers(5, h.get("/"), true); h.headers(3, h.get("/"), true) }, http2.ErrCodeStreamClosed},
		"DATA on an idle one": {func(h *harness) { _ = h.fr.WriteData(9, true, []byte("x")) }, http2.ErrCodeProtocol},
		"WINDOW_UPDATE idle":  {func(h *harness) { _ = h.fr.WriteWindowUpdate(9, 1) }, http2.ErrCodeProtocol},
		"RST_STREAM idle":     {func(h *harness) { _ = h.fr.WriteRSTStream(9, http2.ErrCodeCancel) }, http2.ErrCodeProtocol},
		"PUSH_PROMISE": {func(h *harness) {
			_ = h.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true})
		}, http2.ErrCodeProtocol},
		"DATA on stream 0":    {func(h *harness) { _ = h.fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x")) }, http2.ErrCodeProtocol},
		"zero connection inc": {func(h *harness) { _ = h.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 0, 0}) }, http2.ErrCodeProtocol},
		"bad header block":    {func(h *harness) { h.headers(1, []byte{0xff, 0xff, 0xff, 0xff}, true) }, http2.ErrCodeCompression},
		"HEADERS padding":     {func(h *harness) { _ = h.fr.WriteRawFrame(http2.FrameHeaders, 0x8|0x4, 1, []byte{9, 1}) }, http2.ErrCodeProtocol},
		"PING on a stream":    {func(h *harness) { _ = h.fr.WriteRawFrame(http2.FramePing, 0, 1, make([]byte, 8)) }, http2.ErrCodeProtocol},
		"SETTINGS length":     {func(h *harness) { _ = h.fr.WriteRawFrame(http2.FrameSettings, 0, 0, []byte{1}) }, http2.ErrCodeFrameSize},
		"window setting too big": {func(h *harness) {
			_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		}, http2.ErrCodeFlowControl},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{})
			c.write(h)
			goAway(t, h, h.feed(), c.code)
		})
	}
}

func TestFramesOnClosedStreams(t *testing.T) {
	h := newHarness(t, Config{})
	h.onServe = func(s *Stream) { h.c.Respond(s, 200, nil, nil) }
	h.headers(1, h.get("/"), true)
	h.feed()
	// WINDOW_UPDATE and PRIORITY on a closed stream are ignored; DATA gets
	// STREAM_CLOSED.
	_ = h.fr.WriteWindowUpdate(1, 10)
	_ = h.fr.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 1})
	_ = h.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	_ = h.fr.WriteData(1, false, []byte("late"))
	rst(t, h.feed(), 1, http2.ErrCodeStreamClosed)
	// A zero WINDOW_UPDATE or a self-dependency on an open stream resets it.
	h.onServe = nil
	h.headers(3, h.get("/"), true)
	h.feed()
	_ = h.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 3, []byte{0, 0, 0, 0})
	rst(t, h.feed(), 3, http2.ErrCodeProtocol)
	h.headers(5, h.get("/"), true)
	h.feed()
	_ = h.fr.WritePriority(5, http2.PriorityParam{StreamDep: 5})
	rst(t, h.feed(), 5, http2.ErrCodeProtocol)
	if len(h.cancelled) != 2 {
		t.Fatalf("%d streams cancelled, want 2", len(h.cancelled))
	}
}

func TestEarlyAnswer(t *testing.T) {
	h := newHarness(t, Config{})
	h.onServe = nil
	// A 431 while the client is still sending: the answer, then
	// RST_STREAM NO_ERROR.
	v := strings.Repeat("b", 8<<10)
	h.headersInPieces(1, h.block(":method", "POST", ":scheme", "http", ":path", "/", "x-a", v, "x-b", v, "x-c", v, "x-d", v, "x-e", v), false)
	got := h.feed()
	if len(got) != 2 || got[0].typ != http2.FrameHeaders || !got[0].end || field(got[0].fields, ":status") != "431" ||
		got[1].typ != http2.FrameRSTStream || got[1].code != http2.ErrCodeNo {
		t.Fatalf("got %+v", got)
	}
}

func TestAnswerHeadersSplit(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.feed()
	h.c.Respond(h.served[0], 200, []hpack.HeaderField{{Name: "x-big", Value: strings.Repeat("v", 40000), Sensitive: true}}, nil)
	got := h.sent()
	if len(got) != 3 || got[0].typ != http2.FrameHeaders || got[1].typ != http2.FrameContinuation || got[2].typ != http2.FrameContinuation ||
		len(field(got[2].fields, "x-big")) != 40000 {
		t.Fatalf("got %d frames: %v %v", len(got), got[0].typ, got[len(got)-1].typ)
	}
}

func TestClientGoAway(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	_ = h.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	h.headers(3, h.get("/"), true) // after GOAWAY: not served
	h.feed()
	if len(h.served) != 1 || h.c.Closed() {
		t.Fatalf("served %d, closed %v", len(h.served), h.c.Closed())
	}
	h.c.Respond(h.served[0], 200, nil, []byte("x"))
	if !h.c.Closed() {
		t.Fatal("not closed once the last stream ended")
	}
}

func TestShutdown(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.headers(3, h.get("/"), true)
	h.feed()
	h.c.Respond(h.served[0], 200, nil, nil)
	h.c.Shutdown()
	got := h.sent()
	if f := got[len(got)-1]; f.typ != http2.FrameGoAway || f.code != http2.ErrCodeNo || f.last != 3 || h.c.Closed() {
		t.Fatalf("got %+v, closed %v", got, h.c.Closed())
	}
	h.headers(5, h.get("/"), true)
	h.feed()
	if len(h.served) != 2 {
		t.Fatal("a stream opened after GOAWAY was served")
	}
	h.c.Respond(h.served[1], 200, nil, nil)
	if !h.c.Closed() {
		t.Fatal("not closed once the last stream ended")
	}
}

func TestCloseCancels(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.headers(3, h.get("/"), true)
	h.headers(5, h.block(":method", "POST", ":scheme", "http", ":path", "/"), false) // not served yet
	h.feed()
	h.c.Respond(h.served[0], 200, nil, nil)
	h.sent()
	h.c.Close()
	if len(h.cancelled) != 1 || h.cancelled[0].ID != 3 {
		t.Fatalf("cancelled %+v, want stream 3", h.cancelled)
	}
	h.c.Respond(h.served[1], 200, nil, []byte("x")) // takes nothing
	if len(h.c.Output()) != 0 {
		t.Fatal("an answer after Close was sent")
	}
}

func TestResetByHandler(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.feed()
	h.c.Reset(h.served[0], http2.ErrCodeRefusedStream)
	rst(t, h.sent(), 1, http2.ErrCodeRefusedStream)
	h.c.Respond(h.served[0], 200, nil, nil)
	if len(h.sent()) != 0 || len(h.cancelled) != 0 {
		t.Fatal("a reset stream took an answer, or was cancelled")
	}
}
