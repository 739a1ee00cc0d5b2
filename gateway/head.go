package gateway

import (
	"bytes"
	"time"

	"github.com/sluicehq/sluice/internal/http1"
)

// The event loops read the heads of plain HTTP/1.1 messages themselves
// rather than through fasthttp's types: they pick out the few headers the
// gateway acts on and forward the other header lines as they came, which
// saves parsing every header into a table and writing it out again. A
// message outside the plain form takes the general path instead: a request
// goes to the goroutine engine (fasthttp answers it there, or refuses it),
// a response is read with fasthttp's parser.

// reqHead is a request head read by parseRequest; its slices point into the
// bytes it was read from.
type reqHead struct {
	method, uri []byte
	path        []byte // the URI without its query
	host        []byte
	xff         []byte // X-Forwarded-For
	fwdHost     []byte // X-Forwarded-Host
	fwdProto    []byte // X-Forwarded-Proto
	requestID   []byte // X-Request-Id
	connection  []byte // the Connection header's value
	idemKey     bool   // an Idempotency-Key header is present
	cl          int    // Content-Length; 0 when absent
	lines       []byte // the header lines, each ending in CRLF
}

// parseRequest reads b, a request head ending with its empty line, into h.
// It reports false unless the request is in plain form (see
// http1.PlainRequestLine for its first line): a method of
// upper-case letters that the gateway serves, an
// origin-form target whose path needs no normalizing (no percent-encoding, no "." or
// ".." segment, no empty segment, only the characters RFC 3986 allows), the
// version HTTP/1.1, exactly one Host (a host name or address and a port:
// fasthttp reads the target through it), at most one Content-Length (digits
// only) and one Connection, X-Forwarded-For, -Host and -Proto and
// X-Request-Id, no Transfer-Encoding,
// Expect or Upgrade, and header lines of a token, a colon and a value
// without control characters but tabs, each ending in CRLF (no folded
// lines).
func parseRequest(b []byte, h *reqHead) bool {
	*h = reqHead{cl: -1}
	var plain bool
	if h.method, h.uri, h.path, b, plain = http1.PlainRequestLine(b); !plain {
		return false
	}
	h.lines = b[:len(b)-2]
	var seen uint8 // the headers that may come once
	once := func(bit uint8) bool {
		dup := seen&bit != 0
		seen |= bit
		return !dup
	}
	ok := http1.Headers(b, func(name, value []byte) bool {
		switch {
		case http1.EqualName(name, "Host"):
			h.host = value
			return once(1) && http1.PlainHost(value)
		case http1.EqualName(name, "Content-Length"):
			h.cl = http1.ContentLength(value)
			return once(2) && h.cl >= 0
		case http1.EqualName(name, "Connection"):
			h.connection = value
			return once(4)
		case http1.EqualName(name, "X-Forwarded-For"):
			h.xff = value
			return once(8)
		case http1.EqualName(name, "X-Forwarded-Host"):
			h.fwdHost = value
			return once(16)
		case http1.EqualName(name, "X-Forwarded-Proto"):
			h.fwdProto = value
			return once(32)
		case http1.EqualName(name, "X-Request-Id"):
			h.requestID = value
			return once(64)
		case http1.EqualName(name, "Idempotency-Key"):
			h.idemKey = true
		case http1.EqualName(name, "Transfer-Encoding"), http1.EqualName(name, "Expect"), http1.EqualName(name, "Upgrade"):
			return false
		}
		return true
	})
	if !ok {
		return false
	}
	h.cl = max(h.cl, 0)
	return len(h.host) > 0
}

// Path, Method, Host and Peek make a reqHead a request. A plain path needs
// no normalizing: it is the path as the upstream understands it.
func (h *reqHead) Path() []byte   { return h.path }
func (h *reqHead) Method() []byte { return h.method }
func (h *reqHead) Host() []byte   { return h.host }

func (h *reqHead) Peek(name string) []byte { return h.PeekAt(name, 0) }

func (h *reqHead) PeekAt(name string, i int) []byte {
	for b := h.lines; len(b) > 0; {
		k, v, rest, _ := http1.HeaderLine(b)
		if http1.EqualName(k, name) {
			if i == 0 {
				return v
			}
			i--
		}
		b = rest
	}
	return nil
}

// close reports whether the client asked to close after the response.
func (h *reqHead) close() bool { return http1.HasToken(h.connection, "close") }

// replayable reports whether the request may be sent twice (see
// replayable in roundtrip.go).
func (h *reqHead) replayable() bool { return idempotent(h.method) || h.idemKey }

