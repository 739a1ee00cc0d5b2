// Package retry runs a call again when it fails, with backoff, a retry
// budget and respect for the caller's deadline.
//
// A Retry is a flow policy (sluice.Policy): place it outside the circuit
// breaker and the concurrency limit so that every attempt passes them again,
// and outside the timeout so that the timeout bounds one attempt:
//
//	p, err := retry.New(retry.Options{MaxAttempts: 3})
//	if err != nil {
//		log.Fatal(err) // names every unusable option
//	}
//	g := sluice.New(limiter, p, br, bulkhead, perAttemptTimeout)
//
// What is retried: by default a Failure, and a Dropped result (a rejection
// by a policy inside the retry, such as an open breaker or a full
// concurrency limit) only when its error carries a retry-after hint
// (sluice.RetryAfter): a rejection that says when to come back is
// transient, one that does not is overload, and retrying into overload only
// adds to it. An Ignored result (the caller cancelled) is never retried.
// RetryIf and AbortIf change the rule.
//
// When it stops: after MaxAttempts attempts; when the caller's context is
// done; when the next wait would end at or after the context's deadline;
// when a retry-after hint asks for a wait longer than MaxRetryAfter; or when
// the retry budget is spent. In every case Run returns the last attempt's
// result as it was, and Stats counts why it stopped.
//
// A caller that cannot block in Run, such as an event loop, steps through
// a call's attempts itself: Start, then Attempts.Next after each attempt.
//
// Retries are capped by a Budget (by default a private one allowing 20% of
// recent calls plus 10 retries per second), so that a failing downstream
// does not receive up to MaxAttempts times its normal load just when it can
// least afford it. Share one Budget between the policies that call one
// downstream.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// DefaultMaxAttempts is how many attempts a call gets, the first included.
const DefaultMaxAttempts = 3

// Options configures a Retry. The zero value retries a Failure twice with
// exponential backoff and full jitter (50ms, 100ms, ... up to 1s), within
// a private retry budget of 20% of calls plus 10 retries per second.
type Options struct {
	// MaxAttempts is how many attempts a call gets, the first included: 1
	// means no retry. Zero means DefaultMaxAttempts.
	MaxAttempts int

	// Backoff computes the wait between attempts. Nil means
	// Exponential(Initial, Max, Multiplier, Jitter, Rand); when Backoff is
	// set, those five fields are not used (Max still sets the default of
	// MaxRetryAfter).
	Backoff Backoff
	// Initial is the first wait of the default backoff. Zero means
	// DefaultInitial (50ms).
	Initial time.Duration
	// Max caps the waits of the default backoff. Zero means DefaultMax (1s).
	// It must not be below Initial.
	Max time.Duration
	// Multiplier is how much each wait of the default backoff grows over the
	// last. Zero means DefaultMultiplier (2); otherwise it must be at least 1.
	Multiplier float64
	// Jitter randomises the waits of the default backoff. The zero value is
	// FullJitter.
	Jitter Jitter
	// Rand returns random numbers in [0, 1) for the default backoff's
	// jitter. It must be safe for concurrent use if calls run concurrently;
	// nil means math/rand/v2's Float64. Tests pass a seeded source.
	Rand func() float64

	// MaxRetryAfter is the longest retry-after hint (sluice.RetryAfter) the
	// policy waits for. A result whose hint is longer is not retried: the
	// downstream asked for more patience than the policy has. Zero means Max
	// (or DefaultMax when Max is zero).
	MaxRetryAfter time.Duration

	// RetryIf decides whether a result may be retried. It sees every result
	// except Ignored ones, successes included, with their Value and Err; it
	// must be safe for concurrent use. Nil means DefaultRetryIf.
	RetryIf func(sluice.Result) bool
	// AbortIf, if set, is asked first: a result for which it returns true is
	// returned at once, whatever RetryIf says.
	AbortIf func(sluice.Result) bool

	// Budget caps retries at a share of recent calls. It may be shared
	// with other policies. Nil means a private Budget with the default
	// BudgetOptions, on Clock; see NoBudget.
	Budget *Budget
	// NoBudget turns the retry budget off: every call may use all its
	// attempts. It cannot be combined with Budget.
	NoBudget bool

	// Clock measures backoff waits and the time left before a context's
	// deadline. Nil means clock.Real.
	Clock clock.Clock

	// OnRetry, if set, is called before each wait with the number of the
	// attempt that just ended (1 for the first), the wait before the next
	// one and that attempt's result. It runs on the caller's goroutine with
	// no lock held and must be safe for concurrent use.
	OnRetry func(attempt int, delay time.Duration, last sluice.Result)
	// OnGiveUp, if set, is called when a result that could be retried is
	// returned instead, with the reason, the number of attempts made and the
	// result. Like OnRetry it runs with no lock held.
	OnGiveUp func(reason StopReason, attempts int, last sluice.Result)
}

