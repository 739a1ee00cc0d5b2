package gateway

import (
	"crypto/tls"
	"errors"
	"io"
)

// plainHTTPAnswer is the answer to a plaintext HTTP request sent to the
// TLS listener (net/http's own).
const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

// answerPlainHTTP answers a client whose handshake failed with err, when
// its first record looked like an HTTP request, not TLS, with a 400, as
// net/http's and nginx's TLS listeners do: it writes within the
// handshake's deadline, and the caller closes the connection.
func answerPlainHTTP(err error) {
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		_, _ = io.WriteString(re.Conn, plainHTTPAnswer)
	}
}

// looksLikeHTTP reports whether h, a TLS record's header as read, is the
// start of an HTTP request of a common method (as net/http judges it).
func looksLikeHTTP(h [5]byte) bool {
	switch string(h[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
