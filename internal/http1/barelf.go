package http1

// BareLF reports whether b, the start of a request head (whole or not),
// has a line that ends in LF alone, the empty lines before its request
// line aside (RFC 9112 section 2.2 has a server ignore one): the gateway
// refuses such a head (400), and can say so before the head ends, where a
// parser that waits for the CRLF CRLF that ends a head would wait for the
// header timeout.
func BareLF(b []byte) bool {
	i := 0
	for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
		i++
	}
	for ; i < len(b); i++ {
		if b[i] == '\n' && b[i-1] != '\r' {
			return true
		}
	}
	return false
}
