package limit

import (
	"math"
	"sync"
	"time"
)

// LatencyGradient defaults.
const (
	// DefaultLatencyGradientTolerance is the ratio of smoothed to no-load
	// latency above which the limit shrinks: 1.5, the seed design's value.
	// Half a service time of queueing keeps the downstream busy without
	// letting the wait dominate the latency.
	DefaultLatencyGradientTolerance = 1.5
	// DefaultLatencyGradientBackoff multiplies the limit when the latency is
	// too high: 0.9, the seed design's 10% shrink.
	DefaultLatencyGradientBackoff = 0.9
	// DefaultLatencyGradientIncrease is added to the limit per round trip
	// while the latency is fine: 0.5, the seed design's value (fractions
	// accumulate, so two round trips add one call).
	DefaultLatencyGradientIncrease = 0.5
	// DefaultLatencyGradientSmoothing is the number of samples the smoothed
	// latency averages over: 100. A 10% shrink at every noise peak above
	// Tolerance outweighs a growth of 0.5 per round trip, so the smoothed
	// latency must be quiet: over 100 samples the noise of exponential
	// service times is about a seventh of the mean, well inside the 1.5×
	// Tolerance, and a change still shows within a few round trips.
	DefaultLatencyGradientSmoothing = 100
	// DefaultLatencyGradientWindow is the no-load latency's window: 10 s,
	// as BBR's min-RTT filter. A minimum older than that is forgotten if no
	// congestion was seen, and a rise sustained that long is accepted.
	DefaultLatencyGradientWindow = 10 * time.Second
)

// latencyGradientSettle is the standard error, as a fraction of the mean,
// at which the no-load latency's warm-up settles (see LatencyGradient).
const latencyGradientSettle = 0.02

// LatencyGradientOptions configures a LatencyGradient. The zero value is
// valid: every zero field takes its default.
type LatencyGradientOptions struct {
	// InitialLimit is the limit before the first sample. Default
	// DefaultInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit is the smallest limit. Default DefaultMinLimit.
	MinLimit int
	// MaxLimit is the largest limit. Default DefaultMaxLimit.
	MaxLimit int
	// Tolerance is the ratio of smoothed to no-load latency above which the
	// limit shrinks; it must exceed 1. Default
	// DefaultLatencyGradientTolerance.
	Tolerance float64
	// Backoff multiplies the limit when the latency is too high, in (0, 1).
	// Default DefaultLatencyGradientBackoff.
	Backoff float64
	// Increase is added per round trip of good samples (Increase/limit per
	// sample). Default DefaultLatencyGradientIncrease.
	Increase float64
	// Smoothing is the number of samples the smoothed latency averages
	// over. Default DefaultLatencyGradientSmoothing.
	Smoothing int
	// Window is the no-load latency's window. Default
	// DefaultLatencyGradientWindow.
	Window time.Duration
}

