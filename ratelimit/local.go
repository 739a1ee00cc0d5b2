package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// LocalOptions configures a Local limiter. The zero value is usable.
type LocalOptions struct {
	// Name names the limiter in its rejections (sluice.Rejection.Policy).
	Name string
	// Clock is the clock Allow reads; nil means clock.Real.
	Clock clock.Clock
}

// Local is a rate limit on one key in this process, for the hot path: the
// whole state is one int64, the GCRA theoretical arrival time, updated with
// a compare-and-swap, so Allow takes no lock and allocates nothing.
//
// Local runs GCRA whatever the Limit's Algorithm, which must be GCRA,
// TokenBucket or LeakyBucket: at a fixed limit the three admit the same
// events. It has GCRA's guarantee: at most Burst + Limit·t/Period events in
// any interval of length t, even under contention (a reading of the clock
// that is stale by the time of the compare-and-swap only makes a decision
// stricter; the arrival time never moves backwards).
//
// Local implements sluice.Admitter and sluice.Policy, rejecting with a
// *LimitError. It is safe for concurrent use.
type Local struct {
	tat   atomic.Int64 // the theoretical arrival time, a clock.Nanotime reading
	p     atomic.Pointer[localParams]
	clock clock.Clock
	name  string
}

type localParams struct {
	params
	tau   int64 // Capacity × T
	limit Limit
}

var (
	_ sluice.Admitter = (*Local)(nil)
	_ sluice.Policy   = (*Local)(nil)
)

// NewLocal returns a Local limiter with a full quota. For an unusable l (an
// invalid Limit, or one with a window algorithm) it returns an error
// matching sluice.ErrInvalidOptions and ErrInvalidLimit (errors.Is) that
// names every problem.
func NewLocal(l Limit, opts LocalOptions) (*Local, error) {
	p, err := gcraParams(l)
	if err != nil {
		return nil, err
	}
	x := &Local{clock: clock.Or(opts.Clock), name: opts.Name}
	x.set(p, l)
	x.tat.Store(x.clock.Nanotime())
	return x, nil
}

// gcraParams returns the params of l for Local and Sharded, which run GCRA
// for the bucket algorithms, or the error naming every problem of l,
// including a window algorithm.
func gcraParams(l Limit) (params, error) {
	p, err := l.params()
	switch l.Algorithm {
	case FixedWindow, SlidingWindow, SlidingLog:
		ps := limitProblems()
		ps.Add(err)
		ps.Addf("Algorithm %s is a window algorithm; Local and Sharded run GCRA, TokenBucket or LeakyBucket", l.Algorithm)
		return params{}, ps.Err()
	}
	if err != nil {
		return params{}, err
	}
	p.alg = algoGCRA
	return p, nil
}

// SetLimit replaces the limit, keeping the state: the arrival time, that is
// how far ahead of now the key's debt reaches, carries over to the new limit.
// It returns an error, and changes nothing, if l is invalid or uses a window
// algorithm.
func (x *Local) SetLimit(l Limit) error {
	p, err := gcraParams(l)
	if err != nil {
		return fmt.Errorf("ratelimit: setting local limit %q: %w", x.name, err)
	}
	x.set(p, l)
	return nil
}

// set makes p, the params of l, the limit.
func (x *Local) set(p params, l Limit) {
	x.p.Store(&localParams{params: p, tau: p.cap * p.t, limit: l})
}

// Limit returns the current limit.
func (x *Local) Limit() Limit { return x.p.Load().limit }

// Allow reports whether one event may happen now, and consumes it if so.
func (x *Local) Allow() bool {
	now := x.clock.Nanotime()
	p := x.p.Load()
	for {
		tat := x.tat.Load()
		next := max(tat, now) + p.t
		if next-now > p.tau {
			return false
		}
		if x.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}

// AllowN decides whether n events may happen now, and consumes them if so.
// A negative n is treated as zero, which reads the state.
func (x *Local) AllowN(n int) Decision { return x.AllowNAt(x.clock.Nanotime(), n) }

// AllowNAt is AllowN at the instant now, a reading of the limiter's clock
// (clock.Nanotime, in nanoseconds). It lets tests use fixed instants.
func (x *Local) AllowNAt(now int64, n int) Decision {
	p := x.p.Load()
	for {
		old := x.tat.Load()
		s := state{a: old}
		d := s.decide(p.params, int64(max(n, 0)), now)
		if !d.Allowed || n <= 0 || x.tat.CompareAndSwap(old, s.a) {
			return d
		}
	}
}

// Acquire consumes one event. It returns a zero Permit (Done does nothing)
// when the event is admitted, and a *LimitError when it is not.
func (x *Local) Acquire(context.Context) (sluice.Permit, error) {
	if x.Allow() {
		return sluice.Permit{}, nil
	}
	// Describe the rejection from a snapshot, consuming nothing.
	s := state{a: x.tat.Load()}
	p := x.p.Load()
	d := s.gcra(p.params, 1, x.clock.Nanotime())
	d.Allowed = false
	return sluice.Permit{}, newLimitError(x.name, p.limit.Period, d, nil)
}

// Run runs next if Acquire admits the call; see sluice.RunAdmitted.
func (x *Local) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, x, next)
}

// IgnoresLatency reports true: a rate limit never reads a call's latency
// (sluice.LatencyIgnorer).
func (x *Local) IgnoresLatency() bool { return true }
