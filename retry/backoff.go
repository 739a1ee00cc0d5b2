package retry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of the backoff constructors and of Options.
const (
	// DefaultInitial is the first delay of the exponential and decorrelated
	// backoffs, as the gateway's retry.backoff.initial.
	DefaultInitial = 50 * time.Millisecond
	// DefaultMax caps every delay of the exponential and decorrelated
	// backoffs, as the gateway's retry.backoff.max; it is also the default
	// of Options.MaxRetryAfter. A retry waits inside its caller's call:
	// a downstream that asks for more patience than a second gets its
	// answer, Retry-After included, handed back to the caller instead of
	// holding the call (see docs/defaults.md).
	DefaultMax = time.Second
	// DefaultMultiplier is how much the exponential backoff grows per attempt.
	DefaultMultiplier = 2.0
)

// Backoff computes how long to wait before the next attempt of a call.
// Implementations are safe for concurrent use: one Backoff serves every call
// of a policy.
type Backoff interface {
	// Delay returns the wait before attempt number attempt+1, once attempt
	// attempts (attempt ≥ 1) have failed. prev is what Delay returned before
	// the previous retry of the same call, and zero before its first retry.
	// A negative delay counts as zero.
	Delay(attempt int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a function to Backoff.
type BackoffFunc func(attempt int, prev time.Duration) time.Duration

// Delay returns f(attempt, prev).
func (f BackoffFunc) Delay(attempt int, prev time.Duration) time.Duration { return f(attempt, prev) }

// Jitter says how the exponential backoff randomises its delays. Jitter
// spreads retries out so that callers that failed together do not retry
// together. The zero value is FullJitter.
type Jitter uint8

const (
	// FullJitter draws each delay uniformly from [0, d), where d is the
	// un-jittered exponential delay. It spreads retries the most
	// (the "full jitter" of the AWS Architecture Blog's "Exponential Backoff
	// and Jitter").
	FullJitter Jitter = iota
	// EqualJitter draws each delay uniformly from [d/2, d): never less than
	// half the exponential delay.
	EqualJitter
	// NoJitter uses the exponential delay d itself.
	NoJitter
)

// String returns "full", "equal" or "none".
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case NoJitter:
		return "none"
	}
	return "unknown"
}

// MarshalText returns String's text.
func (j Jitter) MarshalText() ([]byte, error) { return []byte(j.String()), nil }

// UnmarshalText decodes "full", "equal" or "none" (a configuration's
// spelling of a Jitter).
func (j *Jitter) UnmarshalText(b []byte) error {
	for c := FullJitter; c <= NoJitter; c++ {
		if string(b) == c.String() {
			*j = c
			return nil
		}
	}
	return fmt.Errorf("%q is not one of full, equal, none", b)
}

func (j Jitter) valid() bool { return j <= NoJitter }

// Constant returns a Backoff that always waits d. A negative d means zero.
func Constant(d time.Duration) Backoff { return constant(max(d, 0)) }

type constant time.Duration

func (c constant) Delay(int, time.Duration) time.Duration { return time.Duration(c) }

// Exponential returns a Backoff that waits initial·multiplier^(attempt-1),
// capped at maxDelay, then applies jitter with random numbers from rnd.
//
// initial ≤ 0 means DefaultInitial; maxDelay ≤ 0 means DefaultMax, and a
// maxDelay below initial is raised to initial; a multiplier below 1 (zero
// included) means DefaultMultiplier; an unknown jitter means FullJitter. rnd
// returns numbers in [0, 1) and must be safe for concurrent use if the
// Backoff is shared; nil means math/rand/v2's Float64.
func Exponential(initial, maxDelay time.Duration, multiplier float64, jitter Jitter, rnd func() float64) Backoff {
	initial, maxDelay = bounds(initial, maxDelay)
	if !(multiplier >= 1) || math.IsInf(multiplier, 0) {
		multiplier = DefaultMultiplier
	}
	if !jitter.valid() {
		jitter = FullJitter
	}
	return &exponential{initial: initial, max: maxDelay, mult: multiplier, jitter: jitter, rnd: randOr(rnd)}
}

type exponential struct {
	initial, max time.Duration
	mult         float64
	jitter       Jitter
	rnd          func() float64
}

func (e *exponential) Delay(attempt int, _ time.Duration) time.Duration {
	d := e.max
	if f := float64(e.initial) * math.Pow(e.mult, float64(max(attempt, 1)-1)); f < float64(e.max) {
		d = time.Duration(f)
	}
	switch e.jitter {
	case FullJitter:
		return time.Duration(unit(e.rnd) * float64(d))
	case EqualJitter:
		return d/2 + time.Duration(unit(e.rnd)*float64(d-d/2))
	}
	return d
}

// DecorrelatedJitter returns the "decorrelated jitter" Backoff of the AWS
// Architecture Blog's "Exponential Backoff and Jitter": each delay is drawn
// uniformly from [initial, 3·prev), capped at maxDelay, where prev is the
// previous delay (initial before the first retry). Delays grow about as fast
// as an exponential backoff's but each depends on the last, not on the
// attempt number.
//
// initial ≤ 0 means DefaultInitial; maxDelay ≤ 0 means DefaultMax, and a
// maxDelay below initial is raised to initial. rnd is as for Exponential.
func DecorrelatedJitter(initial, maxDelay time.Duration, rnd func() float64) Backoff {
	initial, maxDelay = bounds(initial, maxDelay)
	return &decorrelated{initial: initial, max: maxDelay, rnd: randOr(rnd)}
}

type decorrelated struct {
	initial, max time.Duration
	rnd          func() float64
}

func (d *decorrelated) Delay(_ int, prev time.Duration) time.Duration {
	hi := 3 * float64(max(prev, d.initial))
	next := float64(d.initial) + unit(d.rnd)*(hi-float64(d.initial))
	if next >= float64(d.max) {
		return d.max
	}
	return time.Duration(next)
}

// bounds applies the defaults of initial and maxDelay.
func bounds(initial, maxDelay time.Duration) (time.Duration, time.Duration) {
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMax
	}
	return initial, max(maxDelay, initial)
}

func randOr(rnd func() float64) func() float64 {
	if rnd == nil {
		return rand.Float64
	}
	return rnd
}

// unit calls rnd and clamps what it returns into [0, 1], so that a faulty
// source cannot produce negative or runaway delays.
func unit(rnd func() float64) float64 {
	u := rnd()
	if !(u > 0) { // also catches NaN
		return 0
	}
	return min(u, 1)
}
