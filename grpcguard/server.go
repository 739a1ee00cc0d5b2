package grpcguard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

var (
	// errHandlerRan is the error of an attempt refused because the handler
	// already ran for the call.
	errHandlerRan = fmt.Errorf("%w: the handler already ran", ErrNotRetryable)
	// errNoResponse answers a call the guard settled with neither a
	// response nor an error (a policy returned an empty Result).
	errNoResponse = status.Error(codes.Internal, "grpcguard: the guard returned neither a response nor an error")
)

// UnaryServerInterceptor returns an interceptor that runs each unary call's
// handler behind g, or behind Options.GuardFor's guard for its method. A
// nil guard runs the handler directly. Options.Key sets the call's
// rate-limit key.
//
// The handler's answer goes straight back to the client, so the
// interceptor suits admission policies (rate limit, circuit breaker,
// concurrency limit) and a timeout; the handler runs at most once per
// call: an attempt that would run it again (a retry, a hedge) is Dropped
// with an error matching ErrNotRetryable.
//
// The call is classified from the handler's error (see Options.IsFailure
// and DefaultIsFailure), with the latency measured on Options.Clock. Once
// the handler ran, the client gets what it returned (a context's error as
// DEADLINE_EXCEEDED or CANCELED, see Error; a fallback does not replace
// it), unless a timeout policy ended the call: then DEADLINE_EXCEEDED,
// even for a late response, as the timeout package says. When the guard
// stopped the call before the handler ran (a rejection, a timeout), the
// client gets Error(err): RESOURCE_EXHAUSTED, UNAVAILABLE or
// DEADLINE_EXCEEDED (see StatusFor), with the retry hint, if any, in the
// PushbackKey trailer; or, if a policy settled on a value instead (a
// fallback's), that value as the response.
//
// If a policy (an asynchronous timeout) returns while the handler still
// runs, the interceptor waits for the handler to return: the handler must
// honour its context, which the policy cancels.
//
// The interceptor is safe for concurrent use.
func UnaryServerInterceptor(g *sluice.Guard, opts Options) grpc.UnaryServerInterceptor {
	s := opts.settings()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		cg := s.guard(g, info.FullMethod)
		if cg == nil {
			return handler(ctx, req)
		}
		ctx = s.keyed(ctx, info.FullMethod)
		c := &serverCall{}
		res := cg.Run(ctx, func(ctx context.Context) sluice.Result {
			if !c.begin() {
				return dropped(errHandlerRan)
			}
			defer close(c.done)
			start := s.clock.Nanotime()
			c.resp, c.err = handler(ctx, req)
			o := s.outcome(ctx, cg, c.err)
			o.Latency = since(s.clock, start)
			return sluice.Result{Value: c.resp, Outcome: o}
		})
		if c.finish() {
			if errors.Is(res.Err, sluice.ErrTimeout) {
				return nil, Error(res.Err)
			}
			return c.resp, Error(c.err)
		}
		if res.Err != nil {
			if md, ok := pushback(res.Err); ok {
				_ = grpc.SetTrailer(ctx, md) // fails only once the call is over
			}
			return nil, Error(res.Err)
		}
		if res.Value == nil {
			return nil, errNoResponse
		}
		return res.Value, nil
	}
}

// serverCall is the state of one unary server call across its attempts.
type serverCall struct {
	mu       sync.Mutex // protects started, finished and done
	started  bool       // the handler was called
	finished bool       // the guard returned: the handler may not start
	done     chan struct{}

	// set by the attempt that runs the handler, read after done is closed
	resp any
	err  error
}

// begin reports whether the handler may run; if so, done is closed once it
// returned.
func (c *serverCall) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.finished {
		return false
	}
	c.started = true
	c.done = make(chan struct{})
	return true
}

// finish forbids the handler to start, waits for it if it started, and
// reports whether it ran.
func (c *serverCall) finish() bool {
	c.mu.Lock()
	c.finished = true
	started, done := c.started, c.done
	c.mu.Unlock()
	if started {
		<-done
	}
	return started
}

// StreamServerInterceptor returns an interceptor that admits each stream
// through the admission policies of g (those that implement
// sluice.Admitter), or of Options.GuardFor's guard for its method, and
// holds the admission until the handler returns. A nil guard runs the
// handler directly. Options.Key sets the stream's rate-limit key, and the
// handler's stream carries that context.
//
// Flow policies (retry, timeout, hedge, fallback) are not applied: a
// stream cannot be replayed, and a timeout meant for a unary call would
// cut a long stream off. A stream the guard refuses ends at once with
// Error(err) (see StatusFor), with the retry hint, if any, in the
// PushbackKey trailer.
//
// The stream's outcome is classified from the handler's error (see
// Options.IsFailure) and reported with a zero Latency: a stream's life is
// no sample of a call's latency, and sluice.Outcome has no way to say "no
// latency sample". So a breaker never counts a stream as a slow call; an
// adaptive concurrency limit (concurrency.Limiter) would take it as a
// fast call, so guard streams with a Bulkhead rather than an adaptive
// limit.
//
// The interceptor is safe for concurrent use.
func StreamServerInterceptor(g *sluice.Guard, opts Options) grpc.StreamServerInterceptor {
	s := opts.settings()
	ag := admissionOnly(g)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		cg := s.streamGuard(g, ag, info.FullMethod)
		if cg == nil {
			return handler(srv, ss)
		}
		ran := false
		var herr error
		res := cg.Run(s.keyed(ss.Context(), info.FullMethod), func(ctx context.Context) sluice.Result {
			ran = true
			herr = handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
			return sluice.Result{Outcome: s.outcome(ctx, cg, herr)}
		})
		if ran {
			return herr
		}
		if md, ok := pushback(res.Err); ok {
			ss.SetTrailer(md)
		}
		return Error(res.Err)
	}
}

// serverStream is a handler's stream with the context the guard ran it
// with.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// admissionOnly returns a guard of g's admission policies, in g's order;
// nil for a nil g.
func admissionOnly(g *sluice.Guard) *sluice.Guard {
	if g == nil {
		return nil
	}
	var ps []sluice.Policy
	for _, p := range g.Policies() {
		if _, ok := p.(sluice.Admitter); ok {
			ps = append(ps, p)
		}
	}
	return sluice.New(ps...)
}

// streamGuard returns the admission guard of a stream of fullMethod:
// that of GuardFor's guard, or ag, the admission guard of g.
func (s *settings) streamGuard(g, ag *sluice.Guard, fullMethod string) *sluice.Guard {
	if pg := s.guard(g, fullMethod); pg != g {
		return admissionOnly(pg)
	}
	return ag
}
