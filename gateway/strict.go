package gateway

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// Rules of RFC 9112 that fasthttp's request parser is lenient about and
// that nginx enforces. A proxy that accepts a message its upstream may read
// differently invites request smuggling, so the goroutine engine refuses
// such a request before routing it; the event loops never take one as
// plain and hand it to the goroutine engine, which refuses it there.

// refusedMethod returns the status a request with this method is refused
// with, or 0: 400 for a method that is not upper-case letters, '_' and '-'
// (nginx's rule; methods are case-sensitive, and "get" is not GET to every
// upstream), 405 for CONNECT (the gateway tunnels nothing) and TRACE (it
// would echo the credentials the gateway adds or forwards).
func refusedMethod(method []byte) int {
	if len(method) == 0 {
		return fasthttp.StatusBadRequest
	}
	for _, c := range method {
		if (c < 'A' || c > 'Z') && c != '_' && c != '-' {
			return fasthttp.StatusBadRequest
		}
	}
	switch string(method) {
	case "CONNECT", "TRACE":
		return fasthttp.StatusMethodNotAllowed
	}
	return 0
}

// refusedHead returns the status a request is refused with, or 0, from its
// method, target, protocol and header block as they came on the wire
// (fasthttp's RawHeaders: the lines after the request line, up to and with
// the empty line). Beside refusedMethod's rules:
//   - the version is HTTP/1.x (505 otherwise; a minor version above 1 is
//     read as HTTP/1.1, RFC 9110 section 2.5);
//   - the target is not "*": the gateway serves no server-wide OPTIONS, and
//     the upstream would read it as a path (400, as nginx);
//   - every '%' in the target starts a percent-encoded byte, two hex digits
//     (400, as nginx: fasthttp would forward "%zz" as "%25zz");
//   - a target starting with "//" comes with a Host: without one, fasthttp
//     reads "//a" as an authority and the path as "/" (400);
//   - every header line is a token, a colon and a value without control
//     characters but tabs, ending in CRLF: no space before the colon, no
//     obs-fold (a line starting with a space or tab), no bare CR or LF (400);
//   - Transfer-Encoding is "chunked" alone (anything else is 501, as nginx
//     answers), and never beside Content-Length (400).
func refusedHead(method, target, proto, raw []byte) int {
	if code := refusedMethod(method); code != 0 {
		return code
	}
	if len(proto) != len("HTTP/1.1") || string(proto[:7]) != "HTTP/1." || proto[7] < '0' || proto[7] > '9' {
		return fasthttp.StatusHTTPVersionNotSupported
	}
	if string(target) == "*" || !percentEncoded(target) {
		return fasthttp.StatusBadRequest
	}
	if len(target) > 1 && target[0] == '/' && target[1] == '/' && !hasHost(raw) {
		return fasthttp.StatusBadRequest
	}
	var cl, te, otherTE bool
	ok := headers(raw, func(name, value []byte) bool {
		switch {
		case equalName(name, "Content-Length"):
			cl = true
		case equalName(name, "Transfer-Encoding"):
			otherTE = otherTE || te || !equalName(value, "chunked")
			te = true
		}
		return true
	})
	switch {
	case !ok:
		return fasthttp.StatusBadRequest
	case otherTE:
		return fasthttp.StatusNotImplemented
	case te && cl:
		return fasthttp.StatusBadRequest
	}
	return 0
}

// refusalReason names the reason of a refusal by refusedHead's status.
func refusalReason(code int) string {
	switch code {
	case fasthttp.StatusMethodNotAllowed:
		return "method_not_allowed"
	case fasthttp.StatusNotImplemented:
		return "not_implemented"
	case fasthttp.StatusHTTPVersionNotSupported:
		return "version_not_supported"
	}
	return "bad_request"
}

// percentEncoded reports whether every '%' in target is followed by two
// hex digits.
func percentEncoded(target []byte) bool {
	for i := bytes.IndexByte(target, '%'); i >= 0; i = bytes.IndexByte(target, '%') {
		if len(target) < i+3 || !hexChar[target[i+1]] || !hexChar[target[i+2]] {
			return false
		}
		target = target[i+3:]
	}
	return true
}

// hasHost reports whether the header block raw has a Host line with a value.
func hasHost(raw []byte) bool {
	found := false
	headers(raw, func(name, value []byte) bool {
		found = found || equalName(name, "Host") && len(value) > 0
		return true
	})
	return found
}
