// Package answer is the vocabulary sluice answers in, shared by the
// gateway, httpguard and grpcguard so that all answer the same error
// alike: the HTTP status and reason of every rejection and failure, the
// JSON error body, Retry-After read and written, and the RateLimit
// headers; and for gRPC, the status code of every rejection and failure
// and which codes count as failures (grpc.go).
package answer

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

// StatusClientClosedRequest is the status of a request its client
// cancelled: 499, nginx's "client closed request". The client never sees
// it; it is meant for logs and metrics.
const StatusClientClosedRequest = 499

// The reasons an answer names in its JSON body and in logs and metrics,
// beside a rejection's own reason (sluice.RateLimited, sluice.CircuitOpen,
// sluice.Overloaded, ...).
const (
	Rejected            = "rejected" // a rejection without a reason
	Timeout             = "timeout"
	ClientClosed        = "client_closed_request"
	UpstreamUnreachable = "upstream_unreachable" // no connection could be made
	UpstreamError       = "upstream_error"       // the connection broke, or the answer was unreadable
	UpstreamStatus      = "upstream_status"      // the upstream answered with a failing status
	InternalError       = "internal_error"
)

// Statuser is implemented by an error that knows the status and reason it
// is answered with, such as the gateway's refusal of a request body. For
// and Classify use the first one in an error's chain, after rejections,
// failing statuses and timeouts.
type Statuser interface {
	AnswerStatus() (code int, reason string)
}

// StatusError is the error of a call whose response status counts as a
// failure. Breakers count it and retry policies may retry it; the response
// itself may still be what the caller gets when no retry or fallback
// replaces it.
//
// StatusError implements sluice.RetryAfterHint with RetryAfter.
type StatusError struct {
	// Response is the response, when the caller holds one as a
	// *http.Response (httpguard's Transport); nil otherwise. Its body
	// belongs to whoever the result is handed to.
	Response *http.Response
	// StatusCode is the response's status code.
	StatusCode int
	// RetryAfter is the response's Retry-After header as a delay from when
	// the response arrived (see ParseRetryAfter); zero when the header is
	// absent, invalid or in the past.
	RetryAfter time.Duration
}

// Error describes the status, for example
// "status 503 Service Unavailable (retry after 2s)".
func (e *StatusError) Error() string {
	s := "status " + strconv.Itoa(e.StatusCode)
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

// Classify returns the status and reason that answer a call stopped with
// err:
//
//   - a rejection (errors.Is(err, sluice.ErrRejected)): 429 for
//     sluice.RateLimited, 503 for every other reason, which it names
//     ("rejected" when it has none);
//   - a *StatusError: its StatusCode, "upstream_status";
//   - a timeout (sluice.ErrTimeout, context.DeadlineExceeded, a net.Error
//     whose Timeout is true): 504, "timeout";
//   - the client cancelled (context.Canceled): 499, "client_closed_request";
//   - an error that implements Statuser: what it says;
//   - no connection could be made (a dial *net.OpError, a *net.DNSError,
//     ECONNREFUSED): 502, "upstream_unreachable";
//   - the connection broke (another *net.OpError, ECONNRESET, an EOF or
//     unexpected EOF): 502, "upstream_error";
//   - nil: 200, ""; anything else: 500, "internal_error".
//
// Wrapped errors are unwrapped (errors.Is / errors.As).
func Classify(err error) (code int, reason string) {
	if err == nil {
		return http.StatusOK, ""
	}
	var rej *sluice.Rejection
	if errors.As(err, &rej) {
		switch rej.Reason {
		case sluice.RateLimited:
			return http.StatusTooManyRequests, string(rej.Reason)
		case "":
			return http.StatusServiceUnavailable, Rejected
		}
		return http.StatusServiceUnavailable, string(rej.Reason)
	}
	if errors.Is(err, sluice.ErrRejected) {
		return http.StatusServiceUnavailable, Rejected
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode, UpstreamStatus
	}
	if errors.Is(err, sluice.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, Timeout
	}
	if errors.Is(err, context.Canceled) {
		return StatusClientClosedRequest, ClientClosed
	}
	var st Statuser
	if errors.As(err, &st) {
		return st.AnswerStatus()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return http.StatusGatewayTimeout, Timeout
	}
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &dns), errors.Is(err, syscall.ECONNREFUSED):
		return http.StatusBadGateway, UpstreamUnreachable
	case op != nil, errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadGateway, UpstreamError
	}
	return http.StatusInternalServerError, InternalError
}

// RetryAfter returns the delay an answer to err tells its client to wait
// before trying again, and whether there is one: err's hint
// (sluice.RetryAfter) when it has one; else one second for a rejection
// other than a rate limit's (a shed request is always told when to come
// back); else none.
func RetryAfter(err error) (time.Duration, bool) {
	if d, ok := sluice.RetryAfter(err); ok && d > 0 {
		return d, true
	}
	var rej *sluice.Rejection
	switch {
	case errors.As(err, &rej):
		if rej.Reason != sluice.RateLimited {
			return time.Second, true
		}
	case errors.Is(err, sluice.ErrRejected):
		return time.Second, true
	}
	return 0, false
}

// AppendJSON appends the body of an error answer to b:
// {"error":reason} with "retry_after":secs when secs > 0, and a newline.
func AppendJSON(b []byte, reason string, secs int64) []byte {
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

// RetryAfterSeconds is d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(CeilSeconds(d), 1)
}

// CeilSeconds is d in whole seconds, rounded up; zero for d <= 0.
func CeilSeconds(d time.Duration) int64 {
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
