package http1

import (
	"bytes"
	"errors"
	"iter"
	"net/http"
	"strings"
)

// SmallBody is the largest response body, in bytes, that is read whole:
// 64 KiB. The response then leaves in one write and its connection goes
// back to the pool at once. A larger body, or one of unknown length,
// streams, so that a slow client paces the upstream and memory stays flat.
const SmallBody = 64 << 10

// MaxInterim is how many interim (1xx) responses before a request's final
// response are skipped; one more fails the attempt.
const MaxInterim = 10

// BodyRead is how a response's body is read from the target, on every
// engine.
type BodyRead uint8

const (
	BodyNone   BodyRead = iota // none: the answer to a HEAD, a 204 or a 304
	BodyWhole                  // read whole: its Content-Length is at most SmallBody
	BodyStream                 // streamed: larger, chunked, or up to the connection's end
)

// ResponseBody decides how the body of a response with status code and
// Content-Length cl (negative when it has none) is read; head says that the
// request was a HEAD.
func ResponseBody(head bool, code, cl int) BodyRead {
	switch {
	case Bodiless(head, code):
		return BodyNone
	case cl >= 0 && cl <= SmallBody:
		return BodyWhole
	}
	return BodyStream
}

// Bodiless reports whether a response with status code has no body
// whatever its headers say: it answers a HEAD (head), or is a 204 or a 304
// (RFC 9110 sections 6.4.1, 15.3.5, 15.4.5).
func Bodiless(head bool, code int) bool {
	return head || code == http.StatusNoContent || code == http.StatusNotModified
}

// Interim reports whether a response head with status code, the n-th of
// its request (from 1), is an interim response to skip. It fails with
// ErrUnexpected101 for a 101 (only a request to upgrade may be answered so,
// and the gateway forwards none: Upgrade is hop-by-hop), with ErrBadStatus
// for a code outside 100 to 599, and with ErrTooManyInterim for more than
// MaxInterim interim responses.
func Interim(code, n int) (bool, error) {
	switch {
	case code == http.StatusSwitchingProtocols:
		return false, ErrUnexpected101
	case code < 100 || code > 599:
		return false, ErrBadStatus
	case code >= 200:
		return false, nil
	case n > MaxInterim:
		return false, ErrTooManyInterim
	}
	return true, nil
}

// ErrUnexpected101 is the error of a 101 (Switching Protocols) response to
// a request that asked for no upgrade. Its text is the gateway's, as the
// logs have it.
var ErrUnexpected101 = errors.New("gateway: unexpected 101 response")

// ErrBadStatus is the error of a response whose status code is outside
// 100 to 599, which RFC 9110 section 15 makes invalid (a client is to take
// it as a 5xx): a code below 100 ("099") is no status an HTTP/1.1 client
// can read, and HTTP/2 servers refuse to send one past 599, so the client
// gets the gateway's 502 on every protocol. Its text is the gateway's, as
// the logs have it.
var ErrBadStatus = errors.New("gateway: response status outside 100 to 599")

// ErrTooManyInterim is the error of a response preceded by more than
// MaxInterim interim responses. Its text is the gateway's, as the logs have
// it.
var ErrTooManyInterim = errors.New("gateway: too many interim responses")

// ErrFraming is the error of a response with both a Content-Length and a
// Transfer-Encoding: which of them frames the body is a guess (RFC 9112
// section 6.3 lets Transfer-Encoding win, and asks to close the connection
// after), and the mismatch is how responses are split, so the gateway
// refuses it, as nginx does. Its text is the gateway's, as the logs have
// it.
var ErrFraming = errors.New("gateway: response with both Content-Length and Transfer-Encoding")

// BothFramings reports whether the header section at the start of b (the
// whole of b when it does not end there) has both a Content-Length and a
// Transfer-Encoding field.
func BothFramings(b []byte) bool {
	cl, te := false, false
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) <= 1 { // "\r" or "": the end of the section
			break
		}
		switch line[0] | 0x20 {
		case 'c':
			cl = cl || hasName(line, "content-length")
		case 't':
			te = te || hasName(line, "transfer-encoding")
		}
	}
	return cl && te
}

// hasName reports whether line is a field named name (without its
// colon), in any case, with or without spaces or tabs before the colon:
// RFC 9112 section 5.1 has a proxy remove them from a response, as
// fasthttp reads it.
func hasName(line []byte, name string) bool {
	if len(line) < len(name) || !strings.EqualFold(string(line[:len(name)]), name) {
		return false
	}
	rest := bytes.TrimLeft(line[len(name):], " \t")
	return len(rest) > 0 && rest[0] == ':'
}

// ErrBadName is the error of a response with a field name that is not a
// token (RFC 9110 section 5.1), "X A" say, which fasthttp reads as a name
// (refusing the other characters): sent on, an HTTP/1.1 client reads one
// field, or none, or refuses the response, and HTTP/2 cannot carry it. Its
// text is the gateway's, as the logs have it.
var ErrBadName = errors.New("gateway: response field name is not a token")

// TokenNames reports whether every name of the fields all yields is a
// token.
func TokenNames(all iter.Seq2[[]byte, []byte]) bool {
	for k := range all {
		if !Token(k) {
			return false
		}
	}
	return true
}
