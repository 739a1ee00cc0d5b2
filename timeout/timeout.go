// Package timeout bounds how long one run of a call may take.
//
// A Timeout is a flow policy (sluice.Policy). Place it innermost, inside the
// retry, so that it bounds one attempt and each retry gets a fresh bound:
//
//	t, err := timeout.New(timeout.Options{Timeout: 2 * time.Second})
//	if err != nil {
//		log.Fatal(err) // names every unusable option
//	}
//	g := sluice.New(limiter, retryPolicy, br, bulkhead, t)
//
// A Timeout is cooperative by default: it runs the rest of the chain with a
// context that expires after Timeout (made by the Clock's WithTimeout, so
// that with clock.Real the context carries a real deadline that clients,
// servers and drivers propagate), and it waits for the call to return. The
// protected function must honour ctx for the bound to hold; one that
// ignores ctx runs to its end, and only then is its result turned into a
// timeout. Async lifts that requirement at a cost: see Options.Async.
//
// When the Timeout's own deadline has passed by the time the call returns,
// the Result is a timeout whatever the call returned, even a success: its
// Err matches errors.Is(err, sluice.ErrTimeout) (and
// context.DeadlineExceeded), its Class is Failure (a call that could not
// finish in time was too slow, and breakers and limiters outside should
// learn it; a result that was Dropped or Ignored keeps its class) and its
// Value is nil. A late success is discarded on purpose:
// the bound is the contract, and the outcome then does not depend on whether
// the function noticed ctx, nor on the mode. When the caller's own context
// ended first, the call's result is returned unchanged.
package timeout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// Options configures a Timeout.
type Options struct {
	// Timeout is how long one run of the call may take. It must be
	// positive; there is no default.
	Timeout time.Duration

	// Async runs the call in a goroutine of its own so that Run returns at
	// the deadline even if the call ignores ctx. The default, false, runs
	// the call on the caller's goroutine and waits for it.
	//
	// The cost: a goroutine and a channel per call, and, when the deadline
	// passes, a call left running in the background until it returns by
	// itself, holding whatever it holds (memory, a connection). Policies
	// outside the Timeout see the call end at the deadline: a concurrency
	// limit outside no longer counts the abandoned call, so a downstream
	// that ignores ctx can be sent more work than the limit says. Prefer
	// functions that honour ctx; use Async for those that cannot.
	//
	// A panic in the call is passed on to the caller if Run is still
	// waiting; after the deadline there is no caller to pass it to, and it
	// crashes the program like any panic in a goroutine.
	Async bool

	// Clock makes the deadline. Nil means clock.Real.
	Clock clock.Clock
}

// Timeout is a flow policy that bounds how long one run of the rest of the
// chain may take. It is safe for concurrent use and holds no state between
// calls; build it with New.
type Timeout struct {
	d     time.Duration
	async bool
	clock clock.Clock
}

var _ sluice.Policy = (*Timeout)(nil)

// New returns a Timeout configured by opts. For unusable opts (a Timeout
// that is not positive) it returns an error matching
// sluice.ErrInvalidOptions (errors.Is) that names every unusable option.
func New(opts Options) (*Timeout, error) {
	ps := invalid.Problems{Prefix: "timeout: invalid options"}
	if opts.Timeout <= 0 {
		ps.Addf("Timeout %v is not positive", opts.Timeout)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return &Timeout{d: opts.Timeout, async: opts.Async, clock: clock.Or(opts.Clock)}, nil
}

// Duration returns the configured timeout.
func (t *Timeout) Duration() time.Duration { return t.d }

// Run runs next with a context that expires after the timeout, and returns
// its result, or a timeout Result if the timeout expired first (see the
// package documentation).
func (t *Timeout) Run(ctx context.Context, next sluice.Call) sluice.Result {
	if t.async {
		return t.runAsync(ctx, next)
	}
	tctx, cancel := t.clock.WithTimeout(ctx, t.d)
	defer cancel()
	r := next(tctx)
	if t.expired(ctx, tctx) {
		return t.timedOut(r)
	}
	return r
}

// outcome is what the goroutine of an async run sends back.
type outcome struct {
	r        sluice.Result
	panicked bool
	p        any // the panic value, when panicked
}

// errGoexit is the error of an async call whose function called
// runtime.Goexit.
var errGoexit = errors.New("timeout: the protected function called runtime.Goexit")

func (t *Timeout) runAsync(ctx context.Context, next sluice.Call) sluice.Result {
	start := t.clock.Nanotime() // before the deadline's timer, which a clock may fire at once
	tctx, cancel := t.clock.WithTimeout(ctx, t.d)
	defer cancel()
	done := make(chan outcome, 1) // buffered: an abandoned goroutine never blocks
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			if p := recover(); p != nil {
				done <- outcome{panicked: true, p: p}
				return
			}
			done <- outcome{r: sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Err: errGoexit}}}
		}()
		r := next(tctx)
		returned = true
		done <- outcome{r: r}
	}()
	select {
	case o := <-done:
		if o.panicked {
			panic(o.p)
		}
		if t.expired(ctx, tctx) {
			return t.timedOut(o.r)
		}
		return o.r
	case <-tctx.Done():
		if ctx.Err() != nil {
			// The caller gave up: say so without waiting for the call.
			err := ctx.Err()
			return sluice.Result{Outcome: sluice.Outcome{Class: sluice.DefaultClassifier(ctx, err), Err: err, Latency: t.since(start)}}
		}
		return t.timedOut(sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Latency: t.since(start)}})
	}
}

// expired reports whether tctx, made from ctx by the Timeout, has reached
// the Timeout's own deadline (rather than ending with ctx).
func (t *Timeout) expired(ctx, tctx context.Context) bool {
	return ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
}

// timedOut turns r, the result of a call that returned after the deadline
// (or a stand-in for one still running), into a timeout: Err wraps
// ErrTimeout and r.Err, Value is dropped, a Success becomes a Failure, and
// a call that never ran (Dropped) or says nothing about the downstream
// (Ignored) keeps its class.
func (t *Timeout) timedOut(r sluice.Result) sluice.Result {
	err := fmt.Errorf("%w after %v", sluice.ErrTimeout, t.d)
	if r.Err != nil {
		err = fmt.Errorf("%w after %v: %w", sluice.ErrTimeout, t.d, r.Err)
	}
	class := r.Class
	if class.Ran() {
		class = sluice.Failure
	}
	return sluice.Result{Outcome: sluice.Outcome{Class: class, Err: err, Latency: r.Latency}}
}

func (t *Timeout) since(start int64) time.Duration {
	return time.Duration(max(t.clock.Nanotime()-start, 0))
}
