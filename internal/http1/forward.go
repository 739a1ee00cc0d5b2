package http1

import "bytes"

// Edit is a route's change to the header lines of a message on its way.
type Edit interface {
	// Drops reports whether the header line named name is left out.
	Drops(name []byte) bool
	// AppendLines appends the header lines the edit sets and adds, but for
	// RateLimit and RateLimit-Policy when rateLimited (the gateway's own
	// then stand).
	AppendLines(dst []byte, rateLimited bool) []byte
}

// Rewrite is a route's change to the target and Host of a request on its
// way.
type Rewrite interface {
	// AppendPath appends to dst the path the target is sent for path.
	AppendPath(dst, path []byte) []byte
	// KeepHost reports whether the client's Host goes to the target, in
	// place of the target's address.
	KeepHost() bool
}

// Forward is what AppendRequest sets in a request on its way to a target.
type Forward struct {
	// Addr is the target's host:port, the Host sent (unless Rewrite keeps
	// the client's).
	Addr string
	// XFF is the X-Forwarded-For sent, in place of the client's.
	XFF []byte
	// Trusted says that the client is a trusted proxy: its
	// X-Forwarded-Host and X-Forwarded-Proto are kept (else the client's
	// Host and "http", or "https" with HTTPS, are sent).
	Trusted bool
	// HTTPS says that the client came over TLS.
	HTTPS bool
	// ID is the X-Request-Id sent, in place of the client's.
	ID []byte
	// Traceparent and Tracestate (none when "") are the trace context
	// sent in place of the client's; a nil Traceparent lets the client's
	// pass.
	Traceparent []byte
	Tracestate  string
	// Rewrite changes the path and Host; nil: none.
	Rewrite Rewrite
	// Edit changes the header lines; nil: none. Lines it drops are left
	// out, the gateway's X-Forwarded-*, X-Request-Id and trace context
	// included (the edit then sets its own).
	Edit Edit
}

var (
	nameForwardedFor   = []byte("X-Forwarded-For")
	nameForwardedHost  = []byte("X-Forwarded-Host")
	nameForwardedProto = []byte("X-Forwarded-Proto")
	nameRequestID      = []byte("X-Request-Id")
	nameTraceparent    = []byte("Traceparent")
	nameTracestate     = []byte("Tracestate")
	valueHTTP          = []byte("http")
	valueHTTPS         = []byte("https")
)

// AppendRequest appends the request h, whose body is body, as it goes to a
// target (see Forward): its hop-by-hop headers (those the Connection
// header names included) and Forwarded dropped, X-Forwarded-For, -Host and
// -Proto, X-Request-Id and the trace context set, Host naming the target,
// and f's Rewrite and Edit applied. It allocates only to grow dst.
func AppendRequest(dst []byte, h *Request, f *Forward, body []byte) []byte {
	dst = append(dst, h.method...)
	dst = append(dst, ' ')
	if f.Rewrite == nil {
		dst = append(dst, h.uri...)
	} else {
		dst = f.Rewrite.AppendPath(dst, h.path)
		dst = append(dst, h.uri[len(h.path):]...) // the query
	}
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	if f.Rewrite != nil && f.Rewrite.KeepHost() {
		dst = append(dst, h.host...)
	} else {
		dst = append(dst, f.Addr...)
	}
	dst = append(dst, "\r\n"...)
	for b := h.lines; len(b) > 0; {
		line, k := nextLine(b)
		if !IsHop(k, h.connection) && !EqualName(k, "Host") && !ForwardedHeader(k) && !EqualName(k, "X-Request-Id") &&
			(f.Traceparent == nil || !EqualName(k, "Traceparent") && !EqualName(k, "Tracestate")) && (f.Edit == nil || !f.Edit.Drops(k)) {
			dst = append(dst, line...)
		}
		b = b[len(line):]
	}
	fwdHost, fwdProto := h.host, valueHTTP
	if f.HTTPS {
		fwdProto = valueHTTPS
	}
	if f.Trusted && len(h.fwdHost) > 0 {
		fwdHost = h.fwdHost
	}
	if f.Trusted && len(h.fwdProto) > 0 {
		fwdProto = h.fwdProto
	}
	for _, kv := range [...][2][]byte{{nameForwardedFor, f.XFF}, {nameForwardedHost, fwdHost}, {nameForwardedProto, fwdProto},
		{nameRequestID, f.ID}, {nameTraceparent, f.Traceparent}} {
		if kv[1] == nil {
			continue // no trace context: tracing is off
		}
		if f.Edit == nil || !f.Edit.Drops(kv[0]) { // else the edit replaces it, as on the goroutine engine
			dst = append(append(append(append(dst, kv[0]...), ": "...), kv[1]...), "\r\n"...)
		}
	}
	if f.Tracestate != "" && (f.Edit == nil || !f.Edit.Drops(nameTracestate)) {
		dst = append(append(append(append(dst, nameTracestate...), ": "...), f.Tracestate...), "\r\n"...)
	}
	if f.Edit != nil {
		dst = f.Edit.AppendLines(dst, false)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// ForwardedHeader reports whether k is one of the X-Forwarded-* headers
// the gateway sets, or Forwarded (RFC 7239), which it never passes on (as
// net/http's ReverseProxy): a client's word on who it is, its scheme or
// its host must not reach the upstream beside the gateway's. A name with
// '_' for '-' is one of them too (see CGIName): X_Forwarded_For is
// X-Forwarded-For to a CGI-style server.
func ForwardedHeader(k []byte) bool {
	return CGIName(k, "X-Forwarded-For") || CGIName(k, "X-Forwarded-Host") || CGIName(k, "X-Forwarded-Proto") ||
		EqualName(k, "Forwarded")
}

// nextLine splits the first line off header lines that HeaderLine
// accepted: the line with its CRLF, and its name.
func nextLine(b []byte) (line, name []byte) {
	line = b[:bytes.IndexByte(b, '\n')+1]
	return line, line[:bytes.IndexByte(line, ':')]
}
