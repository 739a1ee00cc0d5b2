package sluice

import "context"

// Result is what a Call returns: the call's value and how it ended.
type Result struct {
	// Value is the protected function's result (boxed), or a value a flow
	// policy put in its place, such as a fallback. It may be nil.
	Value any
	Outcome
}

// Call runs the rest of a Guard's chain once, down to the protected function.
// Flow policies may call it several times, concurrently, or not at all.
type Call func(ctx context.Context) Result

// Policy is one stage of a Guard. Run runs next, the rest of the chain, under
// the policy and returns the result it settles on.
//
// Admission policies implement Run with RunAdmitted and also implement
// Admitter, which lets a Guard run them without allocating.
type Policy interface {
	Run(ctx context.Context, next Call) Result
}

// Admitter is an admission policy: it decides whether a call may start.
//
// Acquire returns a Permit when the call may start, or an error (usually a
// *Rejection) when it may not; it may wait, honouring ctx, if the policy
// queues. Every Permit returned must be finished with Done exactly once.
type Admitter interface {
	Acquire(ctx context.Context) (Permit, error)
}

// LatencyIgnorer is implemented by admission policies that never read
// Outcome.Latency. When every policy of a Guard is an Admitter that ignores
// latency, Do does not time calls (reading the clock is most of its cost)
// and reports a zero Latency.
type LatencyIgnorer interface {
	IgnoresLatency() bool
}

// Releaser is implemented by admission policies that need to learn how an
// admitted call ended. token is the value given to NewPermit.
type Releaser interface {
	Release(token uint64, o Outcome)
}

// Rechecker is implemented by admission policies whose decision can go
// stale while the call waits for a later policy's permit: a circuit breaker
// that opens while the call waits in a concurrency limit's queue. When a
// policy of a Guard grants a permit after a wait (Permit.Waited), the Guard
// asks each Rechecker before it, in the same run of consecutive admission
// policies, whether the permit it granted with token still stands; if not,
// the Guard releases that permit as Dropped and acquires a new one, and a
// refusal rejects the call (its slot in the later policy is released as
// Dropped). So a call that waited passes the breaker again once it gets its
// slot.
type Rechecker interface {
	Stands(token uint64) bool
}

// Permit is the right to run one call, granted by an Admitter. The zero Permit
// is valid and its Done does nothing. A Permit is a small value: passing it
// around does not allocate.
type Permit struct {
	r      Releaser
	token  uint64
	waited bool
}

// NewPermit returns a Permit whose Done calls r.Release(token, outcome). A nil
// r gives a Permit whose Done does nothing. token is for the policy's own use,
// for example the generation of a circuit breaker's state.
func NewPermit(r Releaser, token uint64) Permit { return Permit{r: r, token: token} }

// AfterWait returns p marked as granted after the call waited for it, in a
// queue: policies that queue mark the permits they grant after a wait, so
// that a Guard re-checks the policies before them (see Rechecker).
func (p Permit) AfterWait() Permit {
	p.waited = true
	return p
}

// Waited reports whether p was granted after a wait (see AfterWait).
func (p Permit) Waited() bool { return p.waited }

// Done reports how the admitted call ended. Call it exactly once per Permit.
// A call that never ran (a later policy rejected it) must still be reported,
// with Class Dropped, so that the policy can free what it reserved.
func (p Permit) Done(o Outcome) {
	if p.r != nil {
		p.r.Release(p.token, o)
	}
}

// RunAdmitted runs next behind a Permit from a: it is the Run method of an
// admission policy. A rejection comes back as a Dropped Result whose Err is
// the rejection; a panic in next reports a Failure to the Permit and goes on.
func RunAdmitted(ctx context.Context, a Admitter, next Call) Result {
	p, err := a.Acquire(ctx)
	if err != nil {
		return Result{Outcome: Outcome{Class: Dropped, Err: err}}
	}
	done := false
	defer func() {
		if !done {
			p.Done(Outcome{Class: Failure, Err: errPanicked})
		}
	}()
	r := next(ctx)
	done = true
	p.Done(r.Outcome)
	return r
}
