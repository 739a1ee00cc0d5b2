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
	if s.answered || s.state == stateClosed || c.closed {
		s.answered = true
		return
	}
	s.answered = true
	c.encBuf.Reset()
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: statusValue(status)})
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	c.writeHeaders(s.ID, c.encBuf.Bytes(), len(body) == 0)
	if len(body) == 0 {
		c.finish(s)
		return
	}
	s.pending = body
	c.sendData(s)
	if len(s.pending) > 0 {
		s.pending = append([]byte(nil), s.pending...) // body is the caller's
		c.blockedBytes += len(s.pending)
		s.blocked = true
		// The streams ended meanwhile (reset) leave the list here, or a
		// client that never opens a window would have it grow.
		c.blocked = slices.DeleteFunc(c.blocked, func(b *Stream) bool { return b.state == stateClosed })
		c.blocked = append(c.blocked, s)
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

// sendData sends what the windows allow of s's pending body, and ends the
// stream after its last byte.
func (c *Conn) sendData(s *Stream) {
	for len(s.pending) > 0 {
		n := int(min(int64(len(s.pending)), s.sendWindow, c.sendWindow, int64(c.peerMaxFrame)))
		if n <= 0 {
			return
		}
		end := n == len(s.pending)
		_ = c.fr.WriteData(s.ID, end, s.pending[:n])
		s.pending = s.pending[n:]
		s.sendWindow -= int64(n)
		c.sendWindow -= int64(n)
		if s.blocked {
			c.blockedBytes -= n
		}
	}
	c.finish(s)
}

// sendBlocked sends what the windows now allow of the bodies held back,
// oldest first.
func (c *Conn) sendBlocked() {
	kept := c.blocked[:0]
	for _, s := range c.blocked {
		if s.state != stateClosed {
			c.sendData(s)
		}
		if s.state != stateClosed && len(s.pending) > 0 {
			kept = append(kept, s)
		}
	}
	clear(c.blocked[len(kept):])
	c.blocked = kept
}

// finish ends s, whose answer is sent whole.
func (c *Conn) finish(s *Stream) {
	if s.state == stateOpen {
		_ = c.fr.WriteRSTStream(s.ID, http2.ErrCodeNo)
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
