package grpcguard

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/ratelimit"
)

// Options configures the interceptors. The zero value is ready to use;
// every field documents its default.
type Options struct {
	// GuardFor, if set, picks the guard of each call from its full method
	// name ("/package.Service/Method"); a nil result means the guard given
	// to the interceptor. To leave a method unguarded, return sluice.New().
	// It must be safe for concurrent use.
	GuardFor func(fullMethod string) *sluice.Guard

	// Key, if set, gives the rate-limit key of each call, which the
	// interceptor puts in the call's context with ratelimit.WithKey. See
	// ByMethod, ByPeer and ByMetadata. Nil sets no key: a limiter uses its
	// own Options.Key.
	Key func(ctx context.Context, fullMethod string) string

	// IsFailure reports whether a call that ended with the given status
	// code counts as a failure against the downstream (breakers count it,
	// retry policies may retry it). It is not asked about OK, which is a
	// success, nor CANCELED, which is Ignored. It must be safe for
	// concurrent use. Nil means DefaultIsFailure.
	IsFailure func(codes.Code) bool

	// RetryableCodes are the codes after which a client call may be sent
	// again (UnaryClientInterceptor only). Nil means
	// DefaultRetryableCodes; an empty non-nil slice means none.
	RetryableCodes []codes.Code

	// RetryableMethods reports whether a client call of the given full
	// method may be sent more than once (it is idempotent), for
	// UnaryClientInterceptor. Nil means no method: a retry policy in the
	// guard then retries only calls that never reached the server (a
	// rejection by a policy inside the retry). See Methods.
	RetryableMethods func(fullMethod string) bool

	// Clock measures the latency reported in unary calls' outcomes. Nil
	// means clock.Real.
	Clock clock.Clock
}

// DefaultRetryableCodes are the codes a client call may be retried after
// when Options.RetryableCodes is nil: UNAVAILABLE, the code of a server
// that did not process the call (gRPC's own guidance).
var DefaultRetryableCodes = []codes.Code{codes.Unavailable}

// DefaultIsFailure reports whether code says the downstream failed or is
// overloaded: UNKNOWN (a handler's plain error), DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE and DATA_LOSS. The other codes
// (NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, PERMISSION_DENIED,
// UNAUTHENTICATED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE,
// UNIMPLEMENTED) describe the caller's request and do not. The gateway
// classifies its gRPC routes' calls alike.
func DefaultIsFailure(code codes.Code) bool { return answer.IsGRPCFailure(code) }

// Methods returns a RetryableMethods function that reports true for the
// full method names given ("/package.Service/Method") and false for every
// other.
func Methods(fullMethods ...string) func(fullMethod string) bool {
	set := make(map[string]struct{}, len(fullMethods))
	for _, m := range fullMethods {
		set[m] = struct{}{}
	}
	return func(fullMethod string) bool {
		_, ok := set[fullMethod]
		return ok
	}
}

// settings is Options with the defaults filled in.
type settings struct {
	guardFor   func(string) *sluice.Guard
	key        func(context.Context, string) string
	isFailure  func(codes.Code) bool
	retryCodes map[codes.Code]bool
	retryable  func(string) bool
	clock      clock.Clock
}

func (o Options) settings() settings {
	s := settings{
		guardFor:   o.GuardFor,
		key:        o.Key,
		isFailure:  o.IsFailure,
		retryCodes: make(map[codes.Code]bool),
		retryable:  o.RetryableMethods,
		clock:      clock.Or(o.Clock),
	}
	if s.isFailure == nil {
		s.isFailure = DefaultIsFailure
	}
	list := o.RetryableCodes
	if list == nil {
		list = DefaultRetryableCodes
	}
	for _, c := range list {
		s.retryCodes[c] = true
	}
	if s.retryable == nil {
		s.retryable = func(string) bool { return false }
	}
	return s
}

// guard returns the guard of a call of fullMethod: GuardFor's, or g.
func (s *settings) guard(g *sluice.Guard, fullMethod string) *sluice.Guard {
	if s.guardFor != nil {
		if pg := s.guardFor(fullMethod); pg != nil {
			return pg
		}
	}
	return g
}

// keyed returns ctx carrying the call's rate-limit key, if Key is set.
func (s *settings) keyed(ctx context.Context, fullMethod string) context.Context {
	if s.key == nil {
		return ctx
	}
	return ratelimit.WithKey(ctx, s.key(ctx, fullMethod))
}

// since is the time elapsed on c since the Nanotime reading start.
func since(c clock.Clock, start int64) time.Duration {
	return time.Duration(max(c.Nanotime()-start, 0))
}
