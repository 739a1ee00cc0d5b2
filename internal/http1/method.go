package http1

// Idempotent reports whether a request with this method may be sent twice
// (RFC 9110 section 9.2.2): GET, HEAD, OPTIONS, PUT, DELETE and TRACE.
func Idempotent(method []byte) bool {
	switch string(method) {
	case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE":
		return true
	}
	return false
}
