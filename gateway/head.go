package gateway

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"
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
	connection  []byte // the Connection header's value
	idemKey     bool   // an Idempotency-Key header is present
	cl          int    // Content-Length; 0 when absent
	lines       []byte // the header lines, each ending in CRLF
}

// parseRequest reads b, a request head ending with its empty line, into h.
// It reports false unless the request is in plain form: a method of
// upper-case letters that the gateway serves (see refusedMethod), an
// origin-form target whose path needs no normalizing (no percent-encoding, no "." or
// ".." segment, no empty segment, only the characters RFC 3986 allows), the
// version HTTP/1.1, exactly one Host (a host name or address and a port:
// fasthttp reads the target through it), at most one Content-Length (digits
// only) and one Connection, X-Forwarded-For, -Host and -Proto, no Transfer-Encoding,
// Expect or Upgrade, and header lines of a token, a colon and a value
// without control characters but tabs, each ending in CRLF (no folded
// lines).
func parseRequest(b []byte, h *reqHead) bool {
	*h = reqHead{cl: -1}
	i := bytes.IndexByte(b, ' ')
	if i <= 0 || !upperToken(b[:i]) || refusedMethod(b[:i]) != 0 {
		return false
	}
	h.method, b = b[:i], b[i+1:]
	if i = bytes.IndexByte(b, ' '); i <= 0 {
		return false
	}
	h.uri, b = b[:i], b[i+1:]
	h.path = h.uri
	if q := bytes.IndexByte(h.uri, '?'); q >= 0 {
		h.path = h.uri[:q]
		if !plainQuery(h.uri[q+1:]) {
			return false
		}
	}
	if !plainPath(h.path) || !bytes.HasPrefix(b, http11CRLF) {
		return false
	}
	b = b[len(http11CRLF):]
	h.lines = b[:len(b)-2]
	var seen uint8 // the headers that may come once
	once := func(bit uint8) bool {
		dup := seen&bit != 0
		seen |= bit
		return !dup
	}
	ok := headers(b, func(name, value []byte) bool {
		switch {
		case equalName(name, "Host"):
			h.host = value
			return once(1) && plainHost(value)
		case equalName(name, "Content-Length"):
			h.cl = contentLength(value)
			return once(2) && h.cl >= 0
		case equalName(name, "Connection"):
			h.connection = value
			return once(4)
		case equalName(name, "X-Forwarded-For"):
			h.xff = value
			return once(8)
		case equalName(name, "X-Forwarded-Host"):
			h.fwdHost = value
			return once(16)
		case equalName(name, "X-Forwarded-Proto"):
			h.fwdProto = value
			return once(32)
		case equalName(name, "Idempotency-Key"):
			h.idemKey = true
		case equalName(name, "Transfer-Encoding"), equalName(name, "Expect"), equalName(name, "Upgrade"):
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

func (h *reqHead) Peek(name string) []byte {
	for b := h.lines; len(b) > 0; {
		k, v, rest, _ := headerLine(b)
		if equalName(k, name) {
			return v
		}
		b = rest
	}
	return nil
}

// close reports whether the client asked to close after the response.
func (h *reqHead) close() bool { return hasToken(h.connection, "close") }

// replayable reports whether the request may be sent twice (see
// replayable in roundtrip.go).
func (h *reqHead) replayable() bool { return idempotent(h.method) || h.idemKey }

// appendRequest appends the request h, whose body is body, as it goes to a
// target at addr: its hop-by-hop headers (those the Connection header names
// included) dropped, X-Forwarded-For set to xff, X-Forwarded-Host to the
// client's Host and X-Forwarded-Proto to http (unless the client is a
// trusted proxy that sent them: then they are kept), Host naming the
// target, and the route's rules (nil: none) applied, as exchange.prepare
// does for the goroutine engine.
func appendRequest(dst []byte, h *reqHead, xff []byte, trusted bool, addr string, body []byte, rules *routeRules) []byte {
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
		if !isHop(k, h.connection) && !equalName(k, "Host") && !forwardedHeader(k) && (edit == nil || !edit.drops(k)) {
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
	for _, f := range [...][2][]byte{{hdrForwardedFor, xff}, {hdrForwardedHost, fwdHost}, {hdrForwardedProto, fwdProto}} {
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
// its host must not reach the upstream beside the gateway's.
func forwardedHeader(k []byte) bool {
	return equalName(k, "X-Forwarded-For") || equalName(k, "X-Forwarded-Host") || equalName(k, "X-Forwarded-Proto") ||
		equalName(k, "Forwarded")
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
	end := bytes.IndexByte(b, '\n')
	if end < 13 || b[end-1] != '\r' || !bytes.HasPrefix(b, http11) || b[8] != ' ' ||
		(end > 13 && b[12] != ' ') || bytes.IndexByte(b[:end-1], '\r') >= 0 {
		return false
	}
	code, err := strconv.Atoi(string(b[9:12]))
	if err != nil || code < 200 || code > 599 {
		return false
	}
	h.status, h.code = b[:end-1], code
	b = b[end+1:]
	h.lines = b[:len(b)-2]
	connSeen := false
	return headers(b, func(name, value []byte) bool {
		switch {
		case equalName(name, "Content-Length"):
			dup := h.cl >= 0
			h.cl = contentLength(value)
			return !dup && h.cl >= 0
		case equalName(name, "Connection"):
			dup := connSeen
			connSeen, h.connection = true, value
			return !dup
		case equalName(name, "Transfer-Encoding"):
			return false
		}
		return true
	})
}

// close reports whether the target closes the connection after the
// response.
func (h *respHead) close() bool { return hasToken(h.connection, "close") }

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
		if !isHop(k, h.connection) && (len(rl) == 0 || !rateLimitHeader(k)) && !equalName(k, "Date") && (edit == nil || !edit.drops(k)) {
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
	return equalName(k, "RateLimit") || equalName(k, "RateLimit-Policy")
}

var (
	http11     = []byte("HTTP/1.1")
	http11CRLF = []byte("HTTP/1.1\r\n")
)

// headers calls fn with the name and value of each header line in b, the
// lines after a start line up to and with the empty line. It reports
// false, at once, when a line is malformed (see headerLine) or fn returns
// false.
func headers(b []byte, fn func(name, value []byte) bool) bool {
	for len(b) > 2 {
		name, value, rest, ok := headerLine(b)
		if !ok || !fn(name, value) {
			return false
		}
		b = rest
	}
	return true
}

// headerLine splits the first header line off b: its name, its value
// without surrounding spaces and tabs, and the lines after it. It reports
// false when the line is not a token, a colon and a value without control
// characters other than tabs, ending in CRLF.
func headerLine(b []byte) (name, value, rest []byte, ok bool) {
	end := bytes.IndexByte(b, '\n')
	if end < 1 || b[end-1] != '\r' {
		return nil, nil, nil, false
	}
	line := b[:end-1]
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !token(line[:colon]) {
		return nil, nil, nil, false
	}
	value = line[colon+1:]
	if hasCtl(value) {
		return nil, nil, nil, false
	}
	return line[:colon], trimSpace(value), b[end+1:], true
}

// hasCtl reports whether v holds a control character other than tab. It
// looks at eight bytes at a time while none is below 0x20 or 0x7f (the
// tests of "Bit Twiddling Hacks" for a byte less than n and a zero byte,
// exact on whether there is one), then byte by byte.
func hasCtl(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(v) >= 8 {
		x := binary.LittleEndian.Uint64(v)
		del := x ^ 0x7f*ones
		if (x-0x20*ones)&^x&highs|(del-ones)&^del&highs != 0 {
			break // a control character, or a tab
		}
		v = v[8:]
	}
	for _, c := range v {
		if ctlChar[c] {
			return true
		}
	}
	return false
}

// nextLine splits the first line off header lines that headerLine
// accepted: the line with its CRLF, and its name.
func nextLine(b []byte) (line, name []byte) {
	line = b[:bytes.IndexByte(b, '\n')+1]
	return line, line[:bytes.IndexByte(line, ':')]
}

// contentLength parses a Content-Length value: 1 to 9 digits, or -1.
func contentLength(v []byte) int {
	if len(v) == 0 || len(v) > 9 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = 10*n + int(c-'0')
	}
	return n
}

// plainPath reports whether p is an absolute path that needs no
// normalizing: only unreserved characters, sub-delimiters, ':', '@' and
// '/', and no empty, "." or ".." segment.
func plainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !pathChar[c] {
			return false
		}
		if c != '/' || i+1 == len(p) {
			continue
		}
		seg := p[i+1:]
		if j := bytes.IndexByte(seg, '/'); j >= 0 {
			seg = seg[:j]
		}
		if len(seg) == 0 || string(seg) == "." || string(seg) == ".." {
			return false
		}
	}
	return true
}

// plainHost reports whether v is a host name, an IPv4 address or a
// bracketed IPv6 address, with an optional port.
func plainHost(v []byte) bool {
	var rest []byte // the port with its colon
	if len(v) > 0 && v[0] == '[' {
		end := bytes.IndexByte(v, ']')
		if end < 2 {
			return false
		}
		for _, c := range v[1:end] {
			if !hexChar[c] && c != ':' && c != '.' {
				return false
			}
		}
		rest = v[end+1:]
	} else {
		name := v
		if i := bytes.IndexByte(v, ':'); i >= 0 {
			name, rest = v[:i], v[i:]
		}
		if len(name) == 0 {
			return false
		}
		for _, c := range name {
			if !hostChar[c] {
				return false
			}
		}
	}
	return len(rest) == 0 || (rest[0] == ':' && len(rest) <= 6 && contentLength(rest[1:]) >= 0)
}

// plainQuery reports whether q has only the characters a query may have.
func plainQuery(q []byte) bool {
	for _, c := range q {
		if !pathChar[c] && c != '?' && c != '%' {
			return false
		}
	}
	return true
}

// upperToken reports whether b is upper-case letters only, as methods are.
func upperToken(b []byte) bool {
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// token reports whether b is a token (RFC 9110 section 5.6.2).
func token(b []byte) bool {
	for _, c := range b {
		if !tokenChar[c] {
			return false
		}
	}
	return len(b) > 0
}

var pathChar, tokenChar, hostChar, hexChar = charTable(
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/"),
	charTable("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"),
	charTable("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"),
	charTable("abcdefABCDEF0123456789")

// ctlChar holds the control characters but tab.
var ctlChar = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t'
	}
	t[0x7f] = true
	return t
}()

func charTable(chars string) (t [256]bool) {
	for i := range len(chars) {
		t[chars[i]] = true
	}
	return t
}
