package limit

import (
	"math"
	"sync"
	"time"
)

// Vegas defaults.
const (
	// DefaultVegasAlpha is the queue size, in multiples of log10(limit),
	// below which the limit grows: 3, as in Netflix's VegasLimit. Growing
	// while fewer than about 3·log10(limit) calls wait keeps a small queue so
	// the downstream never idles.
	DefaultVegasAlpha = 3.0
	// DefaultVegasBeta is the queue size, in multiples of log10(limit),
	// above which the limit shrinks: 6, as in Netflix's VegasLimit. Between
	// Alpha and Beta the limit holds still, which damps oscillation.
	DefaultVegasBeta = 6.0
	// DefaultVegasSmoothing is the number of samples the smoothed latency
	// averages over: 20, enough to cut the noise of exponential service times
	// to about a third, few enough to follow a change within a round trip or
	// two at typical limits.
	DefaultVegasSmoothing = 20
	// DefaultVegasWindow is the no-load latency's window: it forgets a
	// minimum older than this, and accepts a sustained rise (a longer path)
	// after it. Ten seconds, as BBR's min-RTT filter.
	DefaultVegasWindow = 10 * time.Second
	// DefaultVegasRebase is the ratio of the window's lowest smoothed latency
	// to the no-load latency above which a rise is accepted however
	// congested the window was: 1.5, the latency at which the queue estimate
	// reaches a third of the limit, far above Beta at any useful limit, so
	// the limit had long been shrinking without bringing the latency down.
	DefaultVegasRebase = 1.5
)

// VegasOptions configures a Vegas. The zero value is valid: every zero field
// takes its default.
type VegasOptions struct {
	// InitialLimit is the limit before the first sample. Default
	// DefaultInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit is the smallest limit. Default DefaultMinLimit.
	MinLimit int
	// MaxLimit is the largest limit. Default DefaultMaxLimit.
	MaxLimit int
	// Alpha is the queue size, in multiples of log10(limit), below which the
	// limit grows. Default DefaultVegasAlpha.
	Alpha float64
	// Beta is the queue size, in multiples of log10(limit), above which the
	// limit shrinks; it must exceed Alpha. Default DefaultVegasBeta.
	Beta float64
	// Smoothing is the number of samples the smoothed latency averages
	// over. Default DefaultVegasSmoothing.
	Smoothing int
	// Window is the no-load latency's window. Default DefaultVegasWindow.
	Window time.Duration
	// Rebase is the ratio above which a rise of the no-load latency
	// sustained for a whole Window is accepted; it must exceed 1. Default
	// DefaultVegasRebase.
	Rebase float64
}

// Vegas is TCP Vegas's delay-based limit as Netflix's concurrency-limits
// builds it: from a no-load latency and the current latency it estimates the
// calls waiting in a queue, queue = limit × (1 − noLoad/latency), and with
// l = max(1, log10(limit)), per round trip:
//
//   - on a drop, the limit shrinks by l;
//   - with fewer than half the limit in flight it holds (the limit is not
//     what bounds the load, so the sample says nothing about it);
//   - with queue ≤ l it grows by Beta·l (slow start);
//   - with queue < Alpha·l it grows by l;
//   - with queue > Beta·l it shrinks by l;
//   - otherwise it holds.
//
// The steps are per round trip, as in TCP Vegas: each sample applies
// 1/limit of its step, since about limit samples arrive per round trip.
// Netflix applies the whole step at every sample, so that in the round trip
// before a change shows, the limit moves limit times too far and oscillates.
//
// Netflix's Vegas takes the no-load latency as the minimum of raw samples
// and resets it periodically to whatever sample comes next. One fast outlier
// (a cached or failed-fast call) then collapses it, every later sample looks
// congested, and the limit falls to the floor until the next reset. This
// Vegas compares a smoothed latency (an average over Smoothing samples)
// against a no-load latency that is the windowed minimum of a latency
// smoothed five times more slowly, so an outlier moves it by at most a
// fifth of 2/(Smoothing+1) of the gap, and the noise of service times does
// not sink the minimum into its low tail. The minimum is forgotten after
// Window (the periodic probe), but it may rise only when no queue of
// Alpha·l or more was seen during the window, or when the whole window
// stayed above Rebase × the no-load latency (a longer path): a standing
// queue cannot become the new baseline.
//
// Vegas is safe for concurrent use.
type Vegas struct {
	b            bounds
	alpha, beta  float64
	smoothWeight float64

	mu     sync.Mutex // protects the fields below
	limit  float64
	smooth float64 // smoothed latency, nanoseconds
	base   baseline
	out    published
}

// NewVegas returns a Vegas configured by opts. For unusable opts it returns
// an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every unusable option.
func NewVegas(opts VegasOptions) (*Vegas, error) {
	ps := problems("Vegas")
	b := resolveBounds(&ps, opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	valid := true
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"Alpha", opts.Alpha}, {"Beta", opts.Beta}, {"Smoothing", float64(opts.Smoothing)},
		{"Window", float64(opts.Window)}, {"Rebase", opts.Rebase},
	} {
		valid = checkPositive(&ps, c.name, c.v) && valid
	}
	alpha, beta := orDefault(opts.Alpha, DefaultVegasAlpha), orDefault(opts.Beta, DefaultVegasBeta)
	rebase := orDefault(opts.Rebase, DefaultVegasRebase)
	if valid && beta <= alpha {
		ps.Addf("Beta %v must exceed Alpha %v", beta, alpha)
	}
	if valid && rebase <= 1 {
		ps.Addf("Rebase %v must exceed 1", rebase)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	v := &Vegas{
		b:            b,
		alpha:        alpha,
		beta:         beta,
		smoothWeight: windowWeight(orDefault(opts.Smoothing, DefaultVegasSmoothing)),
		limit:        b.initial,
		base: newBaseline(orDefault(opts.Window, DefaultVegasWindow), rebase,
			orDefault(opts.Smoothing, DefaultVegasSmoothing)),
	}
	v.out.set(v.limit)
	return v, nil
}

// Limit returns the current limit.
func (v *Vegas) Limit() int { return v.out.get() }

// Sample records one call that ran; see Algorithm.
func (v *Vegas) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	x := nanos(rtt)
	v.smooth = ema(v.smooth, x, v.smoothWeight)
	noLoad := v.base.update(now, x)

	l := math.Max(1, math.Log10(v.limit))
	queue := v.limit * (1 - noLoad/v.smooth)
	if queue >= v.alpha*l {
		v.base.markCongested()
	}
	// Each step is per round trip, as in TCP Vegas: a sample applies
	// 1/limit of it, since about limit samples arrive per round trip.
	per := 1 / v.limit
	switch {
	case dropped:
		v.limit -= l * per
	case float64(inflight)*2 < v.limit:
		// Application-limited: hold.
	case queue <= l:
		v.limit += v.beta * l * per
	case queue < v.alpha*l:
		v.limit += l * per
	case queue > v.beta*l:
		v.limit -= l * per
	}
	v.limit = clamp(v.limit, v.b.min, v.b.max)
	return v.out.set(v.limit)
}
