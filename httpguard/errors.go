package httpguard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
)

// StatusClientClosedRequest is the status StatusFor gives an error caused by
// the client cancelling its request: 499, nginx's "client closed request".
// The client never sees it; it is meant for logs and metrics.
const StatusClientClosedRequest = 499

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
// settles on it.
//
// StatusError implements sluice.RetryAfterHint with RetryAfter.
type StatusError struct {
	// Response is the response, for Transport; nil for Middleware, whose
	// handler already wrote it. Its body belongs to whoever the guard hands
	// the result to.
	Response *http.Response
	// StatusCode is the response's status code.
	StatusCode int
	// RetryAfter is the response's Retry-After header (delay-seconds or an
	// HTTP-date) as a delay from when the response arrived; zero when the
	// header is absent, invalid or in the past.
	RetryAfter time.Duration
}

// Error describes the status, for example
// "httpguard: status 503 Service Unavailable (retry after 2s)".
func (e *StatusError) Error() string {
	s := "httpguard: status " + strconv.Itoa(e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		s += " " + t
	}
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	return s
}

// RetryAfterHint returns e.RetryAfter.
func (e *StatusError) RetryAfterHint() time.Duration { return e.RetryAfter }

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
// with err:
//
//   - a rejection (errors.Is(err, sluice.ErrRejected)): 429 for
//     sluice.RateLimited, 503 for sluice.CircuitOpen, sluice.Overloaded and
//     any other reason;
//   - a timeout (sluice.ErrTimeout, context.DeadlineExceeded, a net.Error
//     whose Timeout is true): 504;
//   - the client cancelled (context.Canceled): StatusClientClosedRequest;
//   - the upstream could not be reached or broke the connection (a
//     *net.OpError, a *net.DNSError, ECONNREFUSED, ECONNRESET, an EOF or unexpected
//     EOF): 502;
//   - a *StatusError: its StatusCode;
//   - nil: 200; anything else: 500.
//
// Wrapped errors are unwrapped (errors.Is / errors.As).
func StatusFor(err error) int {
	code, _ := classify(err)
	return code
}

// ReasonFor returns the short snake_case name of err's kind that WriteError
// puts in its JSON body: "rate_limited", "circuit_open", "overloaded" (or
// another rejection's Reason), "rejected", "timeout",
// "client_closed_request", "upstream_unreachable", "upstream_error",
// "upstream_status", "internal_error"; "" for nil.
func ReasonFor(err error) string {
	_, reason := classify(err)
	return reason
}

func classify(err error) (int, string) {
	if err == nil {
		return http.StatusOK, ""
	}
	var rej *sluice.Rejection
	if errors.As(err, &rej) {
		switch rej.Reason {
		case sluice.RateLimited:
			return http.StatusTooManyRequests, string(rej.Reason)
		case "":
			return http.StatusServiceUnavailable, "rejected"
		}
		return http.StatusServiceUnavailable, string(rej.Reason)
	}
	if errors.Is(err, sluice.ErrRejected) {
		return http.StatusServiceUnavailable, "rejected"
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode, "upstream_status"
	}
	if errors.Is(err, sluice.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "timeout"
	}
	if errors.Is(err, context.Canceled) {
		return StatusClientClosedRequest, "client_closed_request"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return http.StatusGatewayTimeout, "timeout"
	}
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &dns), errors.Is(err, syscall.ECONNREFUSED):
		return http.StatusBadGateway, "upstream_unreachable"
	case op != nil, errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadGateway, "upstream_error"
	}
	return http.StatusInternalServerError, "internal_error"
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
	code, reason := classify(err)
	h := w.Header()
	setHeadersFrom(h, err)
	var secs int64
	if d, ok := sluice.RetryAfter(err); ok {
		secs = retryAfterSeconds(d)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	b := appendErrorJSON(make([]byte, 0, 64), reason, secs)
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b) // the client may be gone; nothing to do about it
}

// appendErrorJSON appends WriteError's body to b: {"error":reason} with
// "retry_after":secs when secs > 0, and a newline.
func appendErrorJSON(b []byte, reason string, secs int64) []byte {
	b = append(b, `{"error":`...)
	if isPlainJSON(reason) {
		b = append(append(append(b, '"'), reason...), '"')
	} else {
		q, _ := json.Marshal(reason) // a string always marshals
		b = append(b, q...)
	}
	if secs > 0 {
		b = strconv.AppendInt(append(b, `,"retry_after":`...), secs, 10)
	}
	return append(b, "}\n"...)
}

// isPlainJSON reports whether s can be put between quotes in JSON as it is.
func isPlainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// FormatRetryAfter formats d as a Retry-After value: whole seconds, rounded
// up, at least 1 ("1", "2", ...). A d of zero or less gives "1".
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatInt(retryAfterSeconds(d), 10)
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(ceilSeconds(d), 1)
}

// ceilSeconds is d in whole seconds, rounded up; zero for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// maxRetryAfterSeconds is the largest delay-seconds a Duration can hold.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses a Retry-After header value (RFC 9110, section
// 10.2.3): delay-seconds ("120") or an HTTP-date, which is taken relative to
// now. It reports false when v is neither. A date in the past gives zero;
// delays too large for a Duration are clamped.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds { // only overflow is possible
			n = maxRetryAfterSeconds
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