// LatencyGradient is the seed design's controller. It keeps a no-load
// latency and a smoothed latency (an exponential average over Smoothing
// samples); when the smoothed latency exceeds Tolerance × the no-load latency
// or a call drops, it multiplies the limit by Backoff, otherwise it adds
// Increase; the limit is clamped to [MinLimit, MaxLimit].
//
// Four changes make it work where the seed did not:
//
//   - The no-load latency is a windowed minimum of a latency smoothed five
//     times more slowly still, not of raw samples, so it cannot be
//     poisoned: a near-zero sample moves it by a fraction of a percent (the
//     seed let a rejected call's zero latency collapse it, after which
//     everything looked congested).
//   - It does not drift up toward the loaded latency under sustained
//     congestion, so congestion keeps being seen: when the window rolls over
//     it may rise only if no congestion was seen during the window, or if
//     the smoothed latency stayed above Tolerance × the no-load latency for
//     the whole window even though the limit kept shrinking (the path got
//     longer, or the limit is at its floor and cannot do more).
//   - It shrinks at most once per round trip: samples of calls that started
//     before the last decrease say nothing about it. The seed shrank at
//     every sample of the round trip in flight and overshot to the floor.
//   - It grows by Increase per round trip, not per sample, and only while
//     at least half the limit is in flight: a growth per sample moves the
//     limit limit times too far before its effect shows, and an idle
//     service would grow an unbounded limit.
//
// LatencyGradient is safe for concurrent use.
//
// Its no-load latency warms up on a plain mean of the first samples (a few
// hundred with the default Smoothing). Once that mean is known to within 2%
// (its standard error, judged from four samples on), the no-load latency
// stops following it up and keeps the minimum seen, as in the seed: so a
// service that answers consistently and then slows down within its first
// samples is seen congested at once (the seed's own scenario: four 50 ms
// calls, then 500 ms ones), while the noisy latency of a typical service,
// whose mean is not known that well before the warm-up ends, is averaged
// as before instead of being held at a low first estimate.
type LatencyGradient struct {
	b            bounds
	tolerance    float64
	backoff      float64
	increase     float64
	smoothWeight float64

	mu           sync.Mutex // protects the fields below
	limit        float64
	smooth       float64 // nanoseconds
	base         baseline
	decreased    bool  // whether the limit was ever decreased
	lastDecrease int64 // now of the last decrease
	out          published
}

// NewLatencyGradient returns a LatencyGradient configured by opts. For
// unusable opts it returns an error matching sluice.ErrInvalidOptions and
// ErrInvalidOptions (errors.Is) that names every unusable option.
func NewLatencyGradient(opts LatencyGradientOptions) (*LatencyGradient, error) {
	ps := problems("LatencyGradient")
	b := resolveBounds(&ps, opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"Increase", opts.Increase}, {"Smoothing", float64(opts.Smoothing)}, {"Window", float64(opts.Window)},
	} {
		checkPositive(&ps, c.name, c.v)
	}
	checkRatio(&ps, "Backoff", opts.Backoff)
	tolerance := orDefault(opts.Tolerance, DefaultLatencyGradientTolerance)
	if !(tolerance > 1) || math.IsInf(tolerance, 0) {
		ps.Addf("Tolerance %v must be a finite number above 1", tolerance)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	g := &LatencyGradient{
		b:            b,
		tolerance:    tolerance,
		backoff:      orDefault(opts.Backoff, DefaultLatencyGradientBackoff),
		increase:     orDefault(opts.Increase, DefaultLatencyGradientIncrease),
		smoothWeight: windowWeight(orDefault(opts.Smoothing, DefaultLatencyGradientSmoothing)),
		limit:        b.initial,
	}
	g.base = newBaseline(orDefault(opts.Window, DefaultLatencyGradientWindow), g.tolerance,
		orDefault(opts.Smoothing, DefaultLatencyGradientSmoothing))
	g.base.settle = latencyGradientSettle
	g.out.set(g.limit)
	return g, nil
}

// Limit returns the current limit.
func (g *LatencyGradient) Limit() int { return g.out.get() }

// NoLoadLatency returns the current no-load latency estimate, zero before
// the first sample.
func (g *LatencyGradient) NoLoadLatency() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Duration(g.base.value)
}

// Sample records one call that ran; see Algorithm.
func (g *LatencyGradient) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	x := nanos(rtt)
	g.smooth = ema(g.smooth, x, g.smoothWeight)
	noLoad := g.base.update(now, x)
	congested := g.smooth > g.tolerance*noLoad
	if congested {
		g.base.markCongested()
	}
	switch {
	case dropped || congested:
		if !g.decreased || now-int64(rtt) >= g.lastDecrease {
			g.limit *= g.backoff
			g.decreased, g.lastDecrease = true, now
		}
	case float64(inflight)*2 >= g.limit:
		g.limit += g.increase / g.limit
	}
	g.limit = clamp(g.limit, g.b.min, g.b.max)
	return g.out.set(g.limit)
}
