package h2loop

import (
	"bytes"
	"errors"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Preface is what an HTTP/2 client sends first (RFC 9113 section 3.4).
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// maxFrame is the largest frame the connection reads
// (SETTINGS_MAX_FRAME_SIZE, left at its initial value).
const maxFrame = 16384

// maxWindow is the largest flow-control window (RFC 9113 section 6.9.1).
const maxWindow = 1<<31 - 1

// frameHeaderLen is the length of a frame's header.
const frameHeaderLen = 9

// Handler serves the requests of a connection, on the goroutine that
// feeds it.
type Handler interface {
	// Serve is called once a stream's request has arrived whole: its
	// headers, its body and its trailers if any. The handler answers it
	// with Conn.Respond or Conn.Reset, at once or later.
	Serve(s *Stream)
	// Cancel is called when a stream handed to Serve ends before its
	// answer: the client reset it, or the connection ended (Conn.Close).
	// The stream takes no answer after it.
	Cancel(s *Stream)
}

// StreamHandler is a Handler that may take a stream as soon as its
// request headers have come, before its body: a stream that runs both
// ways (gRPC streaming, WebSocket over HTTP/2), or whose body is not to
// be held whole. The connection finds it by type assertion.
type StreamHandler interface {
	Handler
	// Open is called when a stream's request headers have come and a
	// body is to follow. Returning true takes the stream: its body goes
	// to Data as it arrives, bounded by the stream's window, which opens
	// again only as the handler calls Conn.Consumed; Serve is not called,
	// and the handler answers with Conn.Respond, Conn.WriteHeaders,
	// Conn.WriteData, Conn.WriteTrailers or Conn.Reset. Cancel is called
	// when such a stream ends before its answer is sent whole. Returning
	// false leaves the stream to be held whole and handed to Serve.
	Open(s *Stream) bool
	// Data gives a taken stream's body as it arrives; p is valid during
	// the call only. The last call has end set, with s.Trailer set first
	// when the request has trailers.
	Data(s *Stream, p []byte, end bool)
	// Writable is called when answer bytes of a paced stream (see
	// Conn.SetPaced) that flow control held back were sent (see
	// Conn.Pending), at the end of the frame that opened the window.
	Writable(s *Stream)
}

// Conn is the server side of one HTTP/2 connection. See the package
// documentation.
type Conn struct {
	cfg Config
	h   Handler
	sh  StreamHandler // h, when it is one; else nil
	fr  *http2.Framer
	rd  bytes.Reader // one whole frame, for fr
	out bytes.Buffer // what is to be sent, written by fr

	dec    *hpack.Decoder
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	hb     headerBlock // the header block being read
	fedAt  time.Time   // when Feed was last called

	preface  bool // the client's preface has arrived
	settings bool // and its SETTINGS
	streams  map[uint32]*Stream
	maxID    uint32 // the highest stream id the client used

	peerWindow   int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32 // the client's SETTINGS_MAX_FRAME_SIZE
	sendWindow   int64  // the connection's window for DATA to the client
	recvWindow   int64  // what the client may still send on the connection
	recvTaken    int64  // bytes received and not yet given back
	held         int64  // the bodies held whole, as Config.HeldBodies counts them

	blocked      []*Stream // streams whose DATA waits for a window, oldest first
	blockedBytes int
	pacedBytes   int // of blockedBytes, the paced streams' (see SetPaced)

	ready []*Stream // requests arrived whole during Feed, served at its end
	gone  gone      // streams the server ended while their requests arrived

	resets    int // client resets of streams not yet answered, net of answers
	control   int // control frames since the last request
	emptyData int // empty DATA frames since the last request

	goingAway bool // GOAWAY sent or received: no new stream
	closed    bool // a connection error: nothing more is read
	err       error
}

// NewConn returns a connection served by h, whose server preface (its
// SETTINGS and the connection's window) is already in Output.
func NewConn(cfg Config, h Handler) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Conn{
		cfg:          cfg,
		h:            h,
		streams:      map[uint32]*Stream{},
		peerWindow:   65535,
		peerMaxFrame: maxFrame,
		sendWindow:   65535,
		recvWindow:   int64(cfg.ConnWindow),
	}
	c.sh, _ = h.(StreamHandler)
	c.fr = http2.NewFramer(&c.out, &c.rd)
	c.fr.SetMaxReadFrameSize(maxFrame)
	c.fr.SetReuseFrames()
	c.dec = hpack.NewDecoder(4096, c.emit)
	c.dec.SetMaxStringLength(cfg.MaxHeaderListSize)
	c.enc = hpack.NewEncoder(&c.encBuf)
	settings := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: uint32(cfg.MaxConcurrentStreams)},
		{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.StreamWindow)},
		{ID: http2.SettingMaxHeaderListSize, Val: uint32(cfg.MaxHeaderListSize)},
	}
	if cfg.ConnectProtocol {
		settings = append(settings, http2.Setting{ID: http2.SettingEnableConnectProtocol, Val: 1})
	}
	_ = c.fr.WriteSettings(settings...)
	if cfg.ConnWindow > 65535 {
		_ = c.fr.WriteWindowUpdate(0, uint32(cfg.ConnWindow-65535))
	}
	return c, nil
}

