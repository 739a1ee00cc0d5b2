package h2loop

import (
	"slices"
	"strconv"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Respond answers s: a HEADERS frame (and CONTINUATION frames) of status
// and fields, then body in DATA frames as the client's windows allow; the
// rest waits for its WINDOW_UPDATE frames (see Config.MaxBlockedBytes).
// fields have lower-case names and no connection-specific field (RFC 9113
// section 8.2.2): they are the caller's to drop. The encoder may keep a
// field in its table: a field's strings must not change. A stream already
// answered, or ended (reset, or the connection closed), takes nothing.
// When the client was still sending its request, the stream is reset
// with NO_ERROR after the answer (RFC 9113 section 8.1).
func (c *Conn) Respond(s *Stream, status int, fields []hpack.HeaderField, body []byte) {
	if s.headed {
		return
	}
	c.WriteHeaders(s, status, fields, len(body) == 0)
	if len(body) > 0 {
		c.WriteData(s, body, true)
	}
}

// WriteHeaders sends the HEADERS of s's answer, as Respond does, and ends
// the stream when end is set; else the body follows by WriteData. A
// stream whose HEADERS were sent, or that ended, takes nothing.
func (c *Conn) WriteHeaders(s *Stream, status int, fields []hpack.HeaderField, end bool) {
	if s.answered || s.headed || s.state == stateClosed || c.closed {
		s.answered = s.answered || end
		return
	}
	s.headed, s.answered = true, end
	c.encBuf.Reset()
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: statusValue(status)})
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	c.writeHeaders(s.ID, c.encBuf.Bytes(), end)
	if end {
		c.finish(s)
	}
}

// WriteData sends p as DATA of s's answer, after its HEADERS, as the
// client's windows allow: the rest is held back, copied, until they open
// (see Pending, Config.MaxBlockedBytes). With end set, p is the body's
// last part: the stream ends after it (or after the trailers given by
// WriteTrailers). A stream whose answer has ended, or that ended, or
// whose HEADERS were not sent, takes nothing.
func (c *Conn) WriteData(s *Stream, p []byte, end bool) {
	if s.answered || !s.headed || s.state == stateClosed || c.closed {
		s.answered = s.answered || end
		return
	}
	s.answered = end
	if len(s.pending) > 0 {
		s.pending = append(s.pending, p...) // held back: a copy of its own
		c.hold(s, len(p))
		c.sendData(s)
		return
	}
	s.pending = p
	c.sendData(s)
	if len(s.pending) > 0 {
		s.pending = append([]byte(nil), s.pending...) // p is the caller's
		s.blocked = true
		c.hold(s, len(s.pending))
		// The streams ended meanwhile (reset) leave the list here, or a
		// client that never opens a window would have it grow.
		c.blocked = slices.DeleteFunc(c.blocked, func(b *Stream) bool { return b.state == stateClosed })
		c.blocked = append(c.blocked, s)
	}
}

// WriteTrailers ends s's answer with a HEADERS frame of trailer fields
// (lower-case names, no pseudo-header field), once the DATA held back
// before them is sent. A stream whose answer has ended, or that ended,
// or whose HEADERS were not sent, takes nothing.
func (c *Conn) WriteTrailers(s *Stream, fields []hpack.HeaderField) {
	if s.answered || !s.headed || s.state == stateClosed || c.closed {
		s.answered = true
		return
	}
	s.answered = true
	s.trailer = append(s.trailer[:0], fields...)
	if len(s.trailer) == 0 {
		s.trailer = append(s.trailer, hpack.HeaderField{}) // sent as an empty block
	}
	c.sendData(s)
}

// Pending returns how many bytes of s's answer flow control holds back.
func (c *Conn) Pending(s *Stream) int { return len(s.pending) }