// StopReason says why a Retry returned a result it would have retried.
type StopReason uint8

const (
	// AttemptsExhausted: the call used MaxAttempts attempts.
	AttemptsExhausted StopReason = iota
	// BudgetExhausted: the retry budget refused the retry.
	BudgetExhausted
	// DeadlineReached: the next wait would have ended at or after the
	// context's deadline, or the deadline had already passed.
	DeadlineReached
	// RetryAfterTooLong: the result's retry-after hint exceeded
	// MaxRetryAfter.
	RetryAfterTooLong
	// Cancelled: the caller cancelled the context before or during a wait.
	Cancelled

	numReasons
)

// String returns the reason in snake case, for logs and metric labels.
func (r StopReason) String() string {
	switch r {
	case AttemptsExhausted:
		return "attempts_exhausted"
	case BudgetExhausted:
		return "budget_exhausted"
	case DeadlineReached:
		return "deadline_reached"
	case RetryAfterTooLong:
		return "retry_after_too_long"
	case Cancelled:
		return "cancelled"
	}
	return "unknown"
}

// Stats counts what a Retry did since it was made.
type Stats struct {
	// Retries is how many retries were started (waits begun).
	Retries uint64
	// Stopped counts, by StopReason, the results returned instead of retried.
	Stopped [numReasons]uint64
}

// Retry is a flow policy that runs a call again when it fails. It is safe
// for concurrent use; build it with New.
type Retry struct {
	maxAttempts   int
	backoff       Backoff
	maxRetryAfter time.Duration
	retryIf       func(sluice.Result) bool // nil means DefaultRetryIf
	abortIf       func(sluice.Result) bool
	budget        *Budget // nil when NoBudget
	clock         clock.Clock
	onRetry       func(int, time.Duration, sluice.Result)
	onGiveUp      func(StopReason, int, sluice.Result)

	retries atomic.Uint64
	stopped [numReasons]atomic.Uint64
}

var _ sluice.Policy = (*Retry)(nil)

// New returns a Retry configured by opts. For unusable opts it returns an
// error matching sluice.ErrInvalidOptions (errors.Is) that names every
// unusable option.
func New(opts Options) (*Retry, error) {
	ps := invalid.Problems{Prefix: "retry: invalid options"}
	if opts.MaxAttempts < 0 {
		ps.Addf("MaxAttempts %d is negative", opts.MaxAttempts)
	}
	if opts.Initial < 0 {
		ps.Addf("Initial %v is negative", opts.Initial)
	}
	if opts.Max < 0 {
		ps.Addf("Max %v is negative", opts.Max)
	}
	initial, maxDelay := bounds(opts.Initial, opts.Max)
	if opts.Backoff == nil && opts.Max > 0 && opts.Max < initial {
		ps.Addf("Max %v is below Initial %v", opts.Max, initial)
	}
	if m := opts.Multiplier; m != 0 && !(m >= 1 && !math.IsInf(m, 0)) {
		ps.Addf("Multiplier %v is not a finite number of at least 1", m)
	}
	if !opts.Jitter.valid() {
		ps.Addf("Jitter %d is unknown", opts.Jitter)
	}
	if opts.MaxRetryAfter < 0 {
		ps.Addf("MaxRetryAfter %v is negative", opts.MaxRetryAfter)
	}
	if opts.NoBudget && opts.Budget != nil {
		ps.Addf("NoBudget is set together with a Budget")
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}

	p := &Retry{
		maxAttempts:   opts.MaxAttempts,
		backoff:       opts.Backoff,
		maxRetryAfter: opts.MaxRetryAfter,
		retryIf:       opts.RetryIf,
		abortIf:       opts.AbortIf,
		budget:        opts.Budget,
		clock:         clock.Or(opts.Clock),
		onRetry:       opts.OnRetry,
		onGiveUp:      opts.OnGiveUp,
	}
	if p.maxAttempts == 0 {
		p.maxAttempts = DefaultMaxAttempts
	}
	if p.backoff == nil {
		p.backoff = Exponential(initial, maxDelay, opts.Multiplier, opts.Jitter, opts.Rand)
	}
	if p.maxRetryAfter == 0 {
		p.maxRetryAfter = maxDelay
	}
	if p.budget == nil && !opts.NoBudget {
		b, err := NewBudget(BudgetOptions{Clock: p.clock})
		if err != nil {
			return nil, fmt.Errorf("retry: %w", err)
		}
		p.budget = b
	}
	return p, nil
}

