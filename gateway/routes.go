package gateway

import (
	"bytes"
	"net"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
)

// matcher decides whether a route serves a request.
type matcher struct {
	host    []byte   // exact host, lower case, without port or trailing dot; nil = any
	prefix  []byte   // path prefix; "/" matches all
	methods [][]byte // nil = any
	headers []headerMatch
}

// headerMatch is a header a route's requests must have with one value.
type headerMatch struct {
	names []string // the names it is read under (http1.CGINames)
	value string
	list  bool // a comma in its value makes a list (see http1.OneValue)
}

func newMatcher(m config.Match) matcher {
	mt := matcher{prefix: []byte(m.PathPrefix)}
	if m.Host != "" {
		mt.host = []byte(strings.ToLower(strings.TrimSuffix(m.Host, ".")))
	}
	for _, meth := range m.Methods {
		mt.methods = append(mt.methods, []byte(meth))
	}
	for k, v := range m.Headers {
		mt.headers = append(mt.headers, headerMatch{http1.CGINames(k), v, !http1.OneValue([]byte(k))})
	}
	return mt
}

// request is what routing and rate-limit keys read of a request: one that
// fasthttp parsed (fastRequest), or a head an event loop read (http1.Request).
type request interface {
	// Path is the path as the upstream will understand it (percent-decoded,
	// dot segments resolved, slashes merged): matching the raw path would
	// let "/%65xpensive" or "/x/../expensive" slip past the /expensive
	// route's policies to an upstream that reads them as /expensive.
	Path() []byte
	Method() []byte
	Host() []byte
	// Peek returns the value of header name (any case), nil when absent.
	Peek(name string) []byte
	// PeekAt returns the value of the i-th header name (any case; 0 is
	// Peek's), nil when there are not that many.
	PeekAt(name string, i int) []byte
}

// fastRequest is a request fasthttp parsed.
type fastRequest struct{ r *fasthttp.Request }

func (f fastRequest) Path() []byte            { return f.r.URI().Path() }
func (f fastRequest) Method() []byte          { return f.r.Header.Method() }
func (f fastRequest) Host() []byte            { return f.r.Header.Host() }
func (f fastRequest) Peek(name string) []byte { return f.r.Header.Peek(name) }

func (f fastRequest) PeekAt(name string, i int) []byte {
	if vs := f.r.Header.PeekAll(name); i < len(vs) {
		return vs[i]
	}
	return nil
}

// matches reports whether req is one of the route's. A header the route
// matches by is read as a rate limit's key header is (see fieldValue): a
// request that sends it on more than one line, or with a comma in its
// value (the same list on one line) when the header may be a list (see
// http1.OneValue), is ambiguous, and reported so (with false), for it to
// be refused rather than routed by a guess: a client could otherwise be
// sent through one route's policies while the upstream reads it as
// another's request.
func (m *matcher) matches(req request) (ok, ambiguous bool) {
	if !bytes.HasPrefix(req.Path(), m.prefix) {
		return false, false
	}
	if m.methods != nil {
		meth := req.Method()
		found := false
		for _, want := range m.methods {
			if bytes.Equal(meth, want) {
				found = true
				break
			}
		}
		if !found {
			return false, false
		}
	}
	if m.host != nil && !bytes.EqualFold(bytes.TrimSuffix(stripPort(req.Host()), dot), m.host) {
		return false, false
	}
	for _, h := range m.headers {
		v, n := fieldValue(req, h.names)
		if n > 1 || h.list && bytes.IndexByte(v, ',') >= 0 {
			return false, true
		}
		if string(v) != h.value {
			return false, false
		}
	}
	return true, false
}

// paramless is a request read with another path: as another server reads
// its path (see otherReadings).
type paramless struct {
	request
	path []byte
}

func (p paramless) Path() []byte { return p.path }

// otherReadings are the ways upstreams read a path otherwise than the
// gateway routes it, each with what a path has for it to be read so (see
// pathMarks).
var otherReadings = [...]struct {
	marks int
	read  func(path []byte) []byte
}{{hasParams, withoutParams}, {hasBackslash, withSlashes}, {hasParams | hasBackslash, withoutParamsThenSlashes}}

// The bytes that have a path read otherwise (see pathMarks).
const (
	hasParams    = 1 << iota // a ';'
	hasBackslash             // a '\'
)

// pathMarks returns the marks of the bytes path has that other servers
// read otherwise than the gateway does (see otherReadings).
func pathMarks(path []byte) int {
	m := 0
	if bytes.IndexByte(path, ';') >= 0 {
		m |= hasParams
	}
	if bytes.IndexByte(path, '\\') >= 0 {
		m |= hasBackslash
	}
	return m
}

