package http1

import (
	"bytes"
	"net/http"
)

// Rules of RFC 9112 that fasthttp's request parser is lenient about and
// that nginx enforces. A proxy that accepts a message its upstream may read
// differently invites request smuggling, so the gateway refuses such a
// request before routing it.

// RefusedMethod returns the status a request with this method is refused
// with, or 0: 400 for a method that is not upper-case letters, '_' and '-'
// (nginx's rule; methods are case-sensitive, and "get" is not GET to every
// upstream), 405 for CONNECT (the gateway tunnels nothing) and TRACE (it
// would echo the credentials the gateway adds or forwards).
func RefusedMethod(method []byte) int {
	if len(method) == 0 {
		return http.StatusBadRequest
	}
	for _, c := range method {
		if (c < 'A' || c > 'Z') && c != '_' && c != '-' {
			return http.StatusBadRequest
		}
	}
	switch string(method) {
	case "CONNECT", "TRACE":
		return http.StatusMethodNotAllowed
	}
	return 0
}

// RefusedHead returns the status a request is refused with, or 0, from its
// method, target, protocol and header block as they came on the wire (the
// lines after the request line, up to and with the empty line). Beside
// RefusedMethod's rules:
//   - the version is HTTP/1.x (505 otherwise; a minor version above 1 is
//     read as HTTP/1.1, RFC 9110 section 2.5);
//   - the target is not "*": the gateway serves no server-wide OPTIONS, and
//     the upstream would read it as a path (400, as nginx);
//   - every '%' in the target starts a percent-encoded byte, two hex digits
//     (400, as nginx: fasthttp would forward "%zz" as "%25zz");
//   - a target starting with "//" comes with a Host: without one, fasthttp
//     reads "//a" as an authority and the path as "/" (400);
//   - an absolute-form target ("http://a/b") names the Host's own
//     authority, in any case, when there is a Host: RFC 9112 section 3.2.2
//     has a server take the target's, as nginx does, while the gateway
//     routes by Host, so a request that names two hosts is refused (400);
//   - a Host is a host and an optional port (see ValidHost; 400, RFC
//     9112 section 3.2: the gateway sends it on as X-Forwarded-Host);
//   - every header line is a token, a colon and a value without control
//     characters but tabs, ending in CRLF: no space before the colon, no
//     obs-fold (a line starting with a space or tab), no bare CR or LF (400);
//   - Transfer-Encoding is "chunked" alone (anything else is 501, as nginx
//     answers), and never beside Content-Length (400);
//   - no Transfer_Encoding or Content_Length (any case): servers of CGI's
//     lineage that read '_' as '-' may frame the body by them (400).
func RefusedHead(method, target, proto, raw []byte) int {
	if code := RefusedMethod(method); code != 0 {
		return code
	}
	if !IsHTTP1(proto) {
		return http.StatusHTTPVersionNotSupported
	}
	if string(target) == "*" || !PercentEncoded(target) {
		return http.StatusBadRequest
	}
	if len(target) > 1 && target[0] == '/' && target[1] == '/' && !HasHost(raw) {
		return http.StatusBadRequest
	}
	var cl, te, otherTE bool
	var host []byte
	ok := Headers(raw, func(name, value []byte) bool {
		switch {
		case EqualName(name, "Host"):
			host = value
			return ValidHost(value)
		case EqualName(name, "Content-Length"):
			cl = true
		case EqualName(name, "Transfer-Encoding"):
			otherTE = otherTE || te || !EqualName(value, "chunked")
			te = true
		case CGIName(name, "Content-Length"), CGIName(name, "Transfer-Encoding"):
			return false // with '_': the '-' forms are the cases above
		}
		return true
	})
	authority, absolute := absoluteAuthority(target)
	switch {
	case !ok, absolute && len(host) > 0 && !bytes.EqualFold(authority, host):
		return http.StatusBadRequest
	case otherTE:
		return http.StatusNotImplemented
	case te && cl:
		return http.StatusBadRequest
	}
	return 0
}

// RefusalReason names the reason of a refusal by RefusedHead's status:
// method_not_allowed, not_implemented, version_not_supported, or
// bad_request for any other.
func RefusalReason(code int) string {
	switch code {
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusNotImplemented:
		return "not_implemented"
	case http.StatusHTTPVersionNotSupported:
		return "version_not_supported"
	}
	return "bad_request"
}

// HasHost reports whether the header block raw has a Host line with a value.
func HasHost(raw []byte) bool {
	found := false
	Headers(raw, func(name, value []byte) bool {
		found = found || EqualName(name, "Host") && len(value) > 0
		return true
	})
	return found
}

// absoluteAuthority returns the authority of an absolute-form target (what
// follows "scheme://" up to the path, query or fragment), and whether
// target is one: a target that starts with neither '/' nor '*' and has a
// "://" after a scheme.
func absoluteAuthority(target []byte) ([]byte, bool) {
	i := bytes.Index(target, []byte("://"))
	if i <= 0 || target[0] == '/' || target[0] == '*' {
		return nil, false
	}
	rest := target[i+3:]
	if end := bytes.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	return rest, true
}

// ValidHost reports whether v is a Host value of RFC 9110 section 7.2:
// uri-host [":" port], where uri-host is an IP literal in brackets, or a
// registered name or IPv4 address of unreserved characters,
// sub-delimiters and percent-encoded bytes (RFC 3986 section 3.2.2), and
// port is digits. An empty v is valid (HTTP/1.0 needs no Host).
func ValidHost(v []byte) bool {
	name, port := v, []byte(nil)
	if len(v) > 0 && v[0] == '[' {
		end := ipLiteralEnd(v)
		if end < 0 {
			return false
		}
		name, port = nil, v[end+1:]
	} else if i := bytes.IndexByte(v, ':'); i >= 0 {
		name, port = v[:i], v[i:]
	}
	for _, c := range name {
		if !regNameChar[c] {
			return false
		}
	}
	if !PercentEncoded(name) || len(port) > 0 && port[0] != ':' {
		return false
	}
	for _, c := range port[min(1, len(port)):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// regNameChar holds the characters of a registered name: unreserved,
// sub-delimiters and '%' (RFC 3986 section 3.2.2).
var regNameChar = charTable("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=%")
