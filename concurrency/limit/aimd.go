package limit

import (
	"sync"
	"time"
)

// AIMD defaults.
const (
	// DefaultAIMDBackoffRatio multiplies the limit on a drop: 0.9 gives up
	// 10% per round trip, gentle enough that one stray timeout costs little,
	// steep enough that sustained drops halve the limit in about seven round
	// trips (Netflix's AIMDLimit uses the same ratio).
	DefaultAIMDBackoffRatio = 0.9
	// DefaultAIMDIncrease is the additive increase per round trip: one call,
	// as in TCP Reno's congestion avoidance.
	DefaultAIMDIncrease = 1.0
	// DefaultAIMDTimeout is the latency above which a call that succeeded
	// still counts as a drop. Five seconds is Netflix's default: AIMD is
	// meant to react to failures, not to latency; set a lower Timeout to
	// make slow calls count.
	DefaultAIMDTimeout = 5 * time.Second
)

// AIMDOptions configures an AIMD. The zero value is valid: every zero field
// takes its default.
type AIMDOptions struct {
	// InitialLimit is the limit before the first sample. Default
	// DefaultInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit is the smallest limit. Default DefaultMinLimit.
	MinLimit int
	// MaxLimit is the largest limit. Default DefaultMaxLimit.
	MaxLimit int
	// BackoffRatio multiplies the limit on a drop, in (0, 1). Default
	// DefaultAIMDBackoffRatio.
	BackoffRatio float64
	// Increase is the limit's additive increase per round trip in which
	// nothing dropped (each good sample adds Increase/limit). Default
	// DefaultAIMDIncrease.
	Increase float64
	// Timeout is the latency at or above which a sample counts as a drop.
	// Default DefaultAIMDTimeout.
	Timeout time.Duration
}

// AIMD is the additive-increase, multiplicative-decrease limit of TCP Reno.
//
// A sample that did not drop, ran faster than Timeout and found the limit in
// use (at least half of it in flight, so that an idle service does not grow
// an unbounded limit) adds Increase/limit: about Increase per round trip. A
// drop, or a sample at or above Timeout, multiplies the limit by
// BackoffRatio, but only once per round trip: samples of calls that started
// before the last decrease carry no news about the decreased limit and are
// ignored, so a burst of timeouts costs one backoff, not one per call.
//
// AIMD ignores latency below Timeout, so it sheds only once calls fail. It
// is safe for concurrent use.
type AIMD struct {
	b        bounds
	backoff  float64
	increase float64
	timeout  time.Duration

	mu           sync.Mutex // protects limit, decreased and lastDecrease
	limit        float64
	decreased    bool  // whether the limit was ever decreased
	lastDecrease int64 // now of the last decrease
	out          published
}

// NewAIMD returns an AIMD configured by opts. For unusable opts it returns
// an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every unusable option.
func NewAIMD(opts AIMDOptions) (*AIMD, error) {
	ps := problems("AIMD")
	b := resolveBounds(&ps, opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	checkRatio(&ps, "BackoffRatio", opts.BackoffRatio)
	checkPositive(&ps, "Increase", opts.Increase)
	if opts.Timeout < 0 {
		ps.Addf("Timeout %v is negative", opts.Timeout)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	a := &AIMD{
		b:        b,
		backoff:  orDefault(opts.BackoffRatio, DefaultAIMDBackoffRatio),
		increase: orDefault(opts.Increase, DefaultAIMDIncrease),
		timeout:  orDefault(opts.Timeout, DefaultAIMDTimeout),
		limit:    b.initial,
	}
	a.out.set(a.limit)
	return a, nil
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return a.out.get() }

// Sample records one call that ran; see Algorithm.
func (a *AIMD) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dropped || rtt >= a.timeout {
		// Only a call that started after the last decrease reports on it.
		if !a.decreased || now-int64(rtt) >= a.lastDecrease {
			a.limit = clamp(a.limit*a.backoff, a.b.min, a.b.max)
			a.decreased, a.lastDecrease = true, now
		}
	} else if float64(inflight)*2 >= a.limit {
		a.limit = clamp(a.limit+a.increase/a.limit, a.b.min, a.b.max)
	}
	return a.out.set(a.limit)
}
