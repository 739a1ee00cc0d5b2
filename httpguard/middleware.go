package httpguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ratelimit"
)

// errHandlerRan is the error of an attempt refused because the handler
// already ran for the request.
var errHandlerRan = fmt.Errorf("%w: the handler already ran", ErrNotReplayable)

// Middleware returns middleware that runs each request's handler behind g.
//
// The handler writes straight to the client, so the middleware suits
// admission policies (rate limit, circuit breaker, concurrency limit) and a
// timeout; a retry or hedge policy cannot replay a handler. The handler runs
// at most once per request: an attempt that would run it again is Dropped
// with an error matching ErrNotReplayable, and nothing is written twice.
//
// Each attempt is classified (only Success and Failure feed breakers and
// latency samples; the error of an attempt that ran the handler matches
// NotRetryable):
//
//   - the attempt's context was cancelled (the client went away), or its
//     deadline expired before the handler committed a response: the
//     guard's Classifier decides with the context's error (by default
//     Ignored for a cancellation, Failure for a deadline);
//   - the status is a failure (Options.IsFailure, default >= 500): Failure
//     with a *StatusError whose RetryAfter comes from the handler's
//     Retry-After header;
//   - otherwise (a handler that writes nothing answers 200): Success.
//
// When the guard ends with an error and the handler has not written the
// response (it was rejected, or timed out without writing), the middleware
// answers with Options.ErrorHandler, by default WriteError: 429, 503 or 504
// with Retry-After and a JSON body.
//
// If a policy (a timeout) returns while the handler still runs, the
// middleware waits for the handler to return before it writes the error and
// returns: the handler must honour its request's context, which the policy
// cancels.
//
// A ratelimit.Limiter in g that admits the request reports its quota in
// the response's RateLimit-Policy and RateLimit headers, as the gateway
// does on every answer (and WriteError on a rejection).
//
// The handler's ResponseWriter keeps http.Flusher, http.Hijacker and
// io.ReaderFrom working and unwraps for http.ResponseController. Its request
// carries the attempt's context, from which AddHeaders reaches the response.
//
// Options.Key keys each request for the guard's rate limits: by default
// ByClientIP(), one limit per client address (an IPv6 client's /64), as
// in the gateway.
//
// A nil g returns handlers unchanged. The middleware is safe for concurrent
// use.
func Middleware(g *sluice.Guard, opts Options) func(http.Handler) http.Handler {
	s := opts.settings()
	return func(next http.Handler) http.Handler {
		if g == nil {
			return next
		}
		return &guardedHandler{g: g, next: next, s: s}
	}
}

type guardedHandler struct {
	g    *sluice.Guard
	next http.Handler
	s    settings
}

func (h *guardedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &responseWriter{w: w}
	ctx := ratelimit.WithKeyReport(context.WithValue(r.Context(), hooksKey{}, rw), h.s.key(r), rw.reportRateLimit)
	res := h.g.Run(ctx, func(ctx context.Context) sluice.Result { return h.attempt(ctx, rw, r) })
	rw.finish()
	if rw.committed {
		return
	}
	rw.applyHooks()
	if res.Err != nil {
		h.s.errorHandler(w, r, res.Err)
	}
}

// attempt runs the handler unless it already ran.
func (h *guardedHandler) attempt(ctx context.Context, rw *responseWriter, r *http.Request) sluice.Result {
	if !rw.begin() {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: errHandlerRan}}
	}
	defer rw.running.Done()
	start := h.s.clock.Nanotime()
	h.next.ServeHTTP(rw, r.WithContext(ctx))
	o := h.outcome(ctx, rw)
	o.Latency = since(h.s.clock, start)
	return sluice.Result{Outcome: o}
}

// outcome classifies the attempt that just ran the handler.
func (h *guardedHandler) outcome(ctx context.Context, rw *responseWriter) sluice.Outcome {
	if err := ctx.Err(); err != nil && (errors.Is(err, context.Canceled) || !rw.committed) {
		// The handler's own result is what it wrote; the context says
		// whether it could finish. A response already committed before a
		// deadline counts by its status.
		return sluice.Outcome{Class: h.g.Classify(ctx, err), Err: final(err)}
	}
	status := rw.status
	if !rw.committed {
		status = http.StatusOK
	}
	if h.s.isFailure(status) {
		return sluice.Outcome{Class: sluice.Failure, Err: final(newStatusError(nil, status, rw.w.Header(), h.s.clock.Now()))}
	}
	return sluice.Outcome{Class: sluice.Success}
}
