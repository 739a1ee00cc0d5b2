package h2loop

import (
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock is a header block being read: a HEADERS frame and the
// CONTINUATION frames after it. Every block goes through the decoder,
// whose table the connection shares, even one whose stream is refused.
type headerBlock struct {
	s         *Stream // the stream the fields go to; nil: they are dropped
	id        uint32
	endStream bool
	trailers  bool
	refuse    bool      // the stream is refused once the block is read
	dropped   bool      // the stream came after GOAWAY: not served
	open      bool      // its last frame has not come
	began     time.Time // when its HEADERS came
	frames    int
	bytes     int
	size      int  // the decoded list's size
	tooBig    bool // past MaxHeaderListSize: answered 431
	malformed bool
	answered  bool // malformed, but for a server to answer (see Stream.Malformed)
	regular   bool // a regular field came: no pseudo-header after it
	te        bool // a te field came: another makes the request malformed
	connect   bool // :protocol is allowed (Config.ConnectProtocol)
	fields    []hpack.HeaderField
}

// headers starts reading a HEADERS frame's header block: a new stream's
// request, or a stream's trailers.
func (c *Conn) headers(f *http2.HeadersFrame) {
	id := f.StreamID
	if id%2 == 0 {
		c.fail(http2.ErrCodeProtocol, "even stream id")
		return
	}
	c.hb = headerBlock{id: id, endStream: f.StreamEnded(), open: true, began: c.fedAt, fields: c.hb.fields[:0],
		connect: c.cfg.ConnectProtocol && c.sh != nil}
	switch s := c.streams[id]; {
	case s != nil:
		if s.state != stateOpen || s.trailing {
			c.fail(http2.ErrCodeStreamClosed, "HEADERS on a half-closed stream")
			return
		}
		s.trailing = true
		c.hb.s, c.hb.trailers = s, true
	case id <= c.maxID:
		if !c.gone.trailers(id) {
			c.fail(http2.ErrCodeStreamClosed, "HEADERS on a closed stream")
			return
		}
		// Trailers sent before the client learnt that the stream ended
		// (or of a stream dropped after GOAWAY): decoded, for the table,
		// and dropped.
	default:
		c.maxID = id
		switch {
		case c.goingAway:
			// Dropped: not served, and not counted in the GOAWAY's
			// last stream id, so the client may retry it. Its DATA and
			// trailers are ignored as a stream's the server ended are
			// (RFC 9113 section 6.8; see gone).
			c.hb.dropped = true
		case len(c.streams) >= c.cfg.MaxConcurrentStreams, c.blockedBytes > c.cfg.MaxBlockedBytes:
			c.hb.refuse = true
		default:
			s := &Stream{
				ID:            id,
				ContentLength: -1,
				opened:        c.fedAt,
				recvWindow:    int64(c.cfg.StreamWindow),
				sendWindow:    c.peerWindow,
			}
			c.streams[id] = s
			c.hb.s = s
		}
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.hb.malformed = true
	}
	c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// continuation reads a CONTINUATION frame of the header block (the Framer
// checks that it follows one of the same stream).
func (c *Conn) continuation(f *http2.ContinuationFrame) {
	c.hb.frames++
	if c.hb.frames > c.cfg.MaxContinuations {
		c.calm("too many CONTINUATION frames")
		return
	}
	c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// fragment decodes a part of the header block, and ends the block after
// its last part.
func (c *Conn) fragment(p []byte, last bool) {
	c.hb.bytes += len(p)
	if c.hb.bytes > 2*c.cfg.MaxHeaderListSize {
		c.calm("header block too large")
		return
	}
	if _, err := c.dec.Write(p); err != nil {
		c.fail(http2.ErrCodeCompression, "bad header block")
		return
	}
	if last {
		c.endBlock()
	}
}

// emit takes one decoded field of the header block.
func (c *Conn) emit(f hpack.HeaderField) {
	hb := &c.hb
	hb.size += int(f.Size())
	if hb.size > c.cfg.MaxHeaderListSize {
		hb.tooBig = true
		c.dec.SetEmitEnabled(false)
		return
	}
	if hb.s == nil || hb.malformed {
		return
	}
	if !validField(f, hb) {
		hb.malformed = true
		return
	}
	if hb.trailers && !validTrailer(f, hb.s) {
		hb.malformed = true
		return
	}
	if hb.trailers && connectionSpecific(f) {
		return // dropped: see validField
	}
	hb.fields = append(hb.fields, f)
}

// validTrailer reports whether f may come in the trailers of s: in those
// of a request that announced trailers (a trailer field), a field that a
// trailer section may carry (httpguts.ValidTrailerHeader: no framing,
// routing or connection-specific field), as net/http's HTTP/2 server
// takes it, which resets the stream otherwise; any field in the trailers
// of one that did not (that server drops them; see validField).
func validTrailer(f hpack.HeaderField, s *Stream) bool {
	for _, h := range s.Header {
		if h.Name == "trailer" {
			return httpguts.ValidTrailerHeader(textproto.CanonicalMIMEHeaderKey(f.Name))
		}
	}
	return true
}

// validField reports whether f may come next in hb (RFC 9113 sections 8.2
// and 8.3): a request pseudo-header field before the regular ones, once
// each, none in trailers, with a valid value (:scheme a token, :method,
// :authority and :path without control bytes, as net/http's HTTP/2 server
// takes them: a server answers a space in :path or an :authority that is
// no host itself); a regular one with a lower-case name and a valid value.
// A :method that is no token, a connection-specific field, a te other
// than "trailers" (see connectionSpecific) or a second te field (net/http's
// HTTP/2 server takes one "trailers" only) in a request's header section
// (section 8.2.2) make it malformed, but net/http's HTTP/2 server (or the
// gateway behind it) answers it 400: it is kept, the block marked for the
// handler to answer (see Stream.Malformed). In its trailers such a field
// is valid and dropped (emit) when the request announced no trailers: the
// head and maybe the body have gone on to the handler, and a stream reset
// there would leave it a body cut short; net/http's HTTP/2 server drops
// trailers a request did not announce, and the gateway never passes such
// a trailer field. In the trailers of one that did, it resets the stream,
// as on net/http's HTTP/2 server (see validTrailer).
func validField(f hpack.HeaderField, hb *headerBlock) bool {
	if f.IsPseudo() {
		if hb.regular || hb.trailers {
			return false
		}
		switch f.Name {
		case ":method":
			if !httpguts.ValidHeaderFieldValue(f.Value) {
				return false
			}
			if !httpguts.ValidHeaderFieldName(f.Value) { // a token
				hb.answered = true
			}
		case ":scheme":
			if !httpguts.ValidHeaderFieldName(f.Value) { // a token
				return false
			}
		case ":authority", ":path":
			if !httpguts.ValidHeaderFieldValue(f.Value) {
				return false
			}
		case ":protocol":
			if !hb.connect || !httpguts.ValidHeaderFieldName(f.Value) {
				return false // extended CONNECT is not offered
			}
		default:
			return false
		}
		for _, g := range hb.fields {
			if g.Name == f.Name {
				return false
			}
		}
		return true
	}
	hb.regular = true
	if !httpguts.ValidHeaderFieldName(f.Name) || strings.ToLower(f.Name) != f.Name || !httpguts.ValidHeaderFieldValue(f.Value) {
		return false
	}
	if !hb.trailers && (connectionSpecific(f) || f.Name == "te" && hb.te) {
		hb.answered = true
	}
	if f.Name == "te" {
		hb.te = true
	}
	return true
}

// connectionSpecific reports whether f, a regular field with a lower-case
// name, is connection-specific (RFC 9113 section 8.2.2): connection,
// keep-alive, proxy-connection, transfer-encoding, upgrade, or a te other
// than "trailers".
func connectionSpecific(f hpack.HeaderField) bool {
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	case "te":
		return f.Value != "trailers"
	}
	return false
}

// endBlock ends the header block: the stream is refused, answered 431,
// reset as malformed, or takes its fields.
func (c *Conn) endBlock() {
	hb := &c.hb
	hb.open = false
	c.dec.SetEmitEnabled(true)
	if err := c.dec.Close(); err != nil {
		c.fail(http2.ErrCodeCompression, "bad header block")
		return
	}
	s := hb.s
	switch {
	case hb.refuse, hb.dropped:
		if hb.refuse {
			_ = c.fr.WriteRSTStream(hb.id, http2.ErrCodeRefusedStream)
		}
		if !hb.endStream {
			c.gone.add(hb.id, int64(c.cfg.StreamWindow), c.cfg.MaxConcurrentStreams)
		}
		return
	case s == nil, s.state == stateClosed:
		return
	case hb.tooBig && !hb.trailers:
		if hb.endStream {
			s.state = stateHalfClosed
		}
		c.Respond(s, 431, nil, nil)
		return
	case hb.tooBig || hb.malformed:
		c.resetStream(s.ID, http2.ErrCodeProtocol)
		return
	case hb.trailers:
		if !hb.endStream {
			c.resetStream(s.ID, http2.ErrCodeProtocol)
			return
		}
		s.Trailer = append([]hpack.HeaderField(nil), hb.fields...)
		if s.streamed {
			c.streamData(s, nil, 0, true)
			return
		}
		c.arrived(s)
		return
	}
	s.Malformed = hb.answered
	if !c.request(s, hb.fields, hb.endStream) || (s.Malformed || s.Path == "") && c.sh == nil {
		c.resetStream(s.ID, http2.ErrCodeProtocol)
		return
	}
	held := s.ContentLength
	if held < 0 {
		held = int64(c.cfg.StreamWindow)
	}
	s.Crowded = !hb.endStream && c.held+held > int64(c.cfg.HeldBodies)
	if !hb.endStream && c.sh != nil && c.sh.Open(s) {
		s.served, s.streamed = true, true
		return
	}
	if s.ContentLength > int64(c.cfg.StreamWindow) || s.Protocol != "" || s.Crowded {
		c.resetStream(s.ID, http2.ErrCodeRefusedStream) // a body the window, or the connection, cannot hold
		return
	}
	if hb.endStream {
		c.arrived(s)
		return
	}
	s.held = held
	c.held += held
}

// request sets s's request from fields, and reports false when it is
// malformed (RFC 9113 section 8.3.1) as net/http's HTTP/2 server finds it,
// which resets such a stream: a CONNECT request without :protocol but with
// a :path or :scheme, or without :authority (section 8.5), a CONNECT with
// :protocol (not served here) but without :authority (RFC 8441 section 4),
// :protocol on another method, another pseudo-header field missing or
// empty, a :scheme other than "http" or "https" (but on an extended
// CONNECT), userinfo in an http or https request's :authority (or its first
// host field without one), or a first content-length that is no length
// while the body is to come (net/http's HTTP/2 server reads it as 0, and
// resets the stream at its DATA). Content-length fields of different
// values (another length, or the same one spelled otherwise: 0, 00, as
// the gateway behind net/http's server refuses them) or a later one that
// is no length (s.ContentLength the first, as
// net/http's server takes it), or one that is no length on a request
// without a body, make it Malformed. A :path of
// another form than an absolute path (a relative one, "*", an absolute
// URI, as net/http's HTTP/2 server takes them) is the server's to judge.
func (c *Conn) request(s *Stream, fields []hpack.HeaderField, endStream bool) bool {
	var regular []hpack.HeaderField
	for i, f := range fields {
		if !f.IsPseudo() {
			regular = fields[i:]
			break
		}
		switch f.Name {
		case ":method":
			s.Method = f.Value
		case ":scheme":
			s.Scheme = f.Value
		case ":authority":
			s.Authority = f.Value
		case ":path":
			s.Path = f.Value
		case ":protocol":
			s.Protocol = f.Value
		}
	}
	switch {
	case s.Method == "CONNECT" && s.Protocol == "":
		if s.Authority == "" || s.Path != "" || s.Scheme != "" {
			return false
		}
	case s.Method == "" || s.Scheme == "" || s.Path == "" || (s.Method == "CONNECT") != (s.Protocol != ""):
		return false
	case s.Protocol == "" && s.Scheme != "http" && s.Scheme != "https":
		return false
	case s.Protocol != "" && s.Authority == "":
		return false
	}
	authority, named, lengths, length := s.Authority, s.Authority != "", false, ""
	for _, f := range regular {
		switch f.Name {
		case "host":
			if !named {
				authority, named = f.Value, true
			}
		case "content-length":
			n, err := strconv.ParseInt(f.Value, 10, 64)
			switch {
			case err != nil || strings.TrimLeft(f.Value, "0123456789") != "": // digits only (RFC 9110 section 8.6): no sign
				if !endStream && !lengths {
					return false
				}
				s.Malformed = true
			case !lengths:
				s.ContentLength, length = n, f.Value
			case f.Value != length: // another length, or the same spelled otherwise
				s.Malformed = true
			}
			lengths = true
		}
	}
	if strings.IndexByte(authority, '@') >= 0 && (s.Scheme == "http" || s.Scheme == "https") {
		return false
	}
	s.Header = append([]hpack.HeaderField(nil), regular...)
	return true
}
