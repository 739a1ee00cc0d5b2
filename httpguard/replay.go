package httpguard

import (
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
)

// Idempotent reports whether r may be sent more than once, as the gateway
// decides it: its method is idempotent (GET, HEAD, OPTIONS, PUT, DELETE,
// TRACE; RFC 9110, section 9.2.2), or it carries an Idempotency-Key header,
// which asks the server to apply it at most once. As in net/http, a key
// present with no value (a nil or empty slice in r.Header) counts, so that
// a request can be marked without sending the header.
func Idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	_, ok := r.Header["Idempotency-Key"]
	return ok
}

// NotRetryable reports whether r is the result of an attempt that
// Transport or Middleware will not run again: a request that reached the
// upstream and may not be sent twice (see Idempotent), a request whose body
// cannot be replayed, a handler that already ran, or an attempt refused
// with ErrNotReplayable. Use it as retry.Options.AbortIf (and
// hedge.Options.Final) in the guard of a Transport or a Middleware, so that
// such a call returns at once instead of waiting a backoff for an attempt
// that would be refused.
func NotRetryable(r sluice.Result) bool {
	var fe *finalError
	return errors.As(r.Err, &fe) || errors.Is(r.Err, ErrNotReplayable)
}

// RetryIf is a retry.Options.RetryIf for the guard of a Transport that
// retries what the gateway retries by default (retry.on: connect_error,
// 502, 503, 504): an attempt that could not connect, a response of 502,
// 503 or 504, and a rejection by a policy inside the retry that says when
// to come back (as retry.DefaultRetryIf). It never retries an attempt that
// NotRetryable matches, nor another failure: a 500 (a bug is not
// transient), a timeout, a connection broken after the request went out.
func RetryIf(r sluice.Result) bool {
	switch {
	case r.Class == sluice.Ignored, r.Err == nil, NotRetryable(r):
		return false
	case r.Class == sluice.Dropped:
		_, ok := sluice.RetryAfter(r.Err)
		return ok
	}
	var se *StatusError
	if errors.As(r.Err, &se) {
		switch se.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return neverSent(r.Err)
}

// finalError marks the error of an attempt that may not be made again
// (see NotRetryable). It reads as the error it wraps.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }
func (e *finalError) Unwrap() error { return e.err }

// final returns err marked final; nil stays nil.
func final(err error) error {
	if err == nil {
		return nil
	}
	return &finalError{err}
}

// neverSent reports whether a round trip that failed with err cannot have
// sent any of its request: no connection could be made.
func neverSent(err error) bool {
	_, reason := answer.Classify(err)
	return reason == answer.UpstreamUnreachable
}