// DefaultRetryIf retries a Failure, and a Dropped result whose error carries
// a retry-after hint (a rejection that says when to come back); nothing
// else.
func DefaultRetryIf(r sluice.Result) bool {
	switch r.Class {
	case sluice.Failure:
		return true
	case sluice.Dropped:
		_, ok := sluice.RetryAfter(r.Err)
		return ok
	}
	return false
}

// Run runs next, and runs it again while the result may be retried and no
// stop condition holds (see the package documentation). It returns the last
// attempt's result unchanged. Waits between attempts are taken on the
// policy's clock and end early, without another attempt, if ctx is done.
func (p *Retry) Run(ctx context.Context, next sluice.Call) sluice.Result {
	a := p.Start()
	for {
		r := next(ctx)
		delay, ok := a.Next(ctx, r)
		if !ok {
			return r
		}
		if clock.Sleep(ctx, p.clock, delay) != nil {
			a.Cancelled(r)
			return r
		}
	}
}

// Attempts steps through one call's attempts for a caller that cannot
// block in Run, such as an event loop that starts an attempt in one
// callback and learns its result in another: Start it when the call
// begins, and after each attempt ask Next whether to make another and
// after which wait. The decisions, the budget, the counts and the hooks
// are Run's. An Attempts is used by one goroutine at a time.
type Attempts struct {
	p    *Retry
	n    int           // attempts made
	prev time.Duration // the backoff's previous delay
}

// Start begins a call (it counts towards the retry budget, as Run does).
func (p *Retry) Start() Attempts {
	if p.budget != nil {
		p.budget.Deposit()
	}
	return Attempts{p: p}
}

// Next takes the result of the attempt just made and reports whether
// another should be made, after delay. When it returns false, r is the
// call's result and Stats counts why it stopped (nothing when r was not
// retryable). ctx is the call's context, for its deadline.
func (a *Attempts) Next(ctx context.Context, r sluice.Result) (delay time.Duration, ok bool) {
	p := a.p
	a.n++
	if !p.retryable(r) {
		return 0, false
	}
	delay, reason, ok := p.plan(ctx, a.n, &a.prev, r)
	if !ok {
		p.giveUp(reason, a.n, r)
		return 0, false
	}
	p.retries.Add(1)
	if p.onRetry != nil {
		p.onRetry(a.n, delay, r)
	}
	return delay, true
}

// Cancelled records that the wait before the next attempt ended without
// it (the caller gave up): r, the last attempt's result, is the call's.
func (a *Attempts) Cancelled(r sluice.Result) { a.p.giveUp(Cancelled, a.n, r) }

// Stats returns what the policy has done since it was made.
func (p *Retry) Stats() Stats {
	s := Stats{Retries: p.retries.Load()}
	for i := range p.stopped {
		s.Stopped[i] = p.stopped[i].Load()
	}
	return s
}

// Budget returns the policy's retry budget (the one given in Options, or
// its private one), or nil when NoBudget was set.
func (p *Retry) Budget() *Budget { return p.budget }

func (p *Retry) retryable(r sluice.Result) bool {
	if r.Class == sluice.Ignored {
		return false
	}
	if p.abortIf != nil && p.abortIf(r) {
		return false
	}
	if p.retryIf == nil {
		return DefaultRetryIf(r)
	}
	return p.retryIf(r)
}

// plan decides whether attempt number attempt+1 may start, and after which
// wait. It updates *prev with the backoff's delay.
func (p *Retry) plan(ctx context.Context, attempt int, prev *time.Duration, r sluice.Result) (time.Duration, StopReason, bool) {
	if attempt >= p.maxAttempts {
		return 0, AttemptsExhausted, false
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, DeadlineReached, false
		}
		return 0, Cancelled, false
	}
	delay := max(p.backoff.Delay(attempt, *prev), 0)
	*prev = delay
	if hint, ok := sluice.RetryAfter(r.Err); ok {
		if hint > p.maxRetryAfter {
			return 0, RetryAfterTooLong, false
		}
		delay = max(delay, hint)
	}
	if deadline, ok := ctx.Deadline(); ok && !p.clock.Now().Add(delay).Before(deadline) {
		return 0, DeadlineReached, false
	}
	if p.budget != nil && !p.budget.TryWithdraw() {
		return 0, BudgetExhausted, false
	}
	return delay, 0, true
}

func (p *Retry) giveUp(reason StopReason, attempts int, r sluice.Result) {
	p.stopped[reason].Add(1)
	if p.onGiveUp != nil {
		p.onGiveUp(reason, attempts, r)
	}
}
