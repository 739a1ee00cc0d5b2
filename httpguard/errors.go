package httpguard

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/answer"
)

// StatusClientClosedRequest is the status StatusFor gives an error caused by
// the client cancelling its request: 499, nginx's "client closed request".
// The client never sees it; it is meant for logs and metrics.
const StatusClientClosedRequest = answer.StatusClientClosedRequest

// ErrNotReplayable is matched (errors.Is) by the error of an attempt that
// could not run because the request cannot be sent again: Middleware's
// handler already ran, or Transport's request body was too large to buffer
// or its GetBody failed. Such an attempt is Dropped; in Transport the error
// also wraps the previous attempt's error, and the attempt's Result carries
// the previous response, so that the caller still gets that response.
var ErrNotReplayable = errors.New("httpguard: request cannot be replayed")

// notReplayableError is ErrNotReplayable with why (cause, may be nil),
// wrapping the previous attempt's error (prev, may be nil).
type notReplayableError struct{ cause, prev error }

func (e *notReplayableError) Error() string {
	s := ErrNotReplayable.Error()
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	if e.prev != nil {
		s += "; previous attempt: " + e.prev.Error()
	}
	return s
}

func (e *notReplayableError) Is(target error) bool { return target == ErrNotReplayable }

func (e *notReplayableError) Unwrap() []error {
	errs := make([]error, 0, 2)
	for _, err := range []error{e.cause, e.prev} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// StatusError is the error of a call whose response status counts as a
// failure (Options.IsFailure). Breakers count it and retry policies may retry
// it; Transport still hands the response itself to its caller when the guard
// settles on it (StatusError.Response; nil for Middleware, whose handler
// already wrote it). The gateway's attempts fail with the same type.
type StatusError = answer.StatusError

// newStatusError builds the StatusError of a response with status code and
// header h that arrived at now.
func newStatusError(resp *http.Response, code int, h http.Header, now time.Time) *StatusError {
	e := &StatusError{Response: resp, StatusCode: code}
	if v := h.Get("Retry-After"); v != "" {
		e.RetryAfter, _ = ParseRetryAfter(v, now)
	}
	return e
}

// StatusFor returns the HTTP status that answers a request the guard stopped
// with err, as the gateway answers it (see answer.Classify): 429 for a rate
// limit; 503 for an open breaker, overload and every other rejection; 504
// for a timeout; StatusClientClosedRequest when the client cancelled; 502
// when the upstream could not be reached or broke the connection; a
// *StatusError's own status; 200 for nil and 500 for anything else.
func StatusFor(err error) int {
	code, _ := answer.Classify(err)
	return code
}

// ReasonFor returns the short snake_case name of err's kind that WriteError
// puts in its JSON body: "rate_limited", "circuit_open", "overloaded" (or
// another rejection's Reason), "rejected", "timeout",
// "client_closed_request", "upstream_unreachable", "upstream_error",
// "upstream_status", "internal_error"; "" for nil.
func ReasonFor(err error) string {
	_, reason := answer.Classify(err)
	return reason
}

// WriteError answers a request the guard stopped with err: the status is
// StatusFor(err); Retry-After is set (whole seconds, see FormatRetryAfter)
// when err carries a hint (sluice.RetryAfter); rate-limit headers are set
// when err's chain holds a HeaderSetter or a RateLimitReporter; the body is
// a small JSON object such as {"error":"rate_limited","retry_after":2}.
//
// Call it before anything was written to w. A nil err writes nothing.
func WriteError(w http.ResponseWriter, err error) {
	if err == nil {
		return
	}
	code, reason := answer.Classify(err)
	h := w.Header()
	setHeadersFrom(h, err)
	var secs int64
	if d, ok := answer.RetryAfter(err); ok {
		secs = answer.RetryAfterSeconds(d)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	b := answer.AppendJSON(make([]byte, 0, 64), reason, secs)
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b) // the client may be gone; nothing to do about it
}

// FormatRetryAfter formats d as a Retry-After value: whole seconds, rounded
// up, at least 1 ("1", "2", ...). A d of zero or less gives "1".
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatInt(answer.RetryAfterSeconds(d), 10)
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110, section
// 10.2.3): delay-seconds ("120") or an HTTP-date, which is taken relative to
// now. It reports false when v is neither. A date in the past gives zero;
// delays too large for a Duration are clamped.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	return answer.ParseRetryAfter(v, now)
}