// Output returns the bytes to send to the client; Sent says they went.
func (c *Conn) Output() []byte { return c.out.Bytes() }

// Sent drops the bytes Output returned.
func (c *Conn) Sent() {
	c.out.Reset()
	if c.out.Cap() > 256<<10 {
		c.out = bytes.Buffer{} // do not keep a burst's buffer
	}
}

// Closed reports whether the connection is to close once its output is
// sent: it failed (see Err), or it went away (Shutdown or the client's
// GOAWAY) and its last stream ended.
func (c *Conn) Closed() bool {
	return c.closed || (c.goingAway && len(c.streams) == 0)
}

// Err returns the connection error that ended the connection, an
// http2.ConnectionError; nil when it has none.
func (c *Conn) Err() error { return c.err }

// Active returns how many streams are open.
func (c *Conn) Active() int { return len(c.streams) }

// BlockedBytes returns the response bytes that flow control holds back.
func (c *Conn) BlockedBytes() int { return c.blockedBytes }

// StalledBytes returns the response bytes that flow control holds back
// for streams not paced by their handler (see SetPaced): how long they
// wait is the caller's to bound.
func (c *Conn) StalledBytes() int { return c.blockedBytes - c.pacedBytes }

// ExpireArriving ends the requests that began before t and have not
// arrived whole: each such stream is reset (CANCEL), and a header block
// begun before t and not ended ends the connection (ENHANCE_YOUR_CALM),
// which can read nothing else meanwhile. It returns when the oldest
// request still arriving began; zero without one. A server calls it to
// bound how long a request may take to arrive (its read timeout).
func (c *Conn) ExpireArriving(t time.Time) (oldest time.Time) {
	if c.closed {
		return time.Time{}
	}
	if c.hb.open {
		if c.hb.began.Before(t) {
			c.calm("header block not ended in time")
			return time.Time{}
		}
		oldest = c.hb.began
	}
	for _, s := range c.streams {
		if s.state != stateOpen || s.streamed {
			continue // a taken stream's body is its handler's to time
		}
		if s.opened.Before(t) {
			c.resetStream(s.ID, http2.ErrCodeCancel)
		} else if oldest.IsZero() || s.opened.Before(oldest) {
			oldest = s.opened
		}
	}
	return oldest
}

// Shutdown sends GOAWAY: the streams open go on, no new one is served, and
// the connection is Closed once they end. The client's GOAWAY shuts the
// connection down so too.
func (c *Conn) Shutdown() {
	if c.goingAway || c.closed {
		return
	}
	c.goingAway = true
	_ = c.fr.WriteGoAway(c.maxID, http2.ErrCodeNo, nil)
}

// Close ends the connection, whose transport closed: the streams handed
// to Serve and not answered are cancelled.
func (c *Conn) Close() {
	c.closed = true
	for id, s := range c.streams {
		delete(c.streams, id)
		s.end()
		if s.served && (!s.answered || s.streamed) {
			c.h.Cancel(s)
		}
	}
	c.blocked, c.blockedBytes, c.pacedBytes, c.ready = nil, 0, 0, nil
}

