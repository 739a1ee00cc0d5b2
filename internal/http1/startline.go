package http1

import (
	"bytes"
	"strconv"
)

// PlainRequestLine splits the request line off b, a request head: its
// method, its target and the target's path (the target without its query),
// and the lines after it. It reports false unless the line is in plain
// form: a method of upper-case letters that RefusedMethod lets pass, an
// origin-form target whose path PlainPath accepts and whose query
// PlainQuery and PercentEncoded accept (as RefusedHead wants every '%'
// in a target), and the version HTTP/1.1, ending in CRLF.
func PlainRequestLine(b []byte) (method, target, path, rest []byte, ok bool) {
	i := bytes.IndexByte(b, ' ')
	if i <= 0 || !UpperToken(b[:i]) || RefusedMethod(b[:i]) != 0 {
		return nil, nil, nil, nil, false
	}
	method, b = b[:i], b[i+1:]
	if i = bytes.IndexByte(b, ' '); i <= 0 {
		return nil, nil, nil, nil, false
	}
	target, b = b[:i], b[i+1:]
	path = target
	if q := bytes.IndexByte(target, '?'); q >= 0 {
		path = target[:q]
		if query := target[q+1:]; !PlainQuery(query) || !PercentEncoded(query) {
			return nil, nil, nil, nil, false
		}
	}
	if !PlainPath(path) || !bytes.HasPrefix(b, http11CRLF) {
		return nil, nil, nil, nil, false
	}
	return method, target, path, b[len(http11CRLF):], true
}

// PlainStatusLine splits the status line off b, a response head: the line
// without its CRLF, its status code, and the lines after it. It reports
// false unless the line is in plain form: the version HTTP/1.1, a final
// status (200 to 599) of three digits, and a reason phrase after a space or
// none, without a CR, ending in CRLF.
func PlainStatusLine(b []byte) (status []byte, code int, rest []byte, ok bool) {
	end := bytes.IndexByte(b, '\n')
	if end < 13 || b[end-1] != '\r' || !bytes.HasPrefix(b, http11) || b[8] != ' ' ||
		(end > 13 && b[12] != ' ') || bytes.IndexByte(b[:end-1], '\r') >= 0 {
		return nil, 0, nil, false
	}
	code, err := strconv.Atoi(string(b[9:12]))
	if err != nil || code < 200 || code > 599 {
		return nil, 0, nil, false
	}
	return b[:end-1], code, b[end+1:], true
}

var http11, http11CRLF = []byte("HTTP/1.1"), []byte("HTTP/1.1\r\n")
