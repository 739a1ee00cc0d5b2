package sluice

import (
	"context"
	"errors"
)

// ErrNotAdmissionOnly is returned by Guard.Begin for a Guard that has a
// policy other than an admission policy (a retry, a timeout), or more than
// eight of them: such a Guard can only run calls itself, with Do.
var ErrNotAdmissionOnly = errors.New("sluice: Begin needs a guard of at most 8 admission policies")

// Admission is a call that every policy of a Guard admitted and that the
// caller runs itself, outside Do: for callers that must not block while
// the call runs, such as an event loop that starts a call in one callback
// and learns how it ended in another. Guard.Begin admits the call; End
// reports how it ended. An Admission is a value of a few hundred bytes that
// allocates nothing; it is not safe for concurrent use.
type Admission struct {
	g       *Guard
	start   int64 // the guard clock's Nanotime at Begin; 0 when untimed
	n       int
	permits [maxInline]Permit
}

// Begin admits a call through every policy of g, outermost first, and
// starts timing it. It waits only as long as a policy's Acquire waits: a
// caller that must not block uses policies that decide at once (a
// concurrency limit without a queue, a breaker, a rate limit on a local
// store). When a policy refuses, Begin releases the permits granted so far
// as Dropped and returns that policy's error. A nil or empty g admits every
// call. Begin returns ErrNotAdmissionOnly when g has a policy that is not
// an Admitter, or more than eight.
func (g *Guard) Begin(ctx context.Context) (Admission, error) {
	var a Admission
	if g == nil || len(g.stages) == 0 {
		return a, nil
	}
	if g.admitters == nil || len(g.admitters) > maxInline {
		return a, ErrNotAdmissionOnly
	}
	a.g = g
	n, err := g.acquire(ctx, &a.permits)
	if err != nil {
		return Admission{}, err
	}
	a.n = n
	if !g.untimed {
		a.start = g.clock.Nanotime()
	}
	return a, nil
}

// End reports that the admitted call ended with err: the Guard's Classifier
// classifies err, the latency since Begin is measured (unless every policy
// ignores latency), and every permit is released, outermost first (see
// release). Call it exactly once; later calls do nothing.
func (a *Admission) End(ctx context.Context, err error) {
	if a.g == nil {
		return
	}
	var o Outcome
	if a.g.untimed {
		o = Outcome{Class: a.g.classify(ctx, err), Err: err}
	} else {
		o = a.g.outcome(ctx, a.start, err)
	}
	release(a.permits[:a.n], o)
	*a = Admission{}
}

// acquire takes a permit from each admitter of g in order into permits and
// returns how many it took; see acquireAll.
func (g *Guard) acquire(ctx context.Context, permits *[maxInline]Permit) (int, error) {
	return acquireAll(ctx, g.admitters, permits)
}

// acquireAll takes a permit from each of admitters (at most maxInline) in
// order into permits and returns how many it took. When a permit was
// granted after a wait, the earlier admitters are re-checked (see
// Rechecker). When one refuses it releases the others as Dropped and
// returns the refusal.
func acquireAll(ctx context.Context, admitters []Admitter, permits *[maxInline]Permit) (int, error) {
	for i, a := range admitters {
		p, err := a.Acquire(ctx)
		if err == nil && p.waited {
			if err = recheck(ctx, admitters[:i], permits); err != nil {
				p.Done(Outcome{Class: Dropped, Err: err})
			}
		}
		if err != nil {
			dropped := Outcome{Class: Dropped, Err: err}
			for j := i - 1; j >= 0; j-- {
				permits[j].Done(dropped)
			}
			return 0, err
		}
		permits[i] = p
	}
	return len(admitters), nil
}

// recheck asks each of admitters that is a Rechecker, outermost first,
// whether the permit it granted still stands, and acquires a new one from
// those whose permit does not. It returns the first refusal; the permit it
// replaced is then released and zeroed, the others are left to the caller.
func recheck(ctx context.Context, admitters []Admitter, permits *[maxInline]Permit) error {
	for j, a := range admitters {
		rc, ok := a.(Rechecker)
		if !ok || rc.Stands(permits[j].token) {
			continue
		}
		permits[j].Done(Outcome{Class: Dropped})
		p, err := a.Acquire(ctx)
		if err != nil {
			permits[j] = Permit{}
			return err
		}
		permits[j] = p
	}
	return nil
}
