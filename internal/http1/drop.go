package http1

import "bytes"

// Drop says which of a client's request fields the gateway leaves out of
// the request it forwards: the one predicate of every forwarding path (the
// loops' AppendRequest, the goroutine engine, WebSocket handshakes, gRPC
// calls, trailer sections), whose differences are its fields.
//
// Always dropped, in any case: the hop-by-hop fields (HopHeaders: the
// Proxy-* ones, Transfer-Encoding, Upgrade…), the X-Forwarded-For, -Host
// and -Proto the gateway sets, Forwarded and X-Real-IP (ForwardedHeader),
// X-Request-Id (RequestIDHeader), the last two kinds under their '_'
// forms too, and Transfer_Encoding and Content_Length with a '_' for a
// '-' (servers of CGI's lineage frame a body by them: see CGIName). Host
// and Content-Length are not dropped: every path writes its own.
type Drop struct {
	// Trusted says that the client is a trusted proxy, whose other
	// X-Forwarded-* fields (ForwardedClaim) pass; else they are dropped.
	Trusted bool
	// Connection is the client's Connection list: the fields it names are
	// dropped too (but Content-Length and Host, see IsHop).
	Connection []byte
	// Trace says that the gateway sends its own trace context: the
	// client's Traceparent and Tracestate are dropped (else they pass).
	Trace bool
	// Trailer says that the fields are a trailer section, where
	// Content-Length is dropped as well (a trailer frames nothing).
	Trailer bool
}

// Drops reports whether the field named k is left out.
func (d *Drop) Drops(k []byte) bool {
	switch {
	case IsHop(k, d.Connection), ForwardedHeader(k), RequestIDHeader(k), !d.Trusted && ForwardedClaim(k):
		return true
	case d.Trace && (EqualName(k, "Traceparent") || EqualName(k, "Tracestate")):
		return true
	case d.Trailer && EqualName(k, "Content-Length"):
		return true
	}
	return bytes.IndexByte(k, '_') >= 0 && (CGIName(k, "Content-Length") || CGIName(k, "Transfer-Encoding"))
}