// Feed reads the whole frames at the start of b and returns how many bytes
// it read; the caller keeps the rest for the next call, with the bytes
// that follow. Requests that arrived whole are then handed to the
// handler. After a connection error the connection reads nothing more:
// GOAWAY is in Output, and Closed reports true.
func (c *Conn) Feed(b []byte) int {
	n := 0
	c.fedAt = time.Now()
	if !c.preface {
		k := min(len(b), len(Preface))
		if string(b[:k]) != Preface[:k] {
			c.fail(http2.ErrCodeProtocol, "no preface")
			return 0
		}
		if k < len(Preface) {
			return 0
		}
		c.preface, n = true, len(Preface)
	}
	for !c.closed && len(b)-n >= frameHeaderLen {
		h := b[n:]
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if length > maxFrame {
			c.fail(http2.ErrCodeFrameSize, "frame too large")
			break
		}
		if len(h) < frameHeaderLen+length {
			break
		}
		c.rd.Reset(h[:frameHeaderLen+length])
		n += frameHeaderLen + length
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.readError(h[3], err)
			continue
		}
		c.frame(f)
	}
	c.serveReady()
	return n
}

// serveReady hands the requests that arrived whole to the handler, but
// for those the client reset meanwhile.
func (c *Conn) serveReady() {
	for i, s := range c.ready {
		c.ready[i] = nil
		if s.state == stateClosed || c.closed {
			continue
		}
		s.served = true
		c.h.Serve(s)
	}
	c.ready = c.ready[:0]
}

// readError handles an error of the Framer reading a frame of type typ.
func (c *Conn) readError(typ byte, err error) {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se) && http2.FrameType(typ) == http2.FrameWindowUpdate:
		c.resetStream(se.StreamID, se.Code)
	case errors.As(err, &se):
		// A HEADERS frame's padding: its header block is lost for the
		// decoder, which the connection shares.
		c.fail(se.Code, "bad frame")
	case errors.As(err, &ce):
		c.fail(http2.ErrCode(ce), "bad frame")
	default:
		c.fail(http2.ErrCodeProtocol, err.Error())
	}
}

// fail ends the connection with GOAWAY code.
func (c *Conn) fail(code http2.ErrCode, reason string) {
	if c.closed {
		return
	}
	c.closed = true
	c.err = http2.ConnectionError(code)
	_ = c.fr.WriteGoAway(c.maxID, code, []byte(reason))
	c.Close()
}

// calm ends the connection of a client past one of its bounds.
func (c *Conn) calm(reason string) { c.fail(http2.ErrCodeEnhanceYourCalm, reason) }

// frame handles frame f.
func (c *Conn) frame(f http2.Frame) {
	if !c.settings {
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			c.fail(http2.ErrCodeProtocol, "no SETTINGS after the preface")
			return
		}
		c.settings = true
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		c.headers(f)
	case *http2.ContinuationFrame:
		c.continuation(f)
	case *http2.DataFrame:
		c.data(f)
	case *http2.SettingsFrame:
		c.settingsFrame(f)
	case *http2.PingFrame:
		if c.controlled() && !f.IsAck() {
			_ = c.fr.WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		c.windowUpdate(f)
	case *http2.RSTStreamFrame:
		c.rstStream(f)
	case *http2.GoAwayFrame:
		// No new stream, as net/http's server answers it: its own GOAWAY
		// tells the client which of its streams are served.
		c.Shutdown()
	case *http2.PriorityFrame:
		if c.controlled() && f.StreamDep == f.StreamID {
			c.resetStream(f.StreamID, http2.ErrCodeProtocol)
		}
	case *http2.PushPromiseFrame:
		c.fail(http2.ErrCodeProtocol, "PUSH_PROMISE from a client")
	default:
		c.controlled()
	}
}

// controlled counts a control frame, and reports false when it is one too
// many: the connection then ends.
func (c *Conn) controlled() bool {
	c.control++
	if c.control > c.cfg.MaxControlFrames {
		c.calm("too many control frames")
		return false
	}
	return true
}

