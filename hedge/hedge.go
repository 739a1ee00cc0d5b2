// Package hedge cuts tail latency by racing a slow call against copies of
// itself ("hedged requests", as in Dean and Barroso, The Tail at Scale).
//
// A Policy starts the rest of the chain once. If no attempt has ended the
// race after a delay, it starts another attempt concurrently, and so on up to
// MaxHedges extra attempts. The first attempt that succeeds wins: Run returns
// its Result at once and cancels the others. The delay is fixed, or follows a
// quantile of recent successful latencies so that only the slowest calls are
// hedged.
//
// Hedging is for latency, not for failures: a failed attempt does not start
// a new one early, and when every attempt started has failed Run returns the
// last failure; a hedge refused before it ran (Dropped: a policy inside
// the hedge rejected it) never replaces another attempt's result, so it
// leaves the answer an unhedged call would have had (the first attempt's
// failure, or its refusal). Put a retry policy outside the hedge to retry
// failures.
// Only hedge calls that are safe to run more than once (idempotent reads).
package hedge

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// ErrLost is the cause with which the context of a losing attempt is
// cancelled (see context.Cause). Its Err is still context.Canceled, so the
// default classifier sees the loser as Ignored and it feeds no breaker window.
var ErrLost = errors.New("hedge: another attempt won")

// ErrNotSent is what a hedge's attempt wraps in its Result's error, with
// the class Dropped, when its call decides, once it began, not to send it
// after all (the request turned out not to be one that can be sent
// twice). Run then gives the hedge's token back to the Budget when the
// Budget has a Refund method, and Stats.Hedges does not count the hedge.
var ErrNotSent = errors.New("hedge: not sent")

// Budget limits how many hedges may be sent, typically to a fraction of the
// traffic. TryWithdraw takes one token and reports whether there was one; it
// is called once per hedge (never for the first attempt) and must be safe
// for concurrent use. A Budget that also has a method Refund() takes back
// the token of a hedge not sent (see ErrNotSent). retry.Budget satisfies
// it, with Refund.
type Budget interface {
	TryWithdraw() bool
}

// refunder is a Budget that takes back a token (see Budget).
type refunder interface{ Refund() }

// DefaultWindow is the number of latency samples used when
// Options.Quantile is set and Options.Window is zero.
const DefaultWindow = 64

// Options configures a Policy. The zero value is not valid: Delay is
// required.
type Options struct {
	// Delay is how long to wait for an attempt before starting the next one.
	// It must be positive. With Quantile set it is the initial delay and
	// the floor of the adaptive one.
	Delay time.Duration
	// Quantile, when in (0, 1), makes the delay adaptive: the Quantile-th
	// latency (for example 0.95) of the last Window calls that succeeded,
	// never below Delay. A call's latency is measured on Clock from the start
	// of Run to the winning Result, so a call won by a hedge counts as at
	// least its delay: hedge wins cannot drag the delay down and feed more
	// hedges. Zero means a fixed Delay.
	Quantile float64
	// Window is how many recent latencies the quantile is taken over; the
	// quantile is used once the window is full and refreshed every
	// Window/8 samples. Zero means DefaultWindow. Only used with Quantile.
	Window int
	// MaxDelay caps the adaptive delay. Zero means no cap; otherwise it
	// must be at least Delay. Only used with Quantile.
	MaxDelay time.Duration
	// MaxHedges is the most attempts started in addition to the first.
	// Zero means 1.
	MaxHedges int
	// Budget, if not nil, must grant every hedge. When it refuses, the call
	// sends no more hedges and waits for the attempts already started. Nil
	// means hedges are not budgeted.
	Budget Budget
	// Final, if not nil, reports whether an attempt's Result that is not a
	// Success still ends the race, for an error every attempt would get
	// (a 404, an invalid argument). Nil means only a Success ends the race.
	// It is called from the goroutine that called Run.
	Final func(r sluice.Result) bool
	// Discard, if not nil, is called once with the non-nil Value of every
	// attempt's Result that Run does not return, to release it (close an
	// HTTP response body, say). It may be called after Run has returned and
	// concurrently from several goroutines. Nil means such values are
	// dropped.
	Discard func(v any)
	// Clock is the clock for the delays and latencies; nil means clock.Real.
	Clock clock.Clock
}

