package http1

// The event loops read the heads of plain HTTP/1.1 messages themselves
// rather than through an HTTP library's types: they pick out the few
// headers the gateway acts on and forward the other header lines as they
// came, which saves parsing every header into a table and writing it out
// again. A message outside the plain form takes the general path instead:
// a request goes to the goroutine engine (fasthttp answers it there, or
// refuses it), a response is read with fasthttp's parser.

// Request is a request head read by ParseRequest; its slices point into
// the bytes it was read from.
type Request struct {
	method, uri []byte
	path        []byte // the URI without its query
	host        []byte
	xff         []byte // X-Forwarded-For
	fwdHost     []byte // X-Forwarded-Host
	fwdProto    []byte // X-Forwarded-Proto
	requestID   []byte // X-Request-Id
	connection  []byte // the Connection header's value
	idemKey     bool   // an Idempotency-Key header is present
	fwdClaim    bool   // another X-Forwarded-* header is present (ForwardedClaim)
	cl          int    // Content-Length; 0 when absent
	lines       []byte // the header lines, each ending in CRLF
}

// ParseRequest reads b, a request head ending with its empty line, into h.
// It reports false unless the request is in plain form (see
// PlainRequestLine for its first line): a method of upper-case letters
// that the gateway serves, an origin-form target whose path needs no
// normalizing (no percent-encoding, no "." or ".." segment, no empty
// segment, only the characters RFC 3986 allows), the version HTTP/1.1,
// exactly one Host (a host name or address and a port: fasthttp reads the
// target through it), at most one Content-Length (digits only) and one
// Connection, X-Forwarded-For, -Host and -Proto and X-Request-Id, no
// Transfer-Encoding, Expect or Upgrade (nor Transfer_Encoding or
// Content_Length), and header lines of a token, a
// colon and a value without control characters but tabs, each ending in
// CRLF (no folded lines).
func ParseRequest(b []byte, h *Request) bool {
	*h = Request{cl: -1}
	var plain bool
	if h.method, h.uri, h.path, b, plain = PlainRequestLine(b); !plain {
		return false
	}
	h.lines = b[:len(b)-2]
	var seen uint8 // the headers that may come once
	once := func(bit uint8) bool {
		dup := seen&bit != 0
		seen |= bit
		return !dup
	}
	ok := Headers(b, func(name, value []byte) bool {
		switch {
		case EqualName(name, "Host"):
			h.host = value
			return once(1) && PlainHost(value)
		case EqualName(name, "Content-Length"):
			h.cl = ContentLength(value)
			return once(2) && h.cl >= 0
		case EqualName(name, "Connection"):
			h.connection = value
			return once(4)
		case EqualName(name, "X-Forwarded-For"):
			h.xff = value
			return once(8)
		case EqualName(name, "X-Forwarded-Host"):
			h.fwdHost = value
			return once(16)
		case EqualName(name, "X-Forwarded-Proto"):
			h.fwdProto = value
			return once(32)
		case EqualName(name, "X-Request-Id"):
			h.requestID = value
			return once(64)
		case EqualName(name, "Idempotency-Key"):
			h.idemKey = true
		case EqualName(name, "Transfer-Encoding"), EqualName(name, "Expect"), EqualName(name, "Upgrade"):
			return false
		case ForwardedClaim(name):
			h.fwdClaim = true
		case CGIName(name, "Content-Length"), CGIName(name, "Transfer-Encoding"):
			return false // with '_' (RefusedHead refuses it)
		}
		return true
	})
	if !ok {
		return false
	}
	h.cl = max(h.cl, 0)
	return len(h.host) > 0
}

// Method returns the request's method.
func (h *Request) Method() []byte { return h.method }

// URI returns the request's target, in origin form.
func (h *Request) URI() []byte { return h.uri }

// Path returns the target's path, without its query. A plain path needs
// no normalizing: it is the path as the upstream understands it.
func (h *Request) Path() []byte { return h.path }

// Host returns the Host header's value.
func (h *Request) Host() []byte { return h.host }

// XForwardedFor returns the X-Forwarded-For header's value; nil without
// one.
func (h *Request) XForwardedFor() []byte { return h.xff }

// RequestID returns the X-Request-Id header's value; nil without one.
func (h *Request) RequestID() []byte { return h.requestID }

// ClaimsForwarded reports whether the request has an X-Forwarded-Host or
// X-Forwarded-Proto header, or another X-Forwarded-* (ForwardedClaim),
// which AppendRequest keeps only from a trusted proxy.
func (h *Request) ClaimsForwarded() bool {
	return len(h.fwdHost) > 0 || len(h.fwdProto) > 0 || h.fwdClaim
}

// ContentLength returns the request's Content-Length; 0 without one.
func (h *Request) ContentLength() int { return h.cl }

// Peek returns the value of the first header line named name (in any
// case); nil when there is none.
func (h *Request) Peek(name string) []byte { return h.PeekAt(name, 0) }

// PeekAt returns the value of the i-th (from 0) header line named name;
// nil when there are fewer.
func (h *Request) PeekAt(name string, i int) []byte {
	for b := h.lines; len(b) > 0; {
		k, v, rest, _ := HeaderLine(b)
		if EqualName(k, name) {
			if i == 0 {
				return v
			}
			i--
		}
		b = rest
	}
	return nil
}

// Close reports whether the client asked to close after the response.
func (h *Request) Close() bool { return HasToken(h.connection, "close") }

// Replayable reports whether the request may be sent twice: its method is
// idempotent, or it has an Idempotency-Key.
func (h *Request) Replayable() bool { return Idempotent(h.method) || h.idemKey }
