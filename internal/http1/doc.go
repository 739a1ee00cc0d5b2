// Package http1 holds the pure parts of HTTP/1.1 on the wire that both of
// the gateway's engines use: reading header lines and tokens, the plain
// forms of a request target and a Host, the rules of RFC 9112 a request is
// refused by, the hop-by-hop headers, and how a response's body is framed;
// and the heads the event loops read and write themselves (Request and
// Response, ParseRequest and ParseResponse, AppendRequest and
// AppendResponse), which forward a plain message's header lines as they
// came.
//
// Its functions take and return bytes, strings and numbers, never the
// types of an HTTP library, and allocate nothing unless their
// documentation says so. Header names and list items are ASCII and
// compared in any case (RFC 9110 section 5.6).
package http1
