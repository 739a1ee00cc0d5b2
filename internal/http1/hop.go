package http1

// HopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1, which a
// proxy must not forward.
var HopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// IsHop reports whether header k is hop-by-hop: one of HopHeaders, or one
// the Connection header's value connection names. Content-Length and Host
// are never hop-by-hop, whatever Connection names (RFC 9110 section 7.6.1
// lets a sender name only hop-by-hop fields there): dropping a message's
// Content-Length but forwarding its body would let the next hop read the
// body as a message of its own.
func IsHop(k, connection []byte) bool {
	switch len(k) {
	case 2, 7, 10, 16, 17, 18, 19: // the lengths of the names in HopHeaders
		for _, h := range HopHeaders {
			if EqualName(k, h) {
				return true
			}
		}
	}
	return len(connection) > 0 && HasToken(connection, string(k)) &&
		!EqualName(k, "Content-Length") && !EqualName(k, "Host")
}
