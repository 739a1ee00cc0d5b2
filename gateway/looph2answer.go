//go:build linux

package gateway

import (
	"bytes"
	"net/http"

	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/internal/http1"
)

// maxKeptStrings bounds how many header names, and last values, an h2c
// connection on a loop keeps for its answers.
const maxKeptStrings = 64

// answerFields reads b, an HTTP/1.1 response the loops wrote, into
// h.fields: its header fields with lower-case names, but the hop-by-hop
// ones (RFC 9113 section 8.2.2) and the Content-Length of a 204 or a 304,
// as net/http's HTTP/2 server leaves it out (a client of Go's reads such
// an answer, without DATA, as cut short); and returns its status code and
// body. It reports false when b is not a response in plain form.
func (h *loopH2) answerFields(b []byte) (code int, body []byte, ok bool) {
	hlen := bytes.Index(b, crlf2) + 4
	if hlen < 4 {
		return 0, nil, false
	}
	_, code, lines, ok := http1.PlainStatusLine(b[:hlen])
	if !ok {
		return 0, nil, false
	}
	h.fields = h.fields[:0]
	bodiless := code == http.StatusNoContent || code == http.StatusNotModified
	ok = http1.Headers(lines, func(name, value []byte) bool {
		if !http1.IsHop(name, nil) && !(bodiless && http1.EqualName(name, "Content-Length")) {
			n := h.name(name)
			h.fields = append(h.fields, hpack.HeaderField{Name: n, Value: h.value(n, value)})
		}
		return true
	})
	return code, b[hlen:], ok
}

// name returns name in lower case, as a string kept for the next answers
// while there are few.
func (h *loopH2) name(name []byte) string {
	h.lower = append(h.lower[:0], name...)
	for i, c := range h.lower {
		if 'A' <= c && c <= 'Z' {
			h.lower[i] = c + 'a' - 'A'
		}
	}
	if s, ok := h.names[string(h.lower)]; ok {
		return s
	}
	s := string(h.lower)
	if len(h.names) < maxKeptStrings {
		h.names[s] = s
	}
	return s
}

// value returns v as a string: the one of the last answer when name had
// the same value then.
func (h *loopH2) value(name string, v []byte) string {
	if s, ok := h.values[name]; ok && s == string(v) {
		return s
	}
	s := string(v)
	if _, ok := h.values[name]; ok || len(h.values) < maxKeptStrings {
		h.values[name] = s
	}
	return s
}
