package gateway

import (
	"bytes"
	"net"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// matcher decides whether a route serves a request.
type matcher struct {
	host    []byte   // exact host without port; nil = any
	prefix  []byte   // path prefix; "/" matches all
	methods [][]byte // nil = any
	headers [][2]string
}

func newMatcher(m config.Match) matcher {
	mt := matcher{prefix: []byte(m.PathPrefix)}
	if m.Host != "" {
		mt.host = []byte(strings.ToLower(m.Host))
	}
	for _, meth := range m.Methods {
		mt.methods = append(mt.methods, []byte(meth))
	}
	for k, v := range m.Headers {
		mt.headers = append(mt.headers, [2]string{k, v})
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

func (m *matcher) matches(req request) bool {
	if !bytes.HasPrefix(req.Path(), m.prefix) {
		return false
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
			return false
		}
	}
	if m.host != nil && !bytes.EqualFold(stripPort(req.Host()), m.host) {
		return false
	}
	for _, h := range m.headers {
		if string(req.Peek(h[0])) != h[1] {
			return false
		}
	}
	return true
}

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
// entries can be forged by the client).
func clientIP(peer netip.Addr, xff []byte, trusted trustedProxies) netip.Addr {
	if len(trusted) == 0 || !trusted.contains(peer) {
		return peer
	}
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		part := bytes.TrimSpace(xff[i+1:])
		xff = xff[:max(i, 0)]
		a, err := netip.ParseAddr(string(part))
		if err != nil {
			return peer
		}
		a = a.Unmap()
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
