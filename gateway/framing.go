package gateway

import (
	"errors"
	"net/http"
)

// smallBody is the largest response body, in bytes, that is read whole:
// 64 KiB. The response then leaves in one write and its connection goes
// back to the pool at once. A larger body, or one of unknown length,
// streams, so that a slow client paces the upstream and memory stays flat.
const smallBody = 64 << 10

// maxInterim is how many interim (1xx) responses before a request's final
// response are skipped; one more fails the attempt.
const maxInterim = 10

// bodyRead is how a response's body is read from the target, on every
// engine.
type bodyRead uint8

const (
	bodyNone   bodyRead = iota // none: the answer to a HEAD, a 204 or a 304
	bodyWhole                  // read whole: its Content-Length is at most smallBody
	bodyStream                 // streamed: larger, chunked, or up to the connection's end
)

// responseBody decides how the body of a response with status code and
// Content-Length cl (negative when it has none) is read; head says that the
// request was a HEAD.
func responseBody(head bool, code, cl int) bodyRead {
	switch {
	case bodiless(head, code):
		return bodyNone
	case cl >= 0 && cl <= smallBody:
		return bodyWhole
	}
	return bodyStream
}

// bodiless reports whether a response with status code has no body
// whatever its headers say: it answers a HEAD (head), or is a 204 or a 304
// (RFC 9110 sections 6.4.1, 15.3.5, 15.4.5).
func bodiless(head bool, code int) bool {
	return head || code == http.StatusNoContent || code == http.StatusNotModified
}

// interim reports whether a response head with status code, the n-th of
// its request (from 1), is an interim response to skip. It fails for a 101
// (only a request to upgrade may be answered so, and the gateway forwards
// none: Upgrade is hop-by-hop) and for more than maxInterim interim
// responses.
func interim(code, n int) (bool, error) {
	switch {
	case code == http.StatusSwitchingProtocols:
		return false, errUnexpected101
	case code < 100 || code >= 200:
		return false, nil
	case n > maxInterim:
		return false, errTooManyInterim
	}
	return true, nil
}

// errUnexpected101 is the error of a 101 (Switching Protocols) response to
// a request that asked for no upgrade.
var errUnexpected101 = errors.New("gateway: unexpected 101 response")

// errTooManyInterim is the error of a response preceded by more than
// maxInterim interim responses.
var errTooManyInterim = errors.New("gateway: too many interim responses")
