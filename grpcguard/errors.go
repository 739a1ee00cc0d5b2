package grpcguard

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
)

// PushbackKey is the metadata key of gRPC's retry pushback: a server that
// rejects a call puts the delay, in whole milliseconds, after which the
// client may try again in this trailer; a negative or malformed value asks
// the client not to retry. grpc-go's built-in retry reads it, and so does
// UnaryClientInterceptor.
const PushbackKey = "grpc-retry-pushback-ms"

// ErrNotRetryable is matched (errors.Is) by the error of an attempt that an
// interceptor refused to run: UnaryClientInterceptor's call was already
// sent and may not be sent again (its method is not retryable, see
// Options.RetryableMethods; its last status code is not, see
// Options.RetryableCodes; the server's pushback asked not to retry; or
// another attempt of it is running), or UnaryServerInterceptor's handler
// already ran. Such an attempt is Dropped; the caller gets the status of
// the attempt that ran.
var ErrNotRetryable = errors.New("grpcguard: the call may not be sent again")

// grpcStatuser is implemented by the errors of grpc's status package.
type grpcStatuser interface{ GRPCStatus() *status.Status }

// StatusFor returns the gRPC status that answers a call the guard stopped
// with err: RESOURCE_EXHAUSTED for a rate limit; UNAVAILABLE for an open
// circuit, overload and every other rejection; DEADLINE_EXCEEDED for a
// timeout policy's error (sluice.ErrTimeout); otherwise the error's own
// status when it has one (a handler's or a server's status error);
// DEADLINE_EXCEEDED or CANCELED for a context's error; UNKNOWN for any
// other error, as grpc-go answers a handler's plain error; OK for nil. The
// message of a status StatusFor makes is err's text.
func StatusFor(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if code, ok := guardCode(err); ok {
		return status.New(code, err.Error())
	}
	var gs grpcStatuser
	if errors.As(err, &gs) {
		return gs.GRPCStatus()
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.New(code, err.Error())
}

// guardCode is the code of a policy's error: a rejection or a timeout,
// coded as the gateway codes them (answer.PolicyCode).
func guardCode(err error) (codes.Code, bool) { return answer.PolicyCode(err) }

// Error returns err as an error that gRPC sends, and status.FromError
// reads, as StatusFor(err), and that still matches err's chain
// (errors.Is(e, sluice.ErrRejected) holds for a rejection). An error that
// is not a policy's and already has a status is returned as it is; nil
// gives nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := guardCode(err); !ok {
		var gs grpcStatuser
		if errors.As(err, &gs) {
			return err
		}
	}
	return &statusError{err: err, st: StatusFor(err)}
}

// statusError is an error without a status given one.
type statusError struct {
	err error
	st  *status.Status
}

func (e *statusError) Error() string              { return e.err.Error() }
func (e *statusError) Unwrap() error              { return e.err }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// pushback returns the PushbackKey trailer of err's retry-after hint
// (sluice.RetryAfter), in milliseconds rounded up, and whether err has one.
func pushback(err error) (metadata.MD, bool) {
	d, ok := sluice.RetryAfter(err)
	if !ok {
		return nil, false
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return metadata.Pairs(PushbackKey, strconv.FormatInt(int64(ms), 10)), true
}

// parsePushback reads a server's PushbackKey trailer: the delay it asks
// for (zero when absent), and whether it asks not to retry (a negative,
// malformed or repeated value, as gRPC's retry design says).
func parsePushback(md metadata.MD) (delay time.Duration, abort bool) {
	v := md.Get(PushbackKey)
	switch len(v) {
	case 0:
		return 0, false
	case 1:
		ms, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || ms < 0 {
			return 0, true
		}
		return time.Duration(min(ms, int64(time.Duration(1<<63-1)/time.Millisecond))) * time.Millisecond, false
	}
	return 0, true
}
