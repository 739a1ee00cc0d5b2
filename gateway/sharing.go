package gateway

import (
	"bytes"
	"encoding/binary"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// What coalesced requests may share: requests of different callers, or
// with different conditions, never join one call (coalescingKey), and an answer meant for one caller, or for
// requests unlike the one at hand, is not given to the requests that joined
// its call (sharedResponse.sharesWith).

// callerHeaders are the request headers that say who is asking: requests
// that differ in any of them never coalesce. They are the credentials of
// RFC 9110 and RFC 6265 (Authorization, Cookie) and the API-key headers in
// common use. Proxy-Authorization is not one: it is hop-by-hop, for the
// gateway, which does not forward it, so no answer can depend on it.
var callerHeaders = []string{"Authorization", "Cookie", "X-Api-Key", "X-Auth-Token", "X-Access-Token"}

// formHeaders are the request headers that most often choose the form of
// an answer; requests that differ in them do not coalesce either.
var formHeaders = []string{"Accept", "Accept-Encoding"}

// conditionHeaders are the request headers that make a request conditional
// or ask for part of a representation (RFC 9110 sections 13.1 and 14.2):
// the answer to one may be a 304, a 412 or a 206, which a request without
// them, or with other values, must not get. Coalesced requests differ in
// none of them; last good answers, always whole 2xx answers, are kept
// whatever they say.
var conditionHeaders = []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range"}

// coalescingKey identifies the requests that may share one upstream call:
// those of the same requestKey with the same values of conditionHeaders,
// read as appendValues reads them.
func coalescingKey(req *fasthttp.RequestHeader, limitKey string, vary []string) string {
	b := appendRequestKey(make([]byte, 0, 256), req, limitKey, vary)
	for _, h := range conditionHeaders {
		b = appendValues(b, req, h)
	}
	return string(b)
}

// requestKey identifies the requests that may get one answer: same method,
// host and request target (path and query), same values of
// callerHeaders, formHeaders and the route's own list (vary), each read
// under every name a CGI-style server reads as it (see appendValues), and
// the same rate-limit key (limitKey, "" when the route has no rate limit),
// which names the caller as the route sees it. Every field is
// length-prefixed, so that two different requests never have the same key.
func requestKey(req *fasthttp.RequestHeader, limitKey string, vary []string) string {
	return string(appendRequestKey(make([]byte, 0, 256), req, limitKey, vary))
}

// appendRequestKey appends requestKey's key to b.
func appendRequestKey(b []byte, req *fasthttp.RequestHeader, limitKey string, vary []string) []byte {
	b = appendField(b, req.Method())
	b = appendField(b, req.Host())
	b = appendField(b, req.RequestURI())
	b = binary.AppendUvarint(b, uint64(len(limitKey)))
	b = append(b, limitKey...)
	for _, h := range callerHeaders {
		b = appendValues(b, req, h)
	}
	for _, h := range formHeaders {
		b = appendValues(b, req, h)
	}
	// The route's names are in the key too: a reload may change them while
	// calls keyed by the old list are under way.
	b = binary.AppendUvarint(b, uint64(len(vary)))
	for _, h := range vary {
		b = binary.AppendUvarint(b, uint64(len(h)))
		b = append(b, h...)
		b = appendValues(b, req, h)
	}
	return b
}

// appendField appends v to b, prefixed by its length.
func appendField(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendValues appends every value of the header name in req to b: their
// count, then each length-prefixed, in the order of req's headers. The
// header is read under every name a CGI-style server reads as name (any
// case, '_' for '-': see http1.CGIName), so that requests that differ in
// X_Tenant, which such an upstream reads as X-Tenant, differ in X-Tenant.
func appendValues(b []byte, req *fasthttp.RequestHeader, name string) []byte {
	n := 0
	for k := range req.All() {
		if http1.CGIName(k, name) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	if n == 0 {
		return b
	}
	for k, v := range req.All() {
		if http1.CGIName(k, name) {
			b = appendField(b, v)
		}
	}
	return b
}

// sharedResponse is an upstream response read whole so that every coalesced
// request can send it. It is read-only once shared: a fasthttp header is not
// (even its Peek writes to a scratch buffer), so the end-to-end headers are
// kept as plain pairs.
type sharedResponse struct {
	status  int
	headers [][2][]byte
	body    []byte
	// private reports an answer for the first request alone (see
	// privateHeader); status, headers and body are then not kept.
	private bool
	// vary names the request headers the answer depends on (its Vary
	// header), and varied holds the first request's values of them as
	// appendValues writes them.
	vary   []string
	varied []byte
}

// note records what the end-to-end response header k: v says about sharing
// the answer.
func (sr *sharedResponse) note(k, v []byte) {
	switch {
	case http1.EqualName(k, "Set-Cookie"):
		sr.private = true
	case http1.EqualName(k, "Cache-Control"):
		sr.private = sr.private || privateCacheControl(v)
	case http1.EqualName(k, "Vary"):
		for len(v) > 0 {
			name := v
			if i := bytes.IndexByte(v, ','); i >= 0 {
				name, v = v[:i], v[i+1:]
			} else {
				v = nil
			}
			switch name = http1.TrimSpace(name); {
			case len(name) == 0:
			case string(name) == "*":
				sr.private = true // the answer depends on more than the request
			case http1.ForwardedHeader(name):
				// The gateway sets them from the client's address: the
				// answer is the first client's alone. (A request refused
				// before any attempt still has the client's own, which
				// anyone may set to another's value.)
				sr.private = true
			default:
				sr.vary = append(sr.vary, string(name))
			}
		}
	}
}

// keepVaried records req's values of the headers the answer varies by. req
// is the first request as it was sent upstream: a header the gateway
// changed on the way (Host, the hop-by-hop ones) then differs from every
// other request's, which only ever withholds the answer. (The X-Forwarded-*
// ones, which a request not sent upstream has as its client set them,
// make the answer private instead: see note.)
func (sr *sharedResponse) keepVaried(req *fasthttp.RequestHeader) {
	for _, h := range sr.vary {
		sr.varied = appendValues(sr.varied, req, h)
	}
}

// sharesWith reports whether the answer may go to req, a request that
// joined the call: it is not private, and req has the first request's
// values of every header the answer varies by.
func (sr *sharedResponse) sharesWith(req *fasthttp.RequestHeader) bool {
	if sr.private {
		return false
	}
	if len(sr.vary) == 0 {
		return true
	}
	var b []byte
	for _, h := range sr.vary {
		b = appendValues(b, req, h)
	}
	return bytes.Equal(b, sr.varied)
}

// privateCacheControl reports whether the Cache-Control value v (RFC 9111
// section 5.2: a comma-separated list of directives, each a token with an
// optional "=" argument, a token or a quoted string) has a private or a
// no-store directive, in any case and with or without an argument. A
// directive name inside a quoted argument is not a directive.
func privateCacheControl(v []byte) bool {
	i := 0
	for i < len(v) {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
			i++
		}
		start := i
		for i < len(v) && v[i] != '=' && v[i] != ',' && v[i] != ' ' && v[i] != '\t' {
			i++
		}
		if name := v[start:i]; http1.EqualName(name, "private") || http1.EqualName(name, "no-store") {
			return true
		}
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i < len(v) && v[i] == '=' {
			i++
			for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
				i++
			}
			if i < len(v) && v[i] == '"' {
				// A quoted string: up to the closing quote, over escapes.
				for i++; i < len(v) && v[i] != '"'; i++ {
					if v[i] == '\\' {
						i++
					}
				}
				i++
			}
		}
		for i < len(v) && v[i] != ',' {
			i++ // the rest of the directive (a token argument, or junk)
		}
	}
	return false
}