// appendRequest appends the request h, whose body is body, as it goes to a
// target at addr: its hop-by-hop headers (those the Connection header names
// included) dropped, X-Forwarded-For set to xff, X-Forwarded-Host to the
// client's Host and X-Forwarded-Proto to http (unless the client is a
// trusted proxy that sent them: then they are kept), X-Request-Id to id,
// Host naming the target, when traceparent is not nil the trace context
// traceparent and tracestate (none when "") in place of the client's, and
// the route's rules (nil: none) applied, as exchange.prepare does for the
// goroutine engine.
func appendRequest(dst []byte, h *reqHead, xff []byte, trusted bool, addr string, body []byte, rules *routeRules,
	id, traceparent []byte, tracestate string) []byte {
	dst = append(dst, h.method...)
	dst = append(dst, ' ')
	var edit *headerEdit
	if rules == nil {
		dst = append(dst, h.uri...)
	} else {
		edit = &rules.request
		dst = rules.appendPath(dst, h.path)
		dst = append(dst, h.uri[len(h.path):]...) // the query
	}
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	if rules != nil && rules.preserveHost {
		dst = append(dst, h.host...)
	} else {
		dst = append(dst, addr...)
	}
	dst = append(dst, "\r\n"...)
	for b := h.lines; len(b) > 0; {
		line, k := nextLine(b)
		if !http1.IsHop(k, h.connection) && !http1.EqualName(k, "Host") && !forwardedHeader(k) && !http1.EqualName(k, "X-Request-Id") &&
			(traceparent == nil || !http1.EqualName(k, "Traceparent") && !http1.EqualName(k, "Tracestate")) && (edit == nil || !edit.drops(k)) {
			dst = append(dst, line...)
		}
		b = b[len(line):]
	}
	fwdHost, fwdProto := h.host, valueHTTP
	if trusted && len(h.fwdHost) > 0 {
		fwdHost = h.fwdHost
	}
	if trusted && len(h.fwdProto) > 0 {
		fwdProto = h.fwdProto
	}
	var ts []byte
	if tracestate != "" {
		ts = []byte(tracestate)
	}
	for _, f := range [...][2][]byte{{hdrForwardedFor, xff}, {hdrForwardedHost, fwdHost}, {hdrForwardedProto, fwdProto},
		{hdrRequestID, id}, {hdrTraceparent, traceparent}, {hdrTracestate, ts}} {
		if f[1] == nil {
			continue // no trace context: tracing is off, or no tracestate
		}
		if edit == nil || !edit.drops(f[0]) { // else the rules replace it, as on the goroutine engine
			dst = append(append(append(append(dst, f[0]...), ": "...), f[1]...), "\r\n"...)
		}
	}
	if edit != nil {
		dst = edit.appendLines(dst, false)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// forwardedHeader reports whether k is one of the X-Forwarded-* headers the
// gateway sets, or Forwarded (RFC 7239), which it never passes on (as
// net/http's ReverseProxy): a client's word on who it is, its scheme or
// its host must not reach the upstream beside the gateway's. A name with
// '_' for '-' is one of them too (see cgiName): X_Forwarded_For is
// X-Forwarded-For to a CGI-style server.
func forwardedHeader(k []byte) bool {
	return cgiName(k, "X-Forwarded-For") || cgiName(k, "X-Forwarded-Host") || cgiName(k, "X-Forwarded-Proto") ||
		http1.EqualName(k, "Forwarded")
}

// respHead is a response head read by parseResponse; its slices point into
// the bytes it was read from.
type respHead struct {
	status     []byte // the status line without its CRLF
	code       int
	cl         int    // Content-Length; -1 when absent
	connection []byte // the Connection header's value
	lines      []byte // the header lines, each ending in CRLF
}

// parseResponse reads b, a response head ending with its empty line, into
// h. It reports false unless the response is in plain form: the version
// HTTP/1.1, a final status (200 to 599), at most one Content-Length
// (digits only) and one Connection, no Transfer-Encoding, and header lines
// as parseRequest wants them.
func parseResponse(b []byte, h *respHead) bool {
	*h = respHead{cl: -1}
	var plain bool
	if h.status, h.code, b, plain = http1.PlainStatusLine(b); !plain {
		return false
	}
	h.lines = b[:len(b)-2]
	connSeen := false
	return http1.Headers(b, func(name, value []byte) bool {
		switch {
		case http1.EqualName(name, "Content-Length"):
			dup := h.cl >= 0
			h.cl = http1.ContentLength(value)
			return !dup && h.cl >= 0
		case http1.EqualName(name, "Connection"):
			dup := connSeen
			connSeen, h.connection = true, value
			return !dup
		case http1.EqualName(name, "Transfer-Encoding"):
			return false
		}
		return true
	})
}

// close reports whether the target closes the connection after the
// response.
func (h *respHead) close() bool { return http1.HasToken(h.connection, "close") }

// appendResponse appends the response h, whose body is body, as it goes to
// the client: its hop-by-hop headers dropped, its Date replaced by the
// gateway's of now (see appendDate), the rate limit's headers (RateLimit-Policy:
// policy, RateLimit: rl) replacing the target's when rl is not empty, the
// route's response rules (edit; nil: none) applied, and Connection: close
// when closing.
func appendResponse(dst []byte, h *respHead, policy, rl []byte, closing bool, body []byte, now time.Time, edit *headerEdit) []byte {
	dst = append(dst, h.status...)
	dst = append(dst, "\r\n"...)
	for b := h.lines; len(b) > 0; {
		line, k := nextLine(b)
		if !http1.IsHop(k, h.connection) && (len(rl) == 0 || !rateLimitHeader(k)) && !http1.EqualName(k, "Date") && (edit == nil || !edit.drops(k)) {
			dst = append(dst, line...)
		}
		b = b[len(line):]
	}
	if edit != nil {
		dst = edit.appendLines(dst, len(rl) > 0)
	}
	dst = appendDate(dst, now)
	if len(rl) > 0 {
		dst = append(dst, "RateLimit-Policy: "...)
		dst = append(dst, policy...)
		dst = append(dst, "\r\nRateLimit: "...)
		dst = append(dst, rl...)
		dst = append(dst, "\r\n"...)
	}
	if closing {
		dst = append(dst, "Connection: close\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

func rateLimitHeader(k []byte) bool {
	return http1.EqualName(k, "RateLimit") || http1.EqualName(k, "RateLimit-Policy")
}

var http11 = []byte("HTTP/1.1")

// nextLine splits the first line off header lines that http1.HeaderLine
// accepted: the line with its CRLF, and its name.
func nextLine(b []byte) (line, name []byte) {
	line = b[:bytes.IndexByte(b, '\n')+1]
	return line, line[:bytes.IndexByte(line, ':')]
}
