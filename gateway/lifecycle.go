package gateway

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/retry"
)

// lifecycle is a route's request lifecycle, built once per route from its
// policies: admission (the rate limit and coalescing once per request, then
// per attempt the breaker, the concurrency limit or the adaptive limit),
// attempts (the retry with its budget, the attempt's deadlines, the choice
// of a target with passive health) and the answer (the upstream's response,
// the fallback, or an error). Every engine drives the same steps through a
// call (see call): a new route policy is built in buildPolicies (which
// reuses it across reloads) and placed in the lifecycle in newLifecycle,
// and no engine changes. A lifecycle is safe for concurrent use.
type lifecycle struct {
	rate  *rateLimit                               // nil when the route has no rate limit
	group *coalesce.Group[string, *sharedResponse] // nil unless the route coalesces
	retry *retry.Retry                             // nil when the route does not retry
	admit *sluice.Guard                            // per attempt: breaker, bulkhead, adaptive limit
	// A WebSocket's admission, split in two: wsHandshake (the breaker)
	// judges its handshake; wsSlot (bulkhead, adaptive limit) is held while
	// it is open. Both classify with wsClassify.
	wsHandshake, wsSlot *sluice.Guard
	// timeout is the route's timeout (0: none), headWait the upstream's
	// response_header_timeout (0: none); see headLimit.
	timeout  time.Duration
	headWait time.Duration
	pool     *pool
	fallback *config.Fallback // nil when the route has none
	clock    clock.Clock      // the gateway's: timers, latency samples, retry waits
	// prio gives a request its priority class for admission; nil without
	// classes.
	prio *priorities
	// flow holds the route's hedge and its fallback's levels before the
	// static answer.
	flow *flowPolicies
}

// newLifecycle builds the lifecycle of a route whose policies are p, sending
// to pool.
func newLifecycle(p *routePolicies, pl *pool, fallback *config.Fallback, clk clock.Clock) *lifecycle {
	var handshake, slot []sluice.Policy
	if p.breaker != nil {
		handshake = append(handshake, p.breaker)
	}
	if p.bulkhead != nil {
		slot = append(slot, p.bulkhead)
	}
	if p.adaptive != nil {
		slot = append(slot, p.adaptive)
	}
	admit := append(slices.Clip(handshake), slot...)
	return &lifecycle{
		rate:  p.rate,
		group: p.group,
		retry: p.retry,
		// Latency samples (adaptive limits, slow calls) are taken on the
		// gateway's clock, like the policies' windows.
		admit:       sluice.New(admit...).WithClock(clk).WithClassifier(classify),
		wsHandshake: sluice.New(handshake...).WithClock(clk).WithClassifier(wsClassify),
		wsSlot:      sluice.New(slot...).WithClock(clk).WithClassifier(wsClassify),
		timeout:     p.timeout,
		headWait:    pl.Config().ResponseHeaderTimeout.D(),
		pool:        pl,
		fallback:    fallback,
		clock:       clk,
		prio:        p.prio,
		flow:        p.flow,
	}
}

// headLimit is how long after its start an attempt may take to get its
// response's head (connecting, sending the request and waiting included):
// the route's timeout, or the upstream's response_header_timeout when that
// is shorter or the route has no timeout; 0 means no limit. An attempt that
// passes it fails with a timeout (504 unless retried). A streamed body is
// then bounded by the route's timeout from the attempt's start, and by
// response_header_timeout between two reads.
func (lc *lifecycle) headLimit() time.Duration {
	d := lc.timeout
	if w := lc.headWait; w > 0 && (d <= 0 || w < d) {
		d = w
	}
	return d
}

// call is one request's way through its route's lifecycle, across its
// attempts. It knows no HTTP library: an engine reports an attempt's
// outcome as a status code and Retry-After value, or an error. A call is
// driven by one goroutine at a time (an event loop step by step, the
// goroutine engine blocking: see exchange.run). Each attempt is a value of
// its own, so that several of one call may be in flight at once, as long
// as their begin and end calls do not run concurrently.
type call struct {
	lc       *lifecycle
	ctx      context.Context // carries the request's priority class, for admission
	final    bool            // a failed attempt must not be retried (see attemptError)
	attempts retry.Attempts  // when the route retries
	last     *target         // the previous attempt's target
	obs      *observation    // the request's log and trace record
	// retryReason says why the next attempt is a retry: the last settled
	// attempt's failing status or error type (see endAttempt).
	retryReason string
}

// attempt is one attempt of a call: admitted by the route's policies, with
// its target chosen and the target's passive-health permit taken.
type attempt struct {
	adm     sluice.Admission
	t       *target
	passive sluice.Permit
	start   time.Time        // on the wall clock: the base of the attempt's deadlines
	span    *tracing.Attempt // the attempt's span; nil when tracing is off
}