// SetPaced says whether the handler bounds how long s's answer may wait
// for the client's windows (its writer has a deadline): the bytes a paced
// stream holds back count in BlockedBytes, not in StalledBytes.
// Only a StreamHandler's streams may be paced; its Writable learns when
// their bytes go.
func (c *Conn) SetPaced(s *Stream, paced bool) {
	if s.paced == paced || c.sh == nil {
		return
	}
	if s.blocked {
		n := len(s.pending)
		if !paced {
			n = -n
		}
		c.pacedBytes += n
	}
	s.paced = paced
}

// hold counts n more bytes that s holds back (fewer when n < 0).
func (c *Conn) hold(s *Stream, n int) {
	c.blockedBytes += n
	if s.paced {
		c.pacedBytes += n
	}
}

// Reset ends s with RST_STREAM code, instead of an answer. A stream
// already answered or ended takes nothing.
func (c *Conn) Reset(s *Stream, code http2.ErrCode) {
	if s.answered || s.state == stateClosed || c.closed {
		s.answered = true
		return
	}
	s.answered = true
	c.resetStream(s.ID, code)
}

// writeHeaders sends header block b of stream id in frames of the
// client's largest size.
func (c *Conn) writeHeaders(id uint32, b []byte, endStream bool) {
	max := int(c.peerMaxFrame)
	frag := b[:min(len(b), max)]
	b = b[len(frag):]
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: endStream, EndHeaders: len(b) == 0})
	for len(b) > 0 {
		frag = b[:min(len(b), max)]
		b = b[len(frag):]
		_ = c.fr.WriteContinuation(id, len(b) == 0, frag)
	}
}

// sendData sends what the windows allow of s's pending body; after its
// last byte, once the answer's last part was given, the trailers if any
// and the stream's end.
func (c *Conn) sendData(s *Stream) {
	for len(s.pending) > 0 {
		n := int(min(int64(len(s.pending)), s.sendWindow, c.sendWindow, int64(c.peerMaxFrame)))
		if n <= 0 {
			return
		}
		end := n == len(s.pending) && s.answered && s.trailer == nil
		_ = c.fr.WriteData(s.ID, end, s.pending[:n])
		s.pending = s.pending[n:]
		s.sendWindow -= int64(n)
		c.sendWindow -= int64(n)
		if s.blocked {
			c.hold(s, -n)
		}
		if end {
			c.finish(s)
			return
		}
	}
	s.pending = nil
	if !s.answered || s.state == stateClosed {
		return
	}
	if s.trailer != nil {
		c.encBuf.Reset()
		for _, f := range s.trailer {
			if f.Name != "" {
				_ = c.enc.WriteField(f)
			}
		}
		c.writeHeaders(s.ID, c.encBuf.Bytes(), true)
	} else {
		_ = c.fr.WriteData(s.ID, true, nil)
	}
	c.finish(s)
}

// sendBlocked sends what the windows now allow of the bodies held back,
// oldest first; the handler learns of the paced streams that sent some.
func (c *Conn) sendBlocked() {
	kept := c.blocked[:0]
	var wrote []*Stream
	for _, s := range c.blocked {
		before := len(s.pending)
		if s.state != stateClosed {
			c.sendData(s)
		}
		if s.state != stateClosed && len(s.pending) > 0 {
			kept = append(kept, s)
		} else {
			s.blocked = false
		}
		if s.paced && s.state != stateClosed && len(s.pending) < before {
			wrote = append(wrote, s)
		}
	}
	clear(c.blocked[len(kept):])
	c.blocked = kept
	for _, s := range wrote {
		c.sh.Writable(s)
	}
}

// finish ends s, whose answer is sent whole.
func (c *Conn) finish(s *Stream) {
	if s.state == stateOpen {
		_ = c.fr.WriteRSTStream(s.ID, http2.ErrCodeNo)
		c.ended(s)
	}
	c.closeStream(s)
	if c.resets > 0 {
		c.resets--
	}
}

// statuses holds the text of every status code.
var statuses = func() (t [600]string) {
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusValue(code int) string {
	if code >= 100 && code < len(statuses) {
		return statuses[code]
	}
	return strconv.Itoa(code)
}
