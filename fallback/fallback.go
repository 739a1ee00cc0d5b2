// Package fallback degrades a failed call to an answer that is still useful:
// another function, the last good value seen for the same key, or a static
// value, tried in order.
//
//	lg, err := fallback.NewLastGood(fallback.LastGoodOptions{Key: byUser, MaxAge: time.Hour})
//	if err != nil {
//		log.Fatal(err) // names every unusable option
//	}
//	g := sluice.New(fallback.New(lg, fallback.Value(defaultAnswer)), br, limiter)
//
// By default a Policy degrades calls that failed (Class Failure) and calls
// that a policy inside it rejected (Class Dropped: an open breaker, a full
// bulkhead) — serving something on a rejection is the point of degrading —
// but never calls that were Ignored (the caller cancelled). Use When to
// choose differently.
package fallback

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// Level is one step of degradation. Fallback returns the value to answer
// with in place of the failed Result r, or an error when this level has
// nothing to give, in which case the next level is tried. Implementations
// used by a shared Policy must be safe for concurrent use.
type Level interface {
	Fallback(ctx context.Context, r sluice.Result) (any, error)
}

// Observer is implemented by levels that learn from the calls that succeed,
// such as LastGood. A Policy calls Observe with every Result of Class
// Success that it passes through unchanged.
type Observer interface {
	Observe(ctx context.Context, r sluice.Result)
}

// Func is a Level computed by a function: an alternative implementation, a
// secondary backend, a cache. It receives the failed Result.
type Func func(ctx context.Context, r sluice.Result) (any, error)

// Fallback calls f.
func (f Func) Fallback(ctx context.Context, r sluice.Result) (any, error) { return f(ctx, r) }

// FuncOf is a Level computed by a typed function that receives the failed
// call's error. Its value has type T, the type that sluice.Do[T] expects, so
// a mismatch is caught at compile time.
func FuncOf[T any](fn func(ctx context.Context, err error) (T, error)) Level {
	return Func(func(ctx context.Context, r sluice.Result) (any, error) {
		v, err := fn(ctx, r.Err)
		if err != nil {
			return nil, err
		}
		return v, nil
	})
}

// Value is a Level that always answers v. v is shared by every call that
// falls back to it, so it must not be modified; its dynamic type must be
// the type the caller expects (sluice.Do[T] fails on a mismatch).
func Value(v any) Level { return staticValue{v} }

type staticValue struct{ v any }

func (s staticValue) Fallback(context.Context, sluice.Result) (any, error) { return s.v, nil }

// Condition decides whether a Result is degraded.
type Condition func(r sluice.Result) bool

// OnFailureOrRejection is the default Condition: it is true for Results of
// Class Failure or Dropped, and false for Success and Ignored.
func OnFailureOrRejection(r sluice.Result) bool {
	return r.Class == sluice.Failure || r.Class == sluice.Dropped
}

// Error is the error of a call that every level failed to degrade. Err is
// the call's own error, and Unwrap returns it, so errors.Is, errors.As and
// sluice.RetryAfter see the original error (a *sluice.Rejection stays one).
// Levels holds each level's error, in order.
type Error struct {
	Err    error
	Levels []error
}

// Error returns the original error followed by the levels' errors.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString(" (fallback failed:")
	for i, err := range e.Levels {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(" level ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(": ")
		b.WriteString(err.Error())
	}
	b.WriteByte(')')
	return b.String()
}

// Unwrap returns the original error.
func (e *Error) Unwrap() error { return e.Err }

// Stats counts what a Policy has done since it was created.
type Stats struct {
	// Degraded is how many Results met the Condition.
	Degraded uint64
	// Served is how many of those a level answered.
	Served uint64
	// Exhausted is how many of those no level could answer.
	Exhausted uint64
}

// Policy is a flow policy that degrades failed calls through a chain of
// levels. It is safe for concurrent use if its levels are.
type Policy struct {
	levels    []Level
	observers []Observer
	when      Condition

	degraded, served, exhausted atomic.Uint64
}

var _ sluice.Policy = (*Policy)(nil)

// New returns a Policy that tries levels in order, skipping nil ones, on
// the Results that OnFailureOrRejection selects. With no levels it returns
// every Result unchanged.
func New(levels ...Level) *Policy {
	p := &Policy{when: OnFailureOrRejection}
	for _, l := range levels {
		if l == nil {
			continue
		}
		p.levels = append(p.levels, l)
		if o, ok := l.(Observer); ok {
			p.observers = append(p.observers, o)
		}
	}
	return p
}

// When returns a Policy with the same levels that degrades the Results c
// selects; a nil c means OnFailureOrRejection. The new Policy's Stats start
// at zero.
func (p *Policy) When(c Condition) *Policy {
	if c == nil {
		c = OnFailureOrRejection
	}
	return &Policy{levels: p.levels, observers: p.observers, when: c}
}

// Run runs next. A Result the Condition does not select is returned as is,
// and shown to the Observer levels if its Class is Success. A selected
// Result is given to each level in turn; the first value a level returns is
// the answer: a Result with that Value, Class Success, a nil Err and the
// failed call's Latency. If every level fails, Run returns the original
// Result with its Err wrapped in an *Error (or unchanged if it had no Err
// or there are no levels). Levels run in the caller's goroutine; a panic in
// one goes on to the caller.
func (p *Policy) Run(ctx context.Context, next sluice.Call) sluice.Result {
	r := next(ctx)
	if !p.when(r) {
		if r.Class == sluice.Success {
			for _, o := range p.observers {
				o.Observe(ctx, r)
			}
		}
		return r
	}
	p.degraded.Add(1)
	var errs []error
	for _, l := range p.levels {
		v, err := l.Fallback(ctx, r)
		if err == nil {
			p.served.Add(1)
			return sluice.Result{Value: v, Outcome: sluice.Outcome{Class: sluice.Success, Latency: r.Latency}}
		}
		errs = append(errs, err)
	}
	p.exhausted.Add(1)
	if r.Err != nil && len(errs) > 0 {
		r.Err = &Error{Err: r.Err, Levels: errs}
	}
	return r
}

// Stats returns the policy's counters. Each is read atomically; together
// they are not a consistent snapshot while calls are under way.
func (p *Policy) Stats() Stats {
	return Stats{Degraded: p.degraded.Load(), Served: p.served.Load(), Exhausted: p.exhausted.Load()}
}
