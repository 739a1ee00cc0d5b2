package grpcguard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

var (
	// errLate is the error of an attempt that starts after the guard
	// returned (a hedge's straggler).
	errLate = errors.New("grpcguard: attempt started after the call ended")
	// errConcurrent is the error of an attempt that starts while another
	// attempt of the same call runs: both would fill the same reply.
	errConcurrent = fmt.Errorf("%w: another attempt of the call is running", ErrNotRetryable)
	// errSent is the error of an attempt refused because the call was sent
	// and may not be sent again.
	errSent = fmt.Errorf("%w: it was sent and is not retryable", ErrNotRetryable)
)

// UnaryClientInterceptor returns an interceptor that runs each unary call
// behind g, or behind Options.GuardFor's guard for its method; a nil guard
// sends calls straight through. Every policy applies: rate limit (keyed by
// Options.Key), breaker, concurrency limit, retry, timeout.
//
// Each attempt is classified from its status code (see Options.IsFailure
// and DefaultIsFailure), with the latency measured on Options.Clock. The
// error of an attempt that failed carries the server's retry pushback
// (PushbackKey trailer) as a retry-after hint, which a retry policy
// honours.
//
// An attempt is sent again only when its method is retryable
// (Options.RetryableMethods, none by default), its code is
// (Options.RetryableCodes, UNAVAILABLE by default) and the server's
// pushback does not ask otherwise; a retry policy's next attempt of any
// other call that was sent is Dropped with an error matching
// ErrNotRetryable, without sending anything. A call that no policy let
// through (a rejection inside the retry) was never sent and may be tried
// again. Set retry.Options.AbortIf to NotRetryable so that the retry
// policy does not wait a backoff before that refusal.
//
// The caller gets the status of the last attempt that was sent, as the
// server sent it; or, when no attempt was sent or a policy ended the call,
// Error(err): RESOURCE_EXHAUSTED, UNAVAILABLE or DEADLINE_EXCEEDED (see
// StatusFor), matching the policy's error with errors.Is.
//
// Attempts of one call never overlap, since they fill the same reply: an
// attempt that starts while another runs (a hedge) is Dropped with
// ErrNotRetryable. If a policy (an asynchronous timeout) returns while an
// attempt still runs, the interceptor waits for it; the attempt's context
// is cancelled by then.
//
// A value a policy settles on in place of the call's (a fallback's) is
// not copied into the reply. The interceptor is safe for concurrent use.
func UnaryClientInterceptor(g *sluice.Guard, opts Options) grpc.UnaryClientInterceptor {
	s := opts.settings()
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		cg := s.guard(g, method)
		if cg == nil {
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}
		c := &clientCall{
			s: &s, g: cg, method: method, req: req, reply: reply, cc: cc,
			invoker: invoker, opts: callOpts, retryable: s.retryable(method),
		}
		return c.finish(cg.Run(s.keyed(ctx, method), c.attempt))
	}
}

// NotRetryable reports whether r is the result of an attempt that
// UnaryClientInterceptor will not send again: an attempt whose method or
// status code is not retryable or whose server asked not to retry, or an
// attempt refused with ErrNotRetryable. Use it as retry.Options.AbortIf in
// a client's guard, so that such a call returns without a backoff wait.
func NotRetryable(r sluice.Result) bool {
	var ae *attemptError
	if errors.As(r.Err, &ae) {
		return ae.final
	}
	return errors.Is(r.Err, ErrNotRetryable)
}

// clientCall is the state of one unary client call across its attempts.
type clientCall struct {
	s         *settings
	g         *sluice.Guard
	method    string
	req       any
	reply     any
	cc        *grpc.ClientConn
	invoker   grpc.UnaryInvoker
	opts      []grpc.CallOption
	retryable bool // the method may be sent more than once

	mu       sync.Mutex    // protects the fields below
	finished bool          // the guard returned: no attempt may start
	running  chan struct{} // closed when the running attempt ends; nil when none runs
	sent     bool          // an attempt was sent
	last     *attemptError // the last sent attempt's error; nil if it succeeded
}

// attempt is the Call the guard runs: one call through the invoker.
func (c *clientCall) attempt(ctx context.Context) sluice.Result {
	c.mu.Lock()
	switch {
	case c.finished:
		c.mu.Unlock()
		return dropped(errLate)
	case c.running != nil:
		c.mu.Unlock()
		return dropped(errConcurrent)
	case c.sent && (c.last == nil || c.last.final):
		c.mu.Unlock()
		return dropped(errSent)
	}
	done := make(chan struct{})
	c.running, c.sent = done, true
	c.mu.Unlock()
	defer close(done)

	var trailer metadata.MD
	opts := append(c.opts[:len(c.opts):len(c.opts)], grpc.Trailer(&trailer))
	start := c.s.clock.Nanotime()
	err := c.invoker(ctx, c.method, c.req, c.reply, c.cc, opts...)
	o := c.s.outcome(ctx, c.g, err)
	o.Latency = since(c.s.clock, start)
	var ae *attemptError
	if err != nil {
		delay, abort := parsePushback(trailer)
		final := abort || !c.retryable || !c.s.retryCodes[status.Code(err)]
		ae = &attemptError{err: err, retryAfter: delay, final: final}
		o.Err = ae
	}
	c.mu.Lock()
	c.running, c.last = nil, ae
	c.mu.Unlock()
	return sluice.Result{Outcome: o}
}

// finish turns the guard's result into the call's error, once no attempt
// runs.
func (c *clientCall) finish(res sluice.Result) error {
	c.mu.Lock()
	c.finished = true
	running := c.running
	c.mu.Unlock()
	if running != nil {
		<-running
	}
	err := res.Err
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotRetryable) {
		c.mu.Lock()
		last := c.last
		c.mu.Unlock()
		if last == nil {
			return nil
		}
		return last.err
	}
	var ae *attemptError
	if _, ok := guardCode(err); !ok && errors.As(err, &ae) {
		return ae.err
	}
	return Error(err)
}

// attemptError is the error of an attempt that was sent: the invoker's
// error with the server's retry pushback.
type attemptError struct {
	err        error
	retryAfter time.Duration // the server's pushback; zero when none
	final      bool          // the call may not be sent again
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// GRPCStatus returns the status of the invoker's error.
func (e *attemptError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// RetryAfterHint returns the server's pushback (sluice.RetryAfterHint), or
// zero when the call will not be sent again: a retry policy then has no
// reason to wait for it before the refusal.
func (e *attemptError) RetryAfterHint() time.Duration {
	if e.final {
		return 0
	}
	return e.retryAfter
}