// start begins a call on lc for req. final says that a failed attempt
// must not be retried: the request's body cannot be sent twice or its
// method is not idempotent. obs records the call's attempts.
func (c *call) start(lc *lifecycle, req request, final bool, obs *observation) {
	*c = call{lc: lc, ctx: lc.prio.of(req), final: final, obs: obs}
	if lc.retry != nil {
		c.attempts = lc.retry.Start()
	}
}

// begin starts an attempt: the route's admission policies admit it (or
// refuse it with their error; the gateway never retries a refusal, see
// retryOn), and a target is chosen, avoiding the previous attempt's, with
// its passive-health permit (see upstream.Target.Permit).
func (c *call) begin() (attempt, error) { return c.beginOn(c.ctx) }

// beginOn is begin with ctx, which carries the call's priority class, for
// the admission: a wait for it (in a concurrency queue) ends with ctx.
func (c *call) beginOn(ctx context.Context) (attempt, error) {
	adm, err := c.lc.admit.Begin(ctx)
	if err != nil {
		return attempt{}, err
	}
	a := attempt{adm: adm, start: time.Now()}
	a.t = c.lc.pool.Choose(c.last)
	c.last = a.t
	a.passive = a.t.Permit()
	a.t.InFlight.Add(1)
	a.span = c.obs.beginAttempt(a.t, c.retryReason)
	return a, nil
}

// end ends attempt a with the upstream's status code and Retry-After value,
// or with err (an *UpstreamError) when it got no response. It reports the
// outcome to the target's passive health and the route's policies, and
// returns whether another attempt follows, after delay, and the attempt's
// error as the policies saw it: nil for a response below 500, a
// *StatusError for a 5xx (see attemptResult).
//
// The outcomes carry no latency for the passive health: its breaker counts
// failures in a row only. The target's metrics count the attempt, timed
// from begin.
func (c *call) end(a *attempt, code int, retryAfter []byte, err error) (time.Duration, bool, error) {
	o := c.settle(a, code, retryAfter, err)
	delay, ok := c.next(o)
	return delay, ok, o.Err
}

// settle is end without the retry's decision: it reports attempt a's
// outcome to the target's passive health and the route's admission
// policies, and returns it, its Err the error the policies saw. A hedged
// request settles each attempt of its race, then asks next once.
func (c *call) settle(a *attempt, code int, retryAfter []byte, err error) sluice.Outcome {
	c.retryReason = endAttempt(a.span, code, err)
	o, err := attemptResult(code, retryAfter, err)
	err = attemptError(err, c.final)
	a.t.InFlight.Add(-1)
	a.t.Metrics.Attempt(o.Class, time.Since(a.start))
	a.passive.Done(o)
	a.adm.End(context.Background(), err)
	o.Err = err
	return o
}

// next reports whether another attempt follows one that ended with o (see
// settle), and after which delay.
func (c *call) next(o sluice.Outcome) (time.Duration, bool) {
	if c.lc.retry == nil || o.Err == nil {
		return 0, false
	}
	return c.attempts.Next(context.Background(), sluice.Result{Outcome: o})
}

// cancelled ends the call during the wait before another attempt (the
// client left): err, the last attempt's error, is the call's.
func (c *call) cancelled(err error) {
	c.attempts.Cancelled(sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Err: err}})
}

// attemptError is the error the route's policies see for an attempt's
// error err (see attemptResult): marked final when the request is (final)
// and the target may have seen it, which is unless it could not be reached.
func attemptError(err error, final bool) error {
	if err == nil || !final {
		return err
	}
	// Declared here: errors.As moves it to the heap, which the success
	// path need not pay for.
	var ue *UpstreamError
	if errors.As(err, &ue) && ue.Connect {
		return err
	}
	return &finalError{err}
}

// attemptResult says what an attempt's response (its status code and
// Retry-After value), or its error (an *UpstreamError), means: the outcome
// for the target's passive-health permit, and the error the route's
// policies see, a *StatusError for a 5xx response.
func attemptResult(code int, retryAfter []byte, err error) (sluice.Outcome, error) {
	if err != nil {
		return sluice.Outcome{Class: classify(context.Background(), err), Err: err}, err
	}
	if code >= 500 {
		// An HTTP-date is on the wall clock, whatever clock the gateway reads.
		ra, _ := answer.ParseRetryAfter(string(retryAfter), time.Now())
		serr := &StatusError{StatusCode: code, RetryAfter: ra}
		return sluice.Outcome{Class: sluice.Failure, Err: serr}, serr
	}
	return sluice.Outcome{Class: sluice.Success}, nil
}
