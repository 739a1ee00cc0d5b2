package httpguard_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

// recorder is a fake admission policy: it admits every call, or rejects it
// with reject, and records the outcome of every admitted call.
type recorder struct {
	reject error

	mu       sync.Mutex // protects outcomes
	outcomes []sluice.Outcome
	// ch, when not nil, receives every outcome too (make it buffered).
	ch chan sluice.Outcome
}

func newRecorder() *recorder { return &recorder{ch: make(chan sluice.Outcome, 16)} }

func (r *recorder) Acquire(context.Context) (sluice.Permit, error) {
	if r.reject != nil {
		return sluice.Permit{}, r.reject
	}
	return sluice.NewPermit(r, 0), nil
}

func (r *recorder) Release(_ uint64, o sluice.Outcome) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	r.mu.Unlock()
	if r.ch != nil {
		r.ch <- o
	}
}

func (r *recorder) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, r, next)
}

func (r *recorder) outcome(i int) sluice.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[i]
}

func (r *recorder) classes() []sluice.Class {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := make([]sluice.Class, len(r.outcomes))
	for i, o := range r.outcomes {
		cs[i] = o.Class
	}
	return cs
}

// retryFailures is a tiny retry policy: it runs next up to max times while the
// result is a Failure.
type retryFailures struct{ max int }

func (p retryFailures) Run(ctx context.Context, next sluice.Call) sluice.Result {
	for i := 1; ; i++ {
		r := next(ctx)
		if r.Class != sluice.Failure || i >= p.max {
			return r
		}
	}
}

// attemptContext runs each attempt with its own context and cancels it as
// soon as the attempt returns, as a per-attempt timeout policy does.
type attemptContext struct{}

func (attemptContext) Run(ctx context.Context, next sluice.Call) sluice.Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return next(ctx)
}

// expired runs the call with a deadline that has already passed and then
// reports a timeout, as a timeout policy does when the call overran.
type expired struct{}

func (expired) Run(ctx context.Context, next sluice.Call) sluice.Result {
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel()
	r := next(ctx)
	return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Err: sluice.ErrTimeout, Latency: r.Latency}}
}

// quota is a fake rate limiter that admits every call and reports its quota
// through httpguard.AddHeaders.
type quota struct{ h httpguard.RateLimitHeaders }

func (q quota) Acquire(ctx context.Context) (sluice.Permit, error) {
	httpguard.AddHeaders(ctx, q.h)
	return sluice.Permit{}, nil
}

func (q quota) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, q, next)
}

// limited is a rate limiter's rejection as a package below httpguard would
// write it: a *sluice.Rejection that reports its quota.
type limited struct {
	*sluice.Rejection
	limit, remaining int
	window, reset    time.Duration
}

func (l limited) Unwrap() error { return l.Rejection }

func (l limited) RateLimitReport() (string, int, int, time.Duration, time.Duration) {
	return l.Policy, l.limit, l.remaining, l.window, l.reset
}

// closeCounter counts Close calls on the bodies it wraps.
type closeCounter struct {
	mu     sync.Mutex
	closes int
}

func (c *closeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closes
}

// countingTransport wraps next so that every response body counts its Close
// calls in c.
type countingTransport struct {
	next http.RoundTripper
	c    *closeCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, c: t.c}
	return resp, nil
}

// countingBody counts its first Close in c.
type countingBody struct {
	io.ReadCloser
	c    *closeCounter
	once sync.Once
}

func (b *countingBody) Close() error {
	b.once.Do(func() {
		b.c.mu.Lock()
		b.c.closes++
		b.c.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

// trackedBody is a request body without GetBody that records being closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}
