// Package observe reports what a sluice.Guard and its policies do to
// metric sinks, so that a service calling sluice.Do sees what the gateway
// shows: calls by outcome and latency, rejections by policy and reason,
// circuit breaker states and transitions, concurrency limits, retries and
// why retrying stopped. Package telemetry/prom provides a Sink for
// Prometheus, telemetry/otelmetric one for OpenTelemetry metrics.
//
// An Observer gives the pieces to put into a Guard and into the policies'
// options; it wraps nothing and needs no change to the policies:
//
//	obs := observe.New(sink)
//	br, _ := breaker.New(breaker.Options{Name: "db", OnStateChange: obs.Breaker("db")})
//	rt, _ := retry.New(retry.Options{OnRetry: obs.Retry("db"), OnGiveUp: obs.GiveUp("db")})
//	g := sluice.New(obs.Guard("db"), rt, br, bulkhead)
//
// Guard's policy goes first, outermost, so that it sees each call as its
// caller does: its latency, retries and queueing included, and how it
// ended, a rejection by any policy after it included.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
)

// Sink receives the events of guards and policies; a Sink exports them.
// Its methods must be safe for concurrent use and quick: they run on the
// callers' goroutines.
type Sink interface {
	// Guard returns where the calls of the guard named name are reported.
	// It is called once per Observer.Guard.
	Guard(name string) GuardSink
	// BreakerState reports that the breaker named name is in state s:
	// changed from another state when transition is true, or just made
	// (Closed) when it is false.
	BreakerState(name string, s breaker.State, transition bool)
	// Limit reports the current limit of the concurrency limiter named
	// name.
	Limit(name string, limit int)
	// Retry reports that the retry policy named name starts a retry.
	Retry(name string)
	// GiveUp reports that the retry policy named name returned a result
	// it would have retried, and why.
	GiveUp(name string, reason retry.StopReason)
}

// GuardSink receives the calls of one guard.
type GuardSink interface {
	// Call reports a call that ended with class c after d, the time from
	// its admission by the Observer's policy to its end. A Dropped call
	// (rejected, or given up by its caller before it started) is reported
	// with d = 0.
	Call(c sluice.Class, d time.Duration)
	// Rejected reports a call a policy rejected, by that policy's name
	// (sluice.Rejection's Policy, possibly empty) and its reason. The call
	// is also reported to Call as Dropped.
	Rejected(policy string, reason sluice.Reason)
}

// Observer hands out the hooks that report to its sinks. It is safe for
// concurrent use.
type Observer struct {
	sinks []Sink
	clock clock.Clock
}

// New returns an Observer that reports to sinks (nil ones are skipped) and
// times calls on clock.Real; see WithClock.
func New(sinks ...Sink) *Observer {
	o := &Observer{clock: clock.Real}
	for _, s := range sinks {
		if s != nil {
			o.sinks = append(o.sinks, s)
		}
	}
	return o
}

// WithClock returns a copy of o that times calls on c. A nil c means
// clock.Real.
func (o *Observer) WithClock(c clock.Clock) *Observer {
	cp := *o
	cp.clock = clock.Or(c)
	return &cp
}

// Guard returns the policy that reports the calls of a guard named name:
// put it first in sluice.New. It admits every call, allocates nothing and
// reads the clock twice per call.
func (o *Observer) Guard(name string) *Calls {
	c := &Calls{clock: o.clock}
	for _, s := range o.sinks {
		c.sinks = append(c.sinks, s.Guard(name))
	}
	return c
}

// Breaker reports the breaker named name as Closed, as a new breaker is,
// and returns the hook for its breaker.Options.OnStateChange, which
// reports its changes of state.
func (o *Observer) Breaker(name string) func(name string, from, to breaker.State) {
	for _, s := range o.sinks {
		s.BreakerState(name, breaker.Closed, false)
	}
	return func(n string, _, to breaker.State) {
		for _, s := range o.sinks {
			s.BreakerState(n, to, true)
		}
	}
}

// Limit reports the initial limit of the concurrency limiter named name
// (its Algorithm's) and returns the hook for its
// concurrency.LimiterOptions.OnLimitChange, which reports each new limit.
func (o *Observer) Limit(name string, initial int) func(old, new int) {
	for _, s := range o.sinks {
		s.Limit(name, initial)
	}
	return func(_, n int) {
		for _, s := range o.sinks {
			s.Limit(name, n)
		}
	}
}

// Retry returns the hook for retry.Options.OnRetry of the retry policy
// named name, which reports each retry.
func (o *Observer) Retry(name string) func(attempt int, delay time.Duration, last sluice.Result) {
	return func(int, time.Duration, sluice.Result) {
		for _, s := range o.sinks {
			s.Retry(name)
		}
	}
}

// GiveUp returns the hook for retry.Options.OnGiveUp of the retry policy
// named name, which reports why a result was returned instead of retried
// (retry.BudgetExhausted: the retry budget refused).
func (o *Observer) GiveUp(name string) func(reason retry.StopReason, attempts int, last sluice.Result) {
	return func(reason retry.StopReason, _ int, _ sluice.Result) {
		for _, s := range o.sinks {
			s.GiveUp(name, reason)
		}
	}
}

// Calls is the admission policy Observer.Guard returns: it admits every
// call and reports how each ended, with its latency, to its guard's sinks.
type Calls struct {
	sinks []GuardSink
	clock clock.Clock
}

var (
	_ sluice.Admitter       = (*Calls)(nil)
	_ sluice.Releaser       = (*Calls)(nil)
	_ sluice.LatencyIgnorer = (*Calls)(nil)
)

// Acquire admits the call and starts timing it.
func (c *Calls) Acquire(context.Context) (sluice.Permit, error) {
	return sluice.NewPermit(c, uint64(c.clock.Nanotime())), nil
}

// Release reports how the call ended.
func (c *Calls) Release(token uint64, o sluice.Outcome) {
	var d time.Duration
	if o.Class != sluice.Dropped {
		d = max(time.Duration(c.clock.Nanotime()-int64(token)), 0)
	}
	for _, s := range c.sinks {
		s.Call(o.Class, d)
	}
	if o.Class == sluice.Dropped && o.Err != nil {
		c.rejected(o.Err)
	}
}

// rejected reports err if it is a rejection. (Apart from Release, whose
// calls would otherwise all pay for the variable errors.As moves to the
// heap.)
func (c *Calls) rejected(err error) {
	var rej *sluice.Rejection
	if !errors.As(err, &rej) {
		return
	}
	for _, s := range c.sinks {
		s.Rejected(rej.Policy, rej.Reason)
	}
}

// Run runs next as an admitted call (sluice.RunAdmitted).
func (c *Calls) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, c, next)
}

// IgnoresLatency reports true: Calls times calls itself, so a Guard of
// admission policies that all ignore latency need not.
func (c *Calls) IgnoresLatency() bool { return true }
