package sluice

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/clock"
)

// errPanicked is the error reported to permits when the protected function
// panics; the panic itself goes on to the caller.
var errPanicked = errors.New("sluice: protected function panicked")

// maxInline is how many admission permits Do holds without allocating.
const maxInline = 8

// Guard composes policies around calls. Build it once with New and share it:
// a Guard is immutable and safe for concurrent use; its policies keep the
// state (breaker windows, buckets, limits).
type Guard struct {
	stages    []Policy
	asAdmit   []Admitter // each stage as an Admitter, or nil if it is not one
	admitters []Admitter // the stages, when every stage is an Admitter; else nil
	untimed   bool       // every admitter ignores latency: Do need not time calls
	classify  Classifier
	clock     clock.Clock
}

// New returns a Guard that runs calls through policies in the order given,
// outermost first. Nil policies are skipped. The Guard classifies calls with
// DefaultClassifier and measures latency with clock.Real; see WithClassifier
// and WithClock.
func New(policies ...Policy) *Guard {
	g := &Guard{classify: DefaultClassifier, clock: clock.Real}
	for _, p := range policies {
		if p != nil {
			g.stages = append(g.stages, p)
		}
	}
	g.asAdmit = make([]Admitter, len(g.stages))
	g.admitters = g.asAdmit
	for i, p := range g.stages {
		if a, ok := p.(Admitter); ok {
			g.asAdmit[i] = a
		} else {
			g.admitters = nil
		}
	}
	g.untimed = g.admitters != nil
	for _, a := range g.admitters {
		if li, ok := a.(LatencyIgnorer); !ok || !li.IgnoresLatency() {
			g.untimed = false
		}
	}
	return g
}

// WithClassifier returns a copy of g that classifies calls with c. A nil c
// means DefaultClassifier.
func (g *Guard) WithClassifier(c Classifier) *Guard {
	cp := *g
	if c == nil {
		c = DefaultClassifier
	}
	cp.classify = c
	return &cp
}

// Classify returns the Class g's Classifier gives a call that ran with ctx
// and returned err. Policies and adapters that build a call's Outcome
// themselves (httpguard) classify errors with it, so that a Classifier given
// to WithClassifier applies to their calls too.
func (g *Guard) Classify(ctx context.Context, err error) Class { return g.classify(ctx, err) }

// WithClock returns a copy of g that measures latency on c. A nil c means
// clock.Real.
func (g *Guard) WithClock(c clock.Clock) *Guard {
	cp := *g
	cp.clock = clock.Or(c)
	return &cp
}

// Policies returns the guard's policies, outermost first.
func (g *Guard) Policies() []Policy { return append([]Policy(nil), g.stages...) }

// Do runs fn behind g and returns what fn returned, or the error of the policy
// that stopped it (a *Rejection, ErrTimeout, ...). A nil g runs fn directly.
//
// When every policy of g is an admission policy, Do allocates nothing. If fn
// panics, every permit is released with a Failure and the panic goes on.
func Do[T any](ctx context.Context, g *Guard, fn func(context.Context) (T, error)) (T, error) {
	if g == nil || len(g.stages) == 0 {
		return fn(ctx)
	}
	if g.admitters != nil && len(g.admitters) <= maxInline {
		return doAdmitted(ctx, g, fn)
	}
	r := g.run(ctx, 0, func(ctx context.Context) Result {
		start := g.clock.Nanotime()
		v, err := fn(ctx)
		return Result{Value: v, Outcome: g.outcome(ctx, start, err)}
	})
	var zero T
	if r.Value == nil {
		return zero, r.Err
	}
	v, ok := r.Value.(T)
	if !ok {
		return zero, fmt.Errorf("sluice: a policy returned a %T where the call returns %T", r.Value, zero)
	}
	return v, r.Err
}

// Run runs next behind every policy of g. It lets a Guard be used as one
// Policy inside another Guard.
func (g *Guard) Run(ctx context.Context, next Call) Result {
	return g.run(ctx, 0, next)
}

func (g *Guard) outcome(ctx context.Context, start int64, err error) Outcome {
	lat := g.clock.Nanotime() - start
	return Outcome{Class: g.classify(ctx, err), Err: err, Latency: durationOf(lat)}
}

// run runs stage i and everything inside it; each stage receives the rest
// of the chain as a Call. A run of consecutive admission policies (up to
// maxInline) is admitted as one, as Do admits a guard of them, so that a
// permit granted after a wait re-checks the policies before it.
func (g *Guard) run(ctx context.Context, i int, inner Call) Result {
	if i == len(g.stages) {
		return inner(ctx)
	}
	if g.asAdmit[i] == nil {
		return g.stages[i].Run(ctx, func(ctx context.Context) Result { return g.run(ctx, i+1, inner) })
	}
	k := i + 1
	for k < len(g.stages) && k-i < maxInline && g.asAdmit[k] != nil {
		k++
	}
	var permits [maxInline]Permit
	n, err := acquireAll(ctx, g.asAdmit[i:k], &permits)
	if err != nil {
		return Result{Outcome: Outcome{Class: Dropped, Err: err}}
	}
	done := false
	defer func() {
		if !done {
			release(permits[:n], Outcome{Class: Failure, Err: errPanicked})
		}
	}()
	r := g.run(ctx, k, inner)
	done = true
	release(permits[:n], r.Outcome)
	return r
}

// doAdmitted is Do for a guard made only of admission policies: permits live
// on the stack and nothing is boxed.
func doAdmitted[T any](ctx context.Context, g *Guard, fn func(context.Context) (T, error)) (v T, err error) {
	var permits [maxInline]Permit
	n, err := g.acquire(ctx, &permits)
	if err != nil {
		return v, err
	}
	done := false
	defer func() {
		if !done {
			release(permits[:n], Outcome{Class: Failure, Err: errPanicked})
		}
	}()
	var o Outcome
	if g.untimed {
		v, err = fn(ctx)
		o = Outcome{Class: g.classify(ctx, err), Err: err}
	} else {
		start := g.clock.Nanotime()
		v, err = fn(ctx)
		o = g.outcome(ctx, start, err)
	}
	done = true
	release(permits[:n], o)
	return v, err
}

// release reports the outcome o of a call to its permits, outermost first:
// a breaker learns how the call ended before the concurrency slot the call
// held is handed to a call that waited for it, which then passes the
// breaker again (see Rechecker) and is turned away if this call opened it.
func release(permits []Permit, o Outcome) {
	for j := range permits {
		permits[j].Done(o)
	}
}
