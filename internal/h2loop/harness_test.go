package h2loop

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// harness is a client of a Conn: its framer writes frames to in, which
// feed gives the Conn; what the Conn sends is read back as frames.
type harness struct {
	t      *testing.T
	c      *Conn
	in     bytes.Buffer
	out    bytes.Buffer
	fr     *http2.Framer // writes to in, reads from out
	encBuf bytes.Buffer
	enc    *hpack.Encoder
	dec    *hpack.Decoder
	fields []hpack.HeaderField // decoded by dec

	served    []*Stream
	cancelled []*Stream
	onServe   func(s *Stream) // nil: the stream waits for the test

	onOpen   func(s *Stream) bool // nil: no stream is taken before its body
	opened   []*Stream
	body     map[uint32][]byte // the taken streams' body so far
	ended    map[uint32]bool   // the taken streams whose body ended
	writable []*Stream
}

func (h *harness) Open(s *Stream) bool {
	if h.onOpen == nil || !h.onOpen(s) {
		return false
	}
	h.opened = append(h.opened, s)
	return true
}

func (h *harness) Data(s *Stream, p []byte, end bool) {
	if h.body == nil {
		h.body, h.ended = map[uint32][]byte{}, map[uint32]bool{}
	}
	h.body[s.ID] = append(h.body[s.ID], p...)
	h.ended[s.ID] = end
}

func (h *harness) Writable(s *Stream) { h.writable = append(h.writable, s) }

func (h *harness) Serve(s *Stream) {
	h.served = append(h.served, s)
	if h.onServe != nil {
		h.onServe(s)
	}
}

func (h *harness) Cancel(s *Stream) { h.cancelled = append(h.cancelled, s) }

// frame is what the Conn sent, copied out of the reading framer.
type frame struct {
	typ    http2.FrameType
	id     uint32
	end    bool // END_STREAM
	code   http2.ErrCode
	data   []byte
	fields []hpack.HeaderField
	inc    uint32
	ack    bool
	set    map[http2.SettingID]uint32
	last   uint32 // GOAWAY's last stream id
}

// newHarness starts a connection with cfg, sends the preface and SETTINGS
// (settings), and reads the server's preface.
func newHarness(t *testing.T, cfg Config, settings ...http2.Setting) *harness {
	t.Helper()
	return newHarnessOf(t, cfg, func(h *harness) Handler { return h }, settings...)
}

// newHarnessOf starts a connection as newHarness does, its handler
// handler(h): h, or a part of h's methods.
func newHarnessOf(t *testing.T, cfg Config, handler func(h *harness) Handler, settings ...http2.Setting) *harness {
	t.Helper()
	h := &harness{t: t}
	c, err := NewConn(cfg, handler(h))
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	h.fr = http2.NewFramer(&h.in, &h.out)
	h.fr.MaxHeaderListSize = 1 << 24
	h.enc = hpack.NewEncoder(&h.encBuf)
	h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) { h.fields = append(h.fields, f) })
	h.in.WriteString(Preface)
	if err := h.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	got := h.feed()
	if len(got) < 2 || got[0].typ != http2.FrameSettings || got[len(got)-1].typ != http2.FrameSettings || !got[len(got)-1].ack {
		t.Fatalf("server preface and ack: %+v", got)
	}
	return h
}

// feed gives the Conn everything written so far, checks that it read it
// all, and returns the frames it sent.
func (h *harness) feed() []frame {
	h.t.Helper()
	b := h.in.Bytes()
	if n := h.c.Feed(b); n != len(b) && !h.c.Closed() {
		h.t.Fatalf("Feed read %d of %d bytes", n, len(b))
	}
	h.in.Reset()
	return h.sent()
}

// sent returns the frames the Conn has sent since the last call.
func (h *harness) sent() []frame {
	h.t.Helper()
	h.out.Write(h.c.Output())
	h.c.Sent()
	var got []frame
	for h.out.Len() > 0 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.t.Fatalf("reading the server's frames: %v", err)
		}
		g := frame{typ: f.Header().Type, id: f.Header().StreamID}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			g.ack = f.IsAck()
			g.set = map[http2.SettingID]uint32{}
			_ = f.ForeachSetting(func(s http2.Setting) error { g.set[s.ID] = s.Val; return nil })
		case *http2.HeadersFrame:
			g.end = f.StreamEnded()
			h.fields = nil
			if _, err := h.dec.Write(f.HeaderBlockFragment()); err != nil {
				h.t.Fatal(err)
			}
			g.fields = h.fields
			if !f.HeadersEnded() {
				g.data = bytes.Clone(f.HeaderBlockFragment())
			}
		case *http2.ContinuationFrame:
			if _, err := h.dec.Write(f.HeaderBlockFragment()); err != nil {
				h.t.Fatal(err)
			}
			g.fields = h.fields
		case *http2.DataFrame:
			g.end, g.data = f.StreamEnded(), bytes.Clone(f.Data())
		case *http2.RSTStreamFrame:
			g.code = f.ErrCode
		case *http2.GoAwayFrame:
			g.code, g.last = f.ErrCode, f.LastStreamID
		case *http2.WindowUpdateFrame:
			g.inc = f.Increment
		case *http2.PingFrame:
			g.ack, g.data = f.IsAck(), bytes.Clone(f.Data[:])
		}
		got = append(got, g)
	}
	return got
}

// block encodes fields, name and value pairs, as a header block.
func (h *harness) block(fields ...string) []byte {
	h.encBuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(h.encBuf.Bytes())
}

// get is a GET request's header block.
func (h *harness) get(path string, more ...string) []byte {
	return h.block(append([]string{":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", path}, more...)...)
}

// headers writes a HEADERS frame with the whole block b.
func (h *harness) headers(id uint32, b []byte, end bool) {
	h.t.Helper()
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: end, EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
}

// headersInPieces writes a HEADERS frame and CONTINUATION frames with
// block b, in pieces of at most 16384 bytes.
func (h *harness) headersInPieces(id uint32, b []byte, end bool) {
	h.t.Helper()
	n := min(len(b), 16384)
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:n], EndStream: end, EndHeaders: n == len(b)}); err != nil {
		h.t.Fatal(err)
	}
	for b = b[n:]; len(b) > 0; b = b[n:] {
		n = min(len(b), 16384)
		if err := h.fr.WriteContinuation(id, n == len(b), b[:n]); err != nil {
			h.t.Fatal(err)
		}
	}
}

// one returns the only frame of got, of type typ.
func one(t *testing.T, got []frame, typ http2.FrameType) frame {
	t.Helper()
	if len(got) != 1 || got[0].typ != typ {
		t.Fatalf("got %+v, want one %v", got, typ)
	}
	return got[0]
}

// goAway checks that got ends with GOAWAY code and the connection closed.
func goAway(t *testing.T, h *harness, got []frame, code http2.ErrCode) {
	t.Helper()
	if len(got) == 0 || got[len(got)-1].typ != http2.FrameGoAway || got[len(got)-1].code != code {
		t.Fatalf("got %+v, want GOAWAY %v", got, code)
	}
	if !h.c.Closed() {
		t.Fatal("the connection is not closed after GOAWAY")
	}
}

// rst checks that got is one RST_STREAM of stream id with code.
func rst(t *testing.T, got []frame, id uint32, code http2.ErrCode) {
	t.Helper()
	f := one(t, got, http2.FrameRSTStream)
	if f.id != id || f.code != code {
		t.Fatalf("RST_STREAM %d %v, want %d %v", f.id, f.code, id, code)
	}
}

// field returns the value of the field name in fs.
func field(fs []hpack.HeaderField, name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}
