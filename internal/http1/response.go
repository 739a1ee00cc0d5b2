package http1

import "net/http"

// Response is a response head read by ParseResponse; its slices point
// into the bytes it was read from.
type Response struct {
	status     []byte // the status line without its CRLF
	code       int
	cl         int    // Content-Length; -1 when absent
	connection []byte // the Connection header's value
	lines      []byte // the header lines, each ending in CRLF
}

// ParseResponse reads b, a response head ending with its empty line, into
// h. It reports false unless the response is in plain form: the version
// HTTP/1.1, a final status (200 to 599), at most one Content-Length
// (digits only; none on a 204, which RFC 9110 section 8.6 forbids it, so
// that the answer is not sent on as it came) and one Connection, no
// Transfer-Encoding, and header lines as ParseRequest wants them.
func ParseResponse(b []byte, h *Response) bool {
	*h = Response{cl: -1}
	var plain bool
	if h.status, h.code, b, plain = PlainStatusLine(b); !plain {
		return false
	}
	h.lines = b[:len(b)-2]
	connSeen := false
	return Headers(b, func(name, value []byte) bool {
		switch {
		case EqualName(name, "Content-Length"):
			dup := h.cl >= 0
			h.cl = ContentLength(value)
			return !dup && h.cl >= 0 && h.code != http.StatusNoContent
		case EqualName(name, "Connection"):
			dup := connSeen
			connSeen, h.connection = true, value
			return !dup
		case EqualName(name, "Transfer-Encoding"):
			return false
		}
		return true
	})
}

// Code returns the response's status code.
func (h *Response) Code() int { return h.code }

// ContentLength returns the response's Content-Length; -1 without one.
func (h *Response) ContentLength() int { return h.cl }

// Close reports whether the target closes the connection after the
// response.
func (h *Response) Close() bool { return HasToken(h.connection, "close") }

// Deliver is what AppendResponse sets in a response on its way to the
// client.
type Deliver struct {
	// Date is the Date header line, CRLF included, that replaces the
	// target's.
	Date []byte
	// Policy and RateLimit, when RateLimit is not empty, are the values of
	// the RateLimit-Policy and RateLimit headers that replace the
	// target's.
	Policy, RateLimit []byte
	// Closing adds Connection: close.
	Closing bool
	// Edit changes the header lines; nil: none.
	Edit Edit
}

// AppendResponse appends the response h, whose body is body, as it goes
// to the client (see Deliver): its hop-by-hop headers dropped, its Date
// replaced, the rate limit's headers and the route's edit applied, and
// Connection: close when closing. It allocates only to grow dst.
func AppendResponse(dst []byte, h *Response, d *Deliver, body []byte) []byte {
	rl := d.RateLimit
	dst = append(dst, h.status...)
	dst = append(dst, "\r\n"...)
	for b := h.lines; len(b) > 0; {
		line, k := nextLine(b)
		if !IsHop(k, h.connection) && (len(rl) == 0 || !rateLimitHeader(k)) && !EqualName(k, "Date") && (d.Edit == nil || !d.Edit.Drops(k)) {
			dst = append(dst, line...)
		}
		b = b[len(line):]
	}
	if d.Edit != nil {
		dst = d.Edit.AppendLines(dst, len(rl) > 0)
	}
	dst = append(dst, d.Date...)
	if len(rl) > 0 {
		dst = append(dst, "RateLimit-Policy: "...)
		dst = append(dst, d.Policy...)
		dst = append(dst, "\r\nRateLimit: "...)
		dst = append(dst, rl...)
		dst = append(dst, "\r\n"...)
	}
	if d.Closing {
		dst = append(dst, "Connection: close\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

func rateLimitHeader(k []byte) bool {
	return EqualName(k, "RateLimit") || EqualName(k, "RateLimit-Policy")
}
