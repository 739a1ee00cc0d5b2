package httpguard

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/invalid"
)

// DefaultIPv6Prefix is how many leading bits of a client's IPv6 address
// ByClientIP keys the client by: its /64, the block a site or a device is
// usually given, as the gateway's rate_limit.ipv6_prefix by default.
const DefaultIPv6Prefix = 64

// ByClientIP returns a Key function that keys requests by their client's
// IP address (see ClientIP), so that each client has its own rate limit,
// as the gateway's `key: ip` does: an IPv4 client by its address
// ("192.0.2.1"), an IPv6 one by its /64 (DefaultIPv6Prefix:
// "2001:db8:1:2::/64"), never with a zone. A client given a block of IPv6
// addresses may send from any of them: keyed by each, it would take a
// fresh limit with every address. A request whose peer address cannot be
// read gets the key "". ByClientIPPrefix keys by another prefix.
func ByClientIP(trustedProxies ...netip.Prefix) func(*http.Request) string {
	return clientIPKey(DefaultIPv6Prefix, masked(trustedProxies))
}

// ByClientIPPrefix is ByClientIP keying an IPv6 client by its first
// ipv6Bits bits, from 32 to 128 (128: by its address), as the gateway's
// rate_limit.ipv6_prefix does. Another ipv6Bits is reported with an error
// that matches sluice.ErrInvalidOptions.
func ByClientIPPrefix(ipv6Bits int, trustedProxies ...netip.Prefix) (func(*http.Request) string, error) {
	if ipv6Bits < 32 || ipv6Bits > 128 {
		p := invalid.Problems{Prefix: "httpguard.ByClientIPPrefix"}
		p.Addf("ipv6Bits %d is not from 32 to 128", ipv6Bits)
		return nil, p.Err()
	}
	return clientIPKey(ipv6Bits, masked(trustedProxies)), nil
}

func clientIPKey(ipv6Bits int, trusted []netip.Prefix) func(*http.Request) string {
	return func(r *http.Request) string {
		a := clientIP(r, trusted).WithZone("")
		switch {
		case !a.IsValid():
			return ""
		case a.Is6() && ipv6Bits < 128:
			p, _ := a.Prefix(ipv6Bits) // no error: 32 <= ipv6Bits < 128
			return p.String()
		}
		return a.String()
	}
}

// ClientIP returns the address of the client that sent r, as the gateway
// reads it: the peer's address (r.RemoteAddr), or, when the peer is one of
// trustedProxies, the right-most address of the X-Forwarded-For list (all
// its header lines read as one list) that is not itself a trusted proxy.
// The entries to the left of it can be forged by the client and are never
// read. An entry may carry the port some proxies write ("192.0.2.1:4711",
// "[2001:db8::1]:4711"), which is not part of the address; an entry that
// is not an address ("unknown") ends the walk at the trusted proxy that
// added it, whose address is then the client's. With no trustedProxies, X-Forwarded-For is ignored. IPv4
// addresses mapped into IPv6 are unmapped. It returns the zero Addr when
// r.RemoteAddr is not an IP address.
func ClientIP(r *http.Request, trustedProxies []netip.Prefix) netip.Addr {
	return clientIP(r, masked(trustedProxies))
}

func clientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := remoteAddr(r.RemoteAddr)
	if !peer.IsValid() || !contains(trusted, peer) {
		return peer
	}
	xff := strings.Join(r.Header.Values("X-Forwarded-For"), ",")
	for xff != "" {
		i := strings.LastIndexByte(xff, ',')
		part := xff[i+1:]
		xff = xff[:max(i, 0)]
		a, ok := http1.ForwardedAddr([]byte(part))
		if !ok {
			return peer
		}
		if !contains(trusted, a) {
			return a
		}
		peer = a
	}
	return peer
}

// remoteAddr parses an http.Request's RemoteAddr ("ip:port", or an address
// alone); the zero Addr when it is neither.
func remoteAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// masked returns the prefixes masked, with IPv4-mapped ones unmapped, so
// that Contains compares like with like.
func masked(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out
}

func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ByHeader returns a Key function that keys requests by the value of the
// header name (an API key, a tenant), as the gateway's `key: header:NAME`
// does. Requests without it share the key "". A client can send any value:
// key by a header only behind something that checks it.
func ByHeader(name string) func(*http.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// ByPattern is a Key function that keys requests by the http.ServeMux
// pattern that matched them (http.Request.Pattern, such as
// "GET /items/{id}"), so that each route of a mux has its own rate limit
// with one limiter. The pattern is known only once the mux routed the
// request: wrap the handlers the mux routes to, not the mux. A request
// that no pattern matched gets the key "".
func ByPattern(r *http.Request) string { return r.Pattern }
