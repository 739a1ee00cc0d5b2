package gateway

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"net/netip"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/internal/http1"
)

// How a request is keyed for a route's rate limit (see rateLimit.key).
//
// A key header must name one caller without doubt, or a client could be
// counted as one caller while the upstream serves it as another: the
// gateway counts one value, and an upstream (or a framework or proxy in
// front of it) may read the first of several, the last, all of them
// joined, or one member of a comma-separated list. A client that sent a
// fresh value first and its real key second would never be limited. So a
// request whose key header comes on more than one field line, or holds a
// comma, is refused (400, "ambiguous_key") rather than keyed by a guess.
// Names that differ only in case, or in '-' against '_', count as the same
// header: CGI-style servers (WSGI, Rack, PHP) read X_Api_Key and X-Api-Key
// as one variable, HTTP_X_API_KEY.

// maxKeyValue is the longest key header value a key holds as it is; a
// longer one is replaced by its SHA-256 digest, so that a key's size, in
// memory or in Redis, does not grow with the client's headers.
const maxKeyValue = 64

// errAmbiguousKey refuses a request whose rate-limit key header is sent
// more than once or holds a list (see above).
var errAmbiguousKey = &keyError{}

// keyError is errAmbiguousKey's type: a 400 with the reason ambiguous_key
// (answer.Statuser), INVALID_ARGUMENT to a gRPC call (answer.GRPCCoder).
type keyError struct{}

func (*keyError) Error() string {
	return "gateway: the rate-limit key header is sent more than once or as a list"
}
func (*keyError) AnswerStatus() (int, string) { return http.StatusBadRequest, reasonAmbiguousKey }
func (*keyError) GRPCCode() codes.Code        { return codes.InvalidArgument }

// The reasons the gateway refuses an ambiguous request with (400):
// reasonAmbiguousKey for its rate-limit key header (errAmbiguousKey),
// reasonAmbiguousHeader for a header its route is matched by, and
// reasonAmbiguousPath for a path whose segment parameters change its
// route (see state.route).
const (
	reasonAmbiguousKey    = "ambiguous_key"
	reasonAmbiguousHeader = "ambiguous_header"
	reasonAmbiguousPath   = "ambiguous_path"
)

// keyValue returns the value of l's key header in req (nil when absent),
// without surrounding spaces and tabs, or nil and false when req is to be
// refused with errAmbiguousKey: the header comes on more than one field
// line under any of l.names, or its value holds a comma and the header may
// be a list (the same list on one line; see http1.OneValue: the comma in
// Authorization's Digest credentials, say, is part of its one value, which
// is the key).
func (l *rateLimit) keyValue(req request) ([]byte, bool) {
	v, n := fieldValue(req, l.names)
	if n > 1 || !l.one && bytes.IndexByte(v, ',') >= 0 {
		return nil, false
	}
	return v, true
}

// fieldValue returns the value of the header read under names (see
// http1.CGINames) in req, without surrounding spaces and tabs (nil when
// absent), and on how many field lines it comes, counted up to 2.
func fieldValue(req request, names []string) ([]byte, int) {
	var v []byte
	n := 0
	for _, name := range names {
		for i := 0; n < 2; i++ {
			x := req.PeekAt(name, i)
			if x == nil {
				break
			}
			v = x
			n++
		}
	}
	return http1.TrimSpace(v), n
}

// keyOf returns whose limit req, from client, counts against on rt (see
// key), and false when req is to be refused with errAmbiguousKey.
func (l *rateLimit) keyOf(req request, rt *route, client netip.Addr) (string, bool) {
	hv, ok := l.keyValue(req)
	if !ok {
		return "", false
	}
	return l.key(hv, rt, client), true
}

// key returns whose limit a request counts against on rt: the route, or
// the value hv of its key header (see keyValue), or its client's address
// (see appendClient). A key is the route's name, alone or followed by
// "|ip|", "|h|" or "|H|" and the client's part: route names have no '|'
// (config validation), so no two routes' keys are ever one, whatever the
// client's part holds.
func (l *rateLimit) key(hv []byte, rt *route, client netip.Addr) string {
	if l.byRoute {
		return rt.name
	}
	var buf [128]byte
	b := append(buf[:0], rt.name...)
	switch {
	case l.header == "":
		b = append(b, "|ip|"...)
		b = l.appendClient(b, client)
	case len(hv) > maxKeyValue:
		sum := sha256.Sum256(hv)
		b = append(b, "|H|"...) // not "|h|": a digest is never read as a value
		b = append(b, sum[:]...)
	default:
		b = append(b, "|h|"...)
		b = append(b, hv...)
	}
	return string(b)
}

// appendClient appends the client address a as l keys it: an IPv4 address
// (IPv4-mapped ones included) whole, an IPv6 one by its first l.v6bits
// bits, as a prefix (whole when v6bits is 128, or 0: not set); never with
// a zone, which net/http's reader keeps and the others drop. An IPv6
// client is usually given a block of addresses (a /64 or more) and may
// send from any of them: keyed by each, it would take a fresh limit with
// every address.
func (l *rateLimit) appendClient(b []byte, a netip.Addr) []byte {
	if a = a.Unmap().WithZone(""); !a.Is6() || l.v6bits <= 0 || l.v6bits >= 128 {
		return a.AppendTo(b)
	}
	p, _ := a.Prefix(l.v6bits) // no error: 0 < v6bits < 128
	return p.AppendTo(b)
}