// Stats counts what a Policy has done since it was created.
type Stats struct {
	// Calls is how many times Run was called.
	Calls uint64
	// Hedges is how many hedges were sent: attempts started in addition
	// to first ones, but for those that were not sent after all
	// (ErrNotSent). A hedge is counted when its attempt ends, so one
	// under way is not counted yet.
	Hedges uint64
	// Wins is how many calls a hedge won.
	Wins uint64
	// Denied is how many hedges the Budget refused.
	Denied uint64
}

// Policy is a flow policy that hedges calls. It is safe for concurrent use.
type Policy struct {
	delay     time.Duration
	tracker   *tracker // nil for a fixed delay
	maxHedges int
	budget    Budget
	final     func(sluice.Result) bool
	discard   func(any)
	clock     clock.Clock

	calls, hedges, wins, denied atomic.Uint64
}

var _ sluice.Policy = (*Policy)(nil)

// New returns a Policy configured by opts. For unusable opts it returns an
// error matching sluice.ErrInvalidOptions (errors.Is) that names every
// unusable option.
func New(opts Options) (*Policy, error) {
	ps := invalid.Problems{Prefix: "hedge: invalid options"}
	if opts.Delay <= 0 {
		ps.Addf("Delay %v is not positive", opts.Delay)
	}
	if opts.MaxHedges < 0 {
		ps.Addf("MaxHedges %d is negative", opts.MaxHedges)
	}
	if !(opts.Quantile >= 0 && opts.Quantile < 1) {
		ps.Addf("Quantile %v is not in [0, 1)", opts.Quantile)
	}
	if opts.Window < 0 {
		ps.Addf("Window %d is negative", opts.Window)
	}
	if opts.MaxDelay != 0 && opts.MaxDelay < opts.Delay {
		ps.Addf("MaxDelay %v is below Delay %v", opts.MaxDelay, opts.Delay)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	p := &Policy{
		delay:     opts.Delay,
		maxHedges: opts.MaxHedges,
		budget:    opts.Budget,
		final:     opts.Final,
		discard:   opts.Discard,
		clock:     clock.Or(opts.Clock),
	}
	if p.maxHedges == 0 {
		p.maxHedges = 1
	}
	if opts.Quantile > 0 {
		w := opts.Window
		if w == 0 {
			w = DefaultWindow
		}
		p.tracker = newTracker(opts.Quantile, w, opts.Delay, opts.MaxDelay)
	}
	return p, nil
}

// Delay returns the delay the next call will wait before hedging.
func (p *Policy) Delay() time.Duration {
	if p.tracker == nil {
		return p.delay
	}
	return p.tracker.current()
}

// Stats returns the policy's counters. Each is read atomically; together
// they are not a consistent snapshot while calls are under way.
func (p *Policy) Stats() Stats {
	return Stats{Calls: p.calls.Load(), Hedges: p.hedges.Load(), Wins: p.wins.Load(), Denied: p.denied.Load()}
}

// Run runs next, hedging it as configured, and returns the winning Result or,
// if no attempt wins, the last attempt's, but that a hedge's refusal
// (Dropped) never replaces another attempt's. Each attempt runs in its own
// goroutine with its own context derived from ctx. Losers are cancelled with
// ErrLost as the cause; the context of the attempt whose Result is returned
// is not cancelled, so that its Value stays usable (it ends with ctx).
//
// When ctx ends, no more hedges start and Run waits for the attempts under
// way, which see ctx's cancellation, as an unhedged call would. A panic in
// the attempt that decides the race is re-raised in Run's goroutine with the
// same value, and a runtime.Goexit is repeated there; a panic in an attempt
// that has already lost is dropped.
func (p *Policy) Run(ctx context.Context, next sluice.Call) sluice.Result {
	p.calls.Add(1)
	var start int64
	if p.tracker != nil {
		start = p.clock.Nanotime()
	}
	delay := p.Delay()
	r := &race{ch: make(chan attempt, p.maxHedges+1), discard: p.discard, sent: p.sent, unsent: p.unsent}
	cancels := make([]context.CancelCauseFunc, 0, p.maxHedges+1)
	launch := func() {
		actx, cancel := context.WithCancelCause(ctx)
		cancels = append(cancels, cancel)
		go r.run(actx, len(cancels)-1, next)
	}
	launch()
	running := 1

	var timer clock.Timer
	var fire <-chan time.Time
	arm := func() {
		if len(cancels) <= p.maxHedges {
			timer = p.clock.NewTimer(delay)
			fire = timer.C()
		}
	}
	stop := func() {
		if fire != nil {
			timer.Stop()
			fire = nil
		}
	}
	arm()
	done := ctx.Done()
	var last attempt // the result kept so far, when kept
	kept := false
	for {
		select {
		case <-done:
			done = nil
			stop()
		case <-fire:
			fire = nil
			if ctx.Err() != nil {
				continue
			}
			if p.budget != nil && !p.budget.TryWithdraw() {
				p.denied.Add(1)
				continue
			}
			launch()
			running++
			arm()
		case a := <-r.ch:
			running--
			if a.panicked || a.goexit {
				stop()
				p.settle(r, cancels, -1, last)
				if a.goexit {
					runtime.Goexit()
				}
				panic(a.value)
			}
			if a.r.Class == sluice.Success || (p.final != nil && p.final(a.r)) {
				stop()
				if a.i > 0 {
					p.wins.Add(1)
				}
				if p.tracker != nil && a.r.Class == sluice.Success {
					p.tracker.record(time.Duration(p.clock.Nanotime() - start))
				}
				p.settle(r, cancels, a.i, last)
				return a.r
			}
			drop := last
			if kept && a.i > 0 && a.r.Class == sluice.Dropped {
				drop, a = a, last // a hedge's refusal replaces nothing
			}
			if running > 0 {
				if drop.r.Value != nil && p.discard != nil {
					p.discard(drop.r.Value)
				}
				last, kept = a, true
				continue
			}
			stop()
			p.settle(r, cancels, a.i, drop)
			return a.r
		}
	}
}

// sent counts a hedge that was sent.
func (p *Policy) sent() { p.hedges.Add(1) }

// unsent gives back the token of a hedge not sent (see ErrNotSent).
func (p *Policy) unsent() {
	if rf, ok := p.budget.(refunder); ok {
		rf.Refund()
	}
}

// settle ends a race won (or ended) by attempt i, or by none if i is -1: it
// cancels every other attempt and discards the Values of the results Run does
// not return — prev, the failure held so far, and any result already
// delivered.
func (p *Policy) settle(r *race, cancels []context.CancelCauseFunc, i int, prev attempt) {
	late := r.decide()
	for j, cancel := range cancels {
		if j != i {
			cancel(ErrLost)
		}
	}
	if p.discard == nil {
		return
	}
	if prev.r.Value != nil {
		p.discard(prev.r.Value)
	}
	for _, a := range late {
		if a.r.Value != nil {
			p.discard(a.r.Value)
		}
	}
}

// attempt is how one attempt ended.
type attempt struct {
	i        int           // 0 for the first attempt, then 1, 2, ...
	r        sluice.Result // valid unless panicked or goexit
	panicked bool          // the attempt panicked with value
	goexit   bool          // the attempt called runtime.Goexit
	value    any
}

// race collects the attempts of one call.
type race struct {
	ch      chan attempt // buffered for every attempt: sends never block
	discard func(any)
	sent    func()     // called once a hedge that was sent has ended
	unsent  func()     // called for a hedge not sent (ErrNotSent)
	mu      sync.Mutex // protects decided and sends on ch
	decided bool       // the race is over: late results are discarded
}

// run runs one attempt and delivers how it ended.
func (r *race) run(ctx context.Context, i int, next sluice.Call) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// recover returns nil only for runtime.Goexit: since Go 1.21
		// panic(nil) panics with a *runtime.PanicNilError.
		v := recover()
		if i > 0 {
			r.sent()
		}
		r.deliver(attempt{i: i, panicked: v != nil, goexit: v == nil, value: v})
	}()
	res := next(ctx)
	returned = true
	if i > 0 {
		if res.Class == sluice.Dropped && errors.Is(res.Err, ErrNotSent) {
			r.unsent()
		} else {
			r.sent()
		}
	}
	r.deliver(attempt{i: i, r: res})
}

// deliver hands a to Run, or discards it if the race is already decided.
func (r *race) deliver(a attempt) {
	r.mu.Lock()
	if !r.decided {
		r.ch <- a
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if a.r.Value != nil && r.discard != nil {
		r.discard(a.r.Value)
	}
}

// decide marks the race as over and returns the results delivered but not
// yet received.
func (r *race) decide() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decided = true
	var late []attempt
	for len(r.ch) > 0 {
		late = append(late, <-r.ch)
	}
	return late
}
