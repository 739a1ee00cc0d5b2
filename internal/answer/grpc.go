package answer

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
)

// PolicyCode returns the gRPC status code of a policy's error, and true:
// RESOURCE_EXHAUSTED for a rate limit's rejection, UNAVAILABLE for every
// other rejection (an open circuit, overload, a rejection without a
// reason), DEADLINE_EXCEEDED for a timeout policy's error
// (sluice.ErrTimeout). For any other error it returns false. grpcguard and
// the gateway answer policies' errors with it.
func PolicyCode(err error) (codes.Code, bool) {
	var rej *sluice.Rejection
	switch {
	case errors.As(err, &rej):
		if rej.Reason == sluice.RateLimited {
			return codes.ResourceExhausted, true
		}
		return codes.Unavailable, true
	case errors.Is(err, sluice.ErrRejected):
		return codes.Unavailable, true
	case errors.Is(err, sluice.ErrTimeout):
		return codes.DeadlineExceeded, true
	}
	return 0, false
}

// GRPCClassify is Classify for a gRPC call: the status code and reason
// that answer a call stopped with err. A policy's error has its
// PolicyCode; a *GRPCStatusError its own Code; a GRPCCoder its GRPCCode;
// otherwise Classify's reason
// decides: a timeout is DEADLINE_EXCEEDED, a client that left CANCELED, an
// upstream that could not be reached or broke the connection UNAVAILABLE,
// an internal error INTERNAL, a request longer than the gateway takes
// (413) RESOURCE_EXHAUSTED, and any other answer (a failing HTTP status
// from a target that does not speak gRPC, a refused request) the code of
// its HTTP status (see CodeForHTTPStatus). nil gives OK and "".
func GRPCClassify(err error) (codes.Code, string) {
	if err == nil {
		return codes.OK, ""
	}
	status, reason := Classify(err)
	if c, ok := PolicyCode(err); ok {
		return c, reason
	}
	var ge *GRPCStatusError
	if errors.As(err, &ge) {
		return ge.Code, reason
	}
	var gc GRPCCoder
	if errors.As(err, &gc) {
		return gc.GRPCCode(), reason
	}
	if status == http.StatusRequestEntityTooLarge {
		// A request longer than the gateway takes: as grpc-go answers a
		// message over its size limit.
		return codes.ResourceExhausted, reason
	}
	switch reason {
	case Timeout:
		return codes.DeadlineExceeded, reason
	case ClientClosed:
		return codes.Canceled, reason
	case UpstreamUnreachable, UpstreamError:
		return codes.Unavailable, reason
	case InternalError:
		return codes.Internal, reason
	}
	return CodeForHTTPStatus(status), reason
}

// GRPCCoder is implemented by an error of the gateway's own that knows the
// gRPC status code it is answered with, where the code of its HTTP status
// (see CodeForHTTPStatus) would say less: a request the gateway refuses as
// invalid is INVALID_ARGUMENT, not the INTERNAL of a 400.
type GRPCCoder interface {
	GRPCCode() codes.Code
}

// CodeForHTTPStatus is the gRPC status code a client reads from an HTTP
// status that is not 200, as gRPC's "HTTP to gRPC Status Code Mapping"
// gives it: 400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
// UNIMPLEMENTED, 429, 502, 503 and 504 UNAVAILABLE, any other UNKNOWN. 200
// gives OK.
func CodeForHTTPStatus(status int) codes.Code {
	switch status {
	case http.StatusOK:
		return codes.OK
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

// IsGRPCFailure reports whether a call that ended with code counts as a
// failure against the downstream (breakers count it, adaptive limits see
// it, retries may repeat it): UNKNOWN (a handler's plain error),
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE and
// DATA_LOSS. The other codes (OK, CANCELED, NOT_FOUND, INVALID_ARGUMENT,
// ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION,
// ABORTED, OUT_OF_RANGE, UNIMPLEMENTED) describe the caller's request and
// do not.
func IsGRPCFailure(code codes.Code) bool {
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// GRPCStatusError is the error of a gRPC call whose upstream answered with
// a status code that counts as a failure (see IsGRPCFailure), although its
// HTTP status was 200. Breakers count it and retries may repeat it; the
// upstream's answer is still what the caller gets when no retry or
// fallback replaces it. Classify answers it 200, "upstream_status";
// GRPCClassify with its Code.
//
// GRPCStatusError implements sluice.RetryAfterHint with RetryAfter.
type GRPCStatusError struct {
	// Code is the upstream's grpc-status.
	Code codes.Code
	// Message is its grpc-message, percent-decoded.
	Message string
	// RetryAfter is the upstream's retry pushback (grpc-retry-pushback-ms)
	// or Retry-After, zero when it gave none.
	RetryAfter time.Duration
}

// Error describes the status, for example
// "grpc status 14 Unavailable: no backend (retry after 2s)".
func (e *GRPCStatusError) Error() string {
	s := "grpc status " + strconv.Itoa(int(e.Code)) + " " + e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	return s
}

// RetryAfterHint returns e.RetryAfter.
func (e *GRPCStatusError) RetryAfterHint() time.Duration { return e.RetryAfter }

// AnswerStatus returns 200, "upstream_status": a gRPC failure travels in
// an HTTP 200 answer.
func (e *GRPCStatusError) AnswerStatus() (int, string) { return http.StatusOK, UpstreamStatus }
