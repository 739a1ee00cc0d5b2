package http1

import (
	"bytes"
	"net/netip"
	"strconv"
)

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
	// Host and "http", or "https" with HTTPS, are sent), and its other
	// X-Forwarded-* headers pass (see ForwardedClaim; else they are
	// dropped).
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
// target (see Forward): the fields Drop drops left out, X-Forwarded-For, -Host and
// -Proto, X-Request-Id and the trace context set, Host naming the target,
// Content-Length (where the client's was) written as the body's length in
// plain digits, and f's Rewrite and Edit applied. It allocates only to
// grow dst.
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
	drop := Drop{Trusted: f.Trusted, Connection: h.connection, Trace: f.Traceparent != nil}
	for b := h.lines; len(b) > 0; {
		line, k := nextLine(b)
		b = b[len(line):]
		switch {
		case EqualName(k, "Content-Length"):
			// Written afresh: the client's line may hold tabs or leading
			// zeros, which some parsers do not read as the same length.
			dst = append(strconv.AppendInt(append(dst, "Content-Length: "...), int64(len(body)), 10), "\r\n"...)
		case !EqualName(k, "Host") && !drop.Drops(k) && (f.Edit == nil || !f.Edit.Drops(k)):
			dst = append(dst, line...)
		}
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
// the gateway sets, or Forwarded (RFC 7239) or X-Real-IP (the client's
// address as nginx's common configurations send it), which it never
// passes on (as net/http's ReverseProxy does Forwarded): a client's word
// on who it is, its scheme or its host must not reach the upstream beside
// the gateway's. A name with '_' for '-' is one of them too (see
// CGIName): X_Forwarded_For is X-Forwarded-For to a CGI-style server.
func ForwardedHeader(k []byte) bool {
	return CGIName(k, "X-Forwarded-For") || CGIName(k, "X-Forwarded-Host") || CGIName(k, "X-Forwarded-Proto") ||
		EqualName(k, "Forwarded") || CGIName(k, "X-Real-IP")
}

// ForwardedClaim reports whether k is an X-Forwarded-* header other than
// the three the gateway sets (see ForwardedHeader), in any case and with
// '_' for '-': X-Forwarded-Port, -Prefix, -Ssl, -Server and the like,
// which frameworks read beside -Host and -Proto to build the links they
// send. The gateway passes them from a trusted proxy only.
func ForwardedClaim(k []byte) bool {
	const prefix = "X-Forwarded-"
	return len(k) > len(prefix) && CGIName(k[:len(prefix)], prefix) && !ForwardedHeader(k)
}

// ForwardedAddr reads one entry of an X-Forwarded-For list (surrounding
// spaces and tabs aside): an IP address ("192.0.2.1", "2001:db8::1"), or
// one with the port some proxies write ("192.0.2.1:4711",
// "[2001:db8::1]:4711", "[2001:db8::1]"). An IPv4 address mapped into IPv6
// is unmapped. It reports false for any other entry: "unknown", an
// obfuscated node (RFC 7239 section 6.3), a name, a port past 65535.
func ForwardedAddr(entry []byte) (netip.Addr, bool) {
	s := string(TrimSpace(entry))
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, perr := netip.ParseAddrPort(s); perr == nil {
			a, err = ap.Addr(), nil
		} else if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err == nil && !a.Is6() {
				err = perr // "[192.0.2.1]" is no entry
			}
		}
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// RequestIDHeader reports whether k is X-Request-Id, which the gateway
// sends in place of the client's, under any name a CGI-style server reads
// as it (see CGIName): X_Request_Id beside the gateway's X-Request-Id would
// give such a server the client's id, whichever line it takes.
func RequestIDHeader(k []byte) bool {
	return CGIName(k, "X-Request-Id")
}

// nextLine splits the first line off header lines that HeaderLine
// accepted: the line with its CRLF, and its name.
func nextLine(b []byte) (line, name []byte) {
	line = b[:bytes.IndexByte(b, '\n')+1]
	return line, line[:bytes.IndexByte(line, ':')]
}