// settingsFrame applies the client's settings and acknowledges them.
func (c *Conn) settingsFrame(f *http2.SettingsFrame) {
	if !c.controlled() || f.IsAck() {
		return // an acknowledgement counts too: a client owes only one
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerWindow
			c.peerWindow = int64(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
				if st.sendWindow > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		c.fail(http2.ErrCode(ce), "bad setting")
		return
	}
	_ = c.fr.WriteSettingsAck()
	c.sendBlocked()
}

// windowUpdate opens the connection's or a stream's window to the client.
func (c *Conn) windowUpdate(f *http2.WindowUpdateFrame) {
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		c.sendWindow += inc
		if c.sendWindow > maxWindow {
			c.fail(http2.ErrCodeFlowControl, "window overflow")
			return
		}
		c.sendBlocked()
		return
	}
	s := c.streams[f.StreamID]
	if s == nil {
		if f.StreamID > c.maxID {
			c.fail(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
		}
		return // a closed stream's
	}
	s.sendWindow += inc
	if s.sendWindow > maxWindow {
		c.resetStream(s.ID, http2.ErrCodeFlowControl)
		return
	}
	c.sendBlocked()
}

// rstStream ends a stream the client reset.
func (c *Conn) rstStream(f *http2.RSTStreamFrame) {
	if f.StreamID > c.maxID {
		c.fail(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
		return
	}
	s := c.streams[f.StreamID]
	if s == nil {
		return
	}
	c.closeStream(s)
	c.resets++
	if s.served && (!s.answered || s.streamed) {
		c.h.Cancel(s)
	}
	if c.resets > c.cfg.MaxResets {
		c.calm("too many resets")
	}
}

// data takes a DATA frame of a request body.
func (c *Conn) data(f *http2.DataFrame) {
	length := int64(f.Length) // padding counts for flow control
	if length > c.recvWindow {
		c.fail(http2.ErrCodeFlowControl, "connection window exceeded")
		return
	}
	c.recvWindow -= length
	s := c.streams[f.StreamID]
	if s != nil && s.state == stateOpen && s.streamed {
		// Given back as the handler consumes it (see Consumed), or as
		// the stream ends (see closeStream).
		s.unconsumed += length
	} else {
		c.giveBack(length)
	}
	if s == nil || s.state != stateOpen {
		if f.StreamID > c.maxID {
			c.fail(http2.ErrCodeProtocol, "DATA on an idle stream")
			return
		}
		if s == nil && c.gone.data(f.StreamID, length, f.StreamEnded()) {
			return // sent before the client learnt that the stream ended
		}
		if c.controlled() {
			c.resetStream(f.StreamID, http2.ErrCodeStreamClosed)
		}
		return
	}
	if s.trailing {
		c.resetStream(s.ID, http2.ErrCodeProtocol) // DATA after trailers' HEADERS
		return
	}
	if length > s.recvWindow {
		c.resetStream(s.ID, http2.ErrCodeFlowControl)
		return
	}
	s.recvWindow -= length
	data := f.Data()
	if len(data) == 0 && !f.StreamEnded() {
		c.emptyData++
		if c.emptyData > c.cfg.MaxEmptyData {
			c.calm("too many empty DATA frames")
			return
		}
	}
	if s.streamed {
		c.streamData(s, data, length-int64(len(data)), f.StreamEnded())
		return
	}
	if s.Body == nil && s.ContentLength > 0 {
		// Its whole length at once, as HeldBodies counts it: grown by
		// append, a body could take up to twice that.
		s.Body = make([]byte, 0, s.ContentLength)
	}
	s.Body = append(s.Body, data...)
	if s.ContentLength >= 0 && int64(len(s.Body)) > s.ContentLength {
		c.resetStream(s.ID, http2.ErrCodeProtocol)
		return
	}
	switch {
	case f.StreamEnded():
		c.arrived(s)
	case s.recvWindow == 0:
		// A body larger than the window, which the connection never
		// extends: it cannot be served.
		c.resetStream(s.ID, http2.ErrCodeRefusedStream)
	}
}

// giveBack counts n bytes of the connection's window as free again (a
// body's bytes a taken stream's handler consumed, or any other DATA's as
// it arrives), and opens the window once half of it is free, or once
// what is free is at least the window left (taken streams may hold more
// than half unconsumed, and the other streams must still go on): the
// connection holds at most ConnWindow of taken streams' unconsumed body
// bytes.
func (c *Conn) giveBack(n int64) {
	c.recvTaken += n
	if c.recvTaken >= int64(c.cfg.ConnWindow)/2 || c.recvTaken >= c.recvWindow {
		_ = c.fr.WriteWindowUpdate(0, uint32(c.recvTaken))
		c.recvWindow += c.recvTaken
		c.recvTaken = 0
	}
}

// streamData gives data, a DATA frame's of a taken stream, to the
// handler; its padding's share of the window is given back at once.
func (c *Conn) streamData(s *Stream, data []byte, padding int64, end bool) {
	s.received += int64(len(data))
	if s.ContentLength >= 0 && (s.received > s.ContentLength || end && s.received != s.ContentLength) {
		c.resetStream(s.ID, http2.ErrCodeProtocol)
		return
	}
	if padding > 0 {
		c.Consumed(s, int(padding))
	}
	if end {
		c.bodyEnded(s)
		c.sh.Data(s, data, true)
		return
	}
	if len(data) > 0 {
		c.sh.Data(s, data, false)
	}
}

// bodyEnded marks the body of s, a taken stream, ended.
func (c *Conn) bodyEnded(s *Stream) {
	s.state = stateHalfClosed
	c.control, c.emptyData = 0, 0
}

// Consumed tells the connection that the handler took n bytes of the body
// of s, a taken stream (see StreamHandler.Open): the client may send as
// many more, on the stream and on the connection. A window opens by a
// WINDOW_UPDATE once half of it is to be given back, or at once for a
// window of less than 2 bytes. A stream whose body has ended, or that
// ended, takes nothing; the connection takes what it still counts of s.
func (c *Conn) Consumed(s *Stream, n int) {
	if n <= 0 || c.closed {
		return
	}
	if m := min(int64(n), s.unconsumed); m > 0 {
		s.unconsumed -= m
		c.giveBack(m)
	}
	if s.state != stateOpen {
		return
	}
	s.owed += int64(n)
	if s.owed >= int64(c.cfg.StreamWindow)/2 {
		_ = c.fr.WriteWindowUpdate(s.ID, uint32(s.owed))
		s.recvWindow += s.owed
		s.owed = 0
	}
}

// arrived marks s's request whole. A body shorter than its content-length
// makes it malformed (RFC 9113 section 8.1.1): Malformed, for a
// StreamHandler's Serve to answer as net/http's HTTP/2 server and the
// gateway behind it answer it (400); without one, the stream is reset.
// (DATA past the length reset the stream as they come, and so does a
// taken stream's body that ends short: its handler may have sent the
// request on.)
func (c *Conn) arrived(s *Stream) {
	if s.ContentLength >= 0 && int64(len(s.Body)) != s.ContentLength {
		if c.sh == nil {
			c.resetStream(s.ID, http2.ErrCodeProtocol)
			return
		}
		s.Malformed = true
	}
	s.state = stateHalfClosed
	c.control, c.emptyData = 0, 0
	c.ready = append(c.ready, s)
}

// resetStream sends RST_STREAM code for stream id and ends the stream if
// it is open; a stream handed to Serve and not answered is cancelled, and
// counts as a client's reset (see Config.MaxResets): the client's frames
// made the server end it.
func (c *Conn) resetStream(id uint32, code http2.ErrCode) {
	_ = c.fr.WriteRSTStream(id, code)
	if s := c.streams[id]; s != nil {
		c.ended(s)
		c.closeStream(s)
		if s.served && s.streamed && s.answered {
			c.h.Cancel(s) // its answer was not sent whole
		}
		if s.served && !s.answered {
			c.h.Cancel(s)
			c.resets++
			if c.resets > c.cfg.MaxResets {
				c.calm("too many resets")
			}
		}
	}
}

// ended notes that the server ends s: while its request is still
// arriving, the frames the client sent before it learns of the end are
// ignored (see gone).
func (c *Conn) ended(s *Stream) {
	if s.state == stateOpen {
		c.gone.add(s.ID, s.recvWindow, c.cfg.MaxConcurrentStreams)
	}
}

// closeStream forgets s, and the response bytes it held back.
func (c *Conn) closeStream(s *Stream) {
	delete(c.streams, s.ID)
	c.held -= s.held
	s.held = 0
	if s.unconsumed > 0 {
		c.giveBack(s.unconsumed)
		s.unconsumed = 0
	}
	if s.blocked {
		c.hold(s, -len(s.pending))
	}
	s.end()
}
