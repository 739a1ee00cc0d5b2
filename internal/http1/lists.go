package http1

// OneValue reports whether a comma in the value of the request header
// name is part of one value rather than a separator of a list (RFC 9110
// section 5.6.1), so that the whole value names one thing. It is true for
// the singleton fields whose syntax holds commas: credentials
// (Authorization, Proxy-Authorization: a scheme's parameters are
// comma-separated, as Digest's), Cookie (one line of "; "-separated pairs,
// RFC 6265 section 5.4), the dates (Date, If-Modified-Since,
// If-Unmodified-Since: an HTTP-date holds a comma) and the fields whose
// comments or URIs may (User-Agent, Referer). Any other name, the fields
// an application defines among them, may be a list: a framework that
// joins a field's lines with commas may split them again and read any
// element. The name is read as CGIName reads it.
func OneValue(name []byte) bool {
	for _, n := range oneValueFields {
		if CGIName(name, n) {
			return true
		}
	}
	return false
}

var oneValueFields = []string{"Authorization", "Proxy-Authorization", "Cookie", "Date", "If-Modified-Since",
	"If-Unmodified-Since", "User-Agent", "Referer"}