// withoutParams returns path with each segment's parameters (from a ';'
// to the segment's end) removed, as servlet containers read a path
// (Tomcat serves /admin;x/users as /admin/users), and then normalized as
// they normalize it: empty and "." segments dropped, ".." removing the
// segment before it (/x/..;/admin and /;x/admin are /admin there).
func withoutParams(path []byte) []byte { return resolve(path, true) }

// withSlashes returns path (decoded: %5C is a '\' there) with each '\'
// a '/', as servers of Windows' lineage read a path (IIS serves
// /pub\..\admin as /admin), then normalized as withoutParams normalizes
// it, segment parameters kept.
func withSlashes(path []byte) []byte {
	return resolve(bytes.ReplaceAll(path, []byte{'\\'}, slash), false)
}

// withoutParamsThenSlashes returns path as a servlet container that reads
// backslashes as slashes (Tomcat with allowBackslash) reads it: segment
// parameters removed first, each from its ';' to the next '/' (a '\\' in
// them is theirs), then each '\\' a '/' and the path normalized
// (/admin\x;\..\..\free/users is /admin/x/users there, and
// /admin\x/users or /free/users read either way alone).
func withoutParamsThenSlashes(path []byte) []byte {
	out := make([]byte, 0, len(path))
	for {
		i := bytes.IndexByte(path, ';')
		if i < 0 {
			return withSlashes(append(out, path...))
		}
		out, path = append(out, path[:i]...), path[i:]
		if j := bytes.IndexByte(path, '/'); j >= 0 {
			path = path[j:]
		} else {
			path = nil
		}
	}
}

// resolve returns path normalized: empty and "." segments dropped, ".."
// removing the segment before it, and each segment's parameters removed
// first when params.
func resolve(path []byte, params bool) []byte {
	out := make([]byte, 0, len(path))
	dir := false // the last segment names a directory: the path ends in '/'
	for len(path) > 0 {
		if path[0] == '/' {
			path = path[1:]
		}
		seg := path
		if j := bytes.IndexByte(path, '/'); j >= 0 {
			seg, path = path[:j], path[j:]
		} else {
			path = nil
		}
		if i := bytes.IndexByte(seg, ';'); params && i >= 0 {
			seg = seg[:i]
		}
		switch string(seg) {
		case "", ".":
			dir = true
		case "..":
			out, dir = out[:max(bytes.LastIndexByte(out, '/'), 0)], true
		default:
			out, dir = append(append(out, '/'), seg...), false
		}
	}
	if dir || len(out) == 0 {
		out = append(out, '/')
	}
	return out
}

// dot ends a fully qualified host name: "api.example." is "api.example"
// to a name server, and to an upstream that routes by host (nginx drops
// it), so the route matched by one matches the other.
var dot = []byte(".")

func stripPort(host []byte) []byte {
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && !bytes.Contains(host[i:], []byte("]")) {
		return host[:i]
	}
	return host
}

// trustedProxies says whose X-Forwarded-For is believed.
type trustedProxies []netip.Prefix

func parseTrusted(cidrs []string) trustedProxies {
	var t trustedProxies
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			t = append(t, p.Masked())
		} else if a, err := netip.ParseAddr(c); err == nil {
			t = append(t, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return t
}

func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the address of the connection's other end.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr { return netAddr(ctx.RemoteAddr()) }

// netAddr is a TCP address's IP address; the zero Addr for another kind.
func netAddr(a net.Addr) netip.Addr {
	if tcp, ok := a.(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(tcp.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// clientIP is the client's address: the peer's, or, when the peer is a
// trusted proxy, the right-most address in xff (the request's
// X-Forwarded-For) that is not itself a trusted proxy (the left-most
// entries can be forged by the client). An entry may carry a port (see
// http1.ForwardedAddr), which is not part of the address; an entry that
// is no address ends the walk at the trusted proxy that wrote it, whose
// address is then the client's: a client never chooses its key by
// writing junk.
func clientIP(peer netip.Addr, xff []byte, trusted trustedProxies) netip.Addr {
	if len(trusted) == 0 || !trusted.contains(peer) {
		return peer
	}
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		part := xff[i+1:]
		xff = xff[:max(i, 0)]
		a, ok := http1.ForwardedAddr(part)
		if !ok {
			return peer
		}
		if !trusted.contains(a) {
			return a
		}
		peer = a
		if i < 0 {
			break
		}
	}
	return peer
}
