// Package limit holds the algorithms that compute an adaptive concurrency
// limit from samples of calls that ran. concurrency.Limiter applies them.
//
// Five algorithms are provided, all behind the same Algorithm interface:
//
//   - Default, sluice's own: a delivery-rate model (Little's law, as in BBR)
//     that tells a longer network path from congestion. Most callers should
//     use it.
//   - AIMD: additive increase, multiplicative decrease on drops and on
//     latencies above a threshold; reacts to nothing else.
//   - Vegas: a queue estimate from a no-load latency, as in Netflix's
//     concurrency-limits, with a baseline that one fast outlier cannot
//     collapse.
//   - Gradient2: Netflix's long/short latency gradient, without its creep
//     under steady load and with drops as a strong decrease.
//   - LatencyGradient: the seed design's controller (shrink by 10% when the
//     smoothed latency exceeds 1.5× the no-load latency, else grow by 0.5)
//     with a no-load latency that neither drifts up nor collapses.
//
// Time inside an algorithm comes only from the now argument of Sample, a
// clock.Nanotime reading, so a simulator in virtual time can drive them. Every
// algorithm is safe for concurrent use: Sample takes a short per-algorithm
// lock (no allocation), Limit is one atomic load.
package limit

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/invalid"
)

// Algorithm computes a concurrency limit from samples of calls that really
// ran (never from rejected or cancelled calls). Implementations are safe for
// concurrent use.
type Algorithm interface {
	// Limit returns the current limit (at least 1).
	Limit() int
	// Sample records one call that ran: now is the clock.Nanotime reading when
	// it ended, rtt how long it took, inflight how many calls were in flight
	// when it started (itself included), and dropped whether it ended in a way
	// that signals overload (a timeout, or a failure the limiter counts as
	// one). It returns the limit after the sample.
	Sample(now int64, rtt time.Duration, inflight int, dropped bool) int
}

// Defaults shared by every algorithm's options.
const (
	// DefaultInitialLimit is the limit before the first sample. 20 is the
	// value of Netflix's concurrency-limits: small enough that a cold start
	// cannot flood a fragile downstream, large enough that a healthy one is
	// not throttled while the algorithm learns.
	DefaultInitialLimit = 20
	// DefaultMinLimit is the smallest limit: one call always runs, so an
	// algorithm keeps receiving the samples it needs to recover.
	DefaultMinLimit = 1
	// DefaultMaxLimit is the largest limit: high enough not to bind for
	// ordinary services, low enough to bound memory if samples say nothing.
	DefaultMaxLimit = 1000
)

// ErrInvalidOptions is matched (errors.Is) by every error a constructor
// returns for options that cannot work. It matches sluice.ErrInvalidOptions
// too.
var ErrInvalidOptions = invalid.Sentinel("limit: invalid options")

// Compile-time checks that every algorithm implements Algorithm.
var (
	_ Algorithm = (*AIMD)(nil)
	_ Algorithm = (*Vegas)(nil)
	_ Algorithm = (*Gradient2)(nil)
	_ Algorithm = (*LatencyGradient)(nil)
	_ Algorithm = (*Default)(nil)
)

// bounds are the resolved InitialLimit, MinLimit and MaxLimit of an options
// struct.
type bounds struct {
	initial, min, max float64
}

// problems returns the Problems of the options of algorithm alg.
func problems(alg string) invalid.Problems {
	return invalid.Problems{Prefix: "limit: invalid options: " + alg, Sentinel: ErrInvalidOptions}
}

// resolveBounds applies the defaults to initial, min and max (zero means the
// default) and reports their problems to ps. A default initial limit is
// clamped into [min, max]; an explicit one must lie inside it.
func resolveBounds(ps *invalid.Problems, initial, min, max int) bounds {
	negative := false
	for _, f := range []struct {
		name string
		v    int
	}{{"InitialLimit", initial}, {"MinLimit", min}, {"MaxLimit", max}} {
		if f.v < 0 {
			ps.Addf("%s %d is negative", f.name, f.v)
			negative = true
		}
	}
	if negative {
		return bounds{}
	}
	if min == 0 {
		min = DefaultMinLimit
	}
	if max == 0 {
		max = DefaultMaxLimit
	}
	if min > max {
		ps.Addf("MinLimit %d > MaxLimit %d", min, max)
		return bounds{}
	}
	if initial == 0 {
		initial = int(clamp(DefaultInitialLimit, float64(min), float64(max)))
	} else if initial < min || initial > max {
		ps.Addf("InitialLimit %d outside [MinLimit %d, MaxLimit %d]", initial, min, max)
		return bounds{}
	}
	return bounds{initial: float64(initial), min: float64(min), max: float64(max)}
}

// clamp returns v limited to [lo, hi].
func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}

// checkRatio reports to ps an option that must lie in the open interval
// (0, 1), or be zero (the default), and reports whether it does.
func checkRatio(ps *invalid.Problems, name string, v float64) bool {
	if v != 0 && !(v > 0 && v < 1) {
		ps.Addf("%s %v outside (0, 1)", name, v)
		return false
	}
	return true
}

// checkPositive reports to ps an option that must be positive, or zero (the
// default), and reports whether it is.
func checkPositive(ps *invalid.Problems, name string, v float64) bool {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		ps.Addf("%s %v is negative or not finite", name, v)
		return false
	}
	return true
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// published is the integer limit readers see, kept apart from the
// algorithm's fractional state so that Limit is one atomic load.
type published struct {
	v atomic.Int64
}

// set publishes the fractional limit l, rounded down, and returns it.
func (p *published) set(l float64) int {
	n := int(l)
	if n < 1 {
		n = 1
	}
	p.v.Store(int64(n))
	return n
}

// get returns the last published limit.
func (p *published) get() int { return int(p.v.Load()) }

// ema returns the exponential moving average avg moved toward x by weight w;
// an unset average (zero) starts at x.
func ema(avg, x, w float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + w*(x-avg)
}

// windowWeight is the EMA weight that averages over about n samples:
// 2/(n+1), the usual span-to-weight conversion.
func windowWeight(n int) float64 {
	return 2 / (float64(n) + 1)
}

// nanos returns rtt in nanoseconds as a float, at least 1 so that a zero
// latency (a fake clock that did not move) cannot divide by zero or read as
// an unset average.
func nanos(rtt time.Duration) float64 {
	return math.Max(1, float64(rtt))
}
