package limit

import (
	"math"
	"sync"
	"time"
)

// Gradient2 defaults.
const (
	// DefaultGradient2Tolerance is how far the short-term latency may exceed
	// the long-term one before the limit shrinks: 1.5, Netflix's rttTolerance.
	DefaultGradient2Tolerance = 1.5
	// DefaultGradient2Smoothing is the weight of each new limit in the
	// smoothed limit: 0.2, Netflix's default, so a step takes effect over
	// about five samples.
	DefaultGradient2Smoothing = 0.2
	// DefaultGradient2LongWindow is the long-term latency's averaging
	// window, in samples: 600, Netflix's default.
	DefaultGradient2LongWindow = 600
	// DefaultGradient2ShortWindow is the short-term latency's averaging
	// window, in samples: 10, enough to damp the noise of one sample, short
	// enough to see a queue within a round trip.
	DefaultGradient2ShortWindow = 10
	// DefaultGradient2QueueSize is the queue the limit allows above what the
	// gradient keeps: 4 calls, Netflix's default.
	DefaultGradient2QueueSize = 4.0
	// DefaultGradient2DropRatio multiplies the limit on a drop: 0.8. A
	// timeout says the queue is already too long, which the latency gradient
	// (capped at halving per sample but smoothed) sees only slowly.
	DefaultGradient2DropRatio = 0.8
	// DefaultGradient2BindingRatio is the fraction of the limit in flight at
	// which the limit binds: 0.9. Only then may it grow; a limit that grows
	// while unused outgrows the load and fills a queue when load comes.
	DefaultGradient2BindingRatio = 0.9
)

// Gradient2Options configures a Gradient2. The zero value is valid: every
// zero field takes its default.
type Gradient2Options struct {
	// InitialLimit is the limit before the first sample. Default
	// DefaultInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit is the smallest limit. Default DefaultMinLimit.
	MinLimit int
	// MaxLimit is the largest limit. Default DefaultMaxLimit.
	MaxLimit int
	// Tolerance is the ratio of short-term to long-term latency tolerated
	// before the limit shrinks; at least 1. Default DefaultGradient2Tolerance.
	Tolerance float64
	// Smoothing is the weight of each new limit, in (0, 1]. Default
	// DefaultGradient2Smoothing.
	Smoothing float64
	// LongWindow is the long-term latency's window, in samples. It is also
	// how many samples the short-term latency must stay above Tolerance ×
	// the long-term one before the long-term latency is rebased. Default
	// DefaultGradient2LongWindow.
	LongWindow int
	// ShortWindow is the short-term latency's window, in samples. Default
	// DefaultGradient2ShortWindow.
	ShortWindow int
	// QueueSize is the queue, in calls, the limit allows. Default
	// DefaultGradient2QueueSize.
	QueueSize float64
	// DropRatio multiplies the limit on a drop, in (0, 1). Default
	// DefaultGradient2DropRatio.
	DropRatio float64
}

// Gradient2 is Netflix's Gradient2Limit: it compares a short-term average
// latency with a long-term one and scales the limit by their ratio,
//
//	gradient = clamp(Tolerance × long / short, 0.5, 1)
//	newLimit = limit × gradient + QueueSize
//	limit    = limit × (1 − Smoothing) + newLimit × Smoothing   (per round trip)
//
// and decays the long-term latency by 5% per sample while it exceeds twice
// the short-term one (a recovery from a load spike). Smoothing applies per
// round trip: a sample moves the limit Smoothing/limit of the way, since a
// change shows only a round trip later (Netflix applies it per sample and
// overshoots).
//
// Netflix's version has two known faults, both fixed here:
//
//   - It creeps upward under steady load. The long-term latency averages
//     every sample, so it follows the queue the limit itself builds: the
//     gradient stays at 1, QueueSize is added again and again, the queue
//     grows, the long-term latency follows, until the limit reaches its
//     maximum. Here the long-term latency learns only from samples of
//     clearly application-limited load (fewer than half the limit in
//     flight), whose latency is the downstream's own and not a queue the
//     limit admitted; and the limit grows only while it binds (at least
//     0.9 × the limit of a round trip ago in flight), so it cannot outgrow
//     the load. Netflix lets it grow while half of it is used. A real rise
//     of the path's latency while the limit binds is learned by a rebase:
//     when the short-term latency has stayed above 2 × Tolerance × the
//     long-term one (the gradient at its floor) for LongWindow samples in a
//     row, halving did not help, and the long-term latency is reset to the
//     short-term one. A congested equilibrium keeps the gradient near
//     1 − QueueSize/limit, well above the floor.
//   - It ignores drops: a timeout is a sample like any other. Here a drop
//     multiplies the limit by DropRatio, at most once per round trip (only a
//     call started after the last decrease can report on it).
//
// Gradient2 is safe for concurrent use.
type Gradient2 struct {
	b           bounds
	tolerance   float64
	smoothing   float64
	longWeight  float64
	shortWeight float64
	longWindow  int
	queue       float64
	dropRatio   float64

	mu           sync.Mutex // protects the fields below
	limit        float64
	short, long  float64 // average latencies, nanoseconds
	lagged       float64 // the limit averaged over about one round trip
	samples      int     // samples seen, up to the warm-up count
	high         int     // consecutive samples with the gradient at its floor
	decreased    bool    // whether a drop ever decreased the limit
	lastDecrease int64   // now of the last drop decrease
	out          published
}

// gradient2Warmup is how many samples the long-term latency averages plainly
// (whatever the limit) before it becomes an EMA, as in Netflix's
// ExpAvgMeasurement. Netflix averages 10; but the first calls to complete
// are the fastest of those started together, so a short warm-up learns a
// baseline far below the mean latency. 100 samples span several
// generations of calls.
const gradient2Warmup = 100

// NewGradient2 returns a Gradient2 configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every unusable option.
func NewGradient2(opts Gradient2Options) (*Gradient2, error) {
	ps := problems("Gradient2")
	b := resolveBounds(&ps, opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"LongWindow", float64(opts.LongWindow)}, {"ShortWindow", float64(opts.ShortWindow)}, {"QueueSize", opts.QueueSize},
	} {
		checkPositive(&ps, c.name, c.v)
	}
	checkRatio(&ps, "DropRatio", opts.DropRatio)
	if !(opts.Smoothing >= 0 && opts.Smoothing <= 1) {
		ps.Addf("Smoothing %v outside (0, 1]", opts.Smoothing)
	}
	tolerance := orDefault(opts.Tolerance, DefaultGradient2Tolerance)
	if !(tolerance >= 1) || math.IsInf(tolerance, 0) {
		ps.Addf("Tolerance %v must be a finite number of at least 1", tolerance)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	g := &Gradient2{
		b:           b,
		tolerance:   tolerance,
		smoothing:   orDefault(opts.Smoothing, DefaultGradient2Smoothing),
		longWindow:  orDefault(opts.LongWindow, DefaultGradient2LongWindow),
		shortWeight: windowWeight(orDefault(opts.ShortWindow, DefaultGradient2ShortWindow)),
		queue:       orDefault(opts.QueueSize, DefaultGradient2QueueSize),
		dropRatio:   orDefault(opts.DropRatio, DefaultGradient2DropRatio),
		limit:       b.initial,
	}
	g.longWeight = windowWeight(g.longWindow)
	g.out.set(g.limit)
	return g, nil
}

// Limit returns the current limit.
func (g *Gradient2) Limit() int { return g.out.get() }

// Sample records one call that ran; see Algorithm.
func (g *Gradient2) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	x := nanos(rtt)
	g.short = ema(g.short, x, g.shortWeight)
	// A call that started a round trip ago was admitted under the limit of
	// then, which lagged reflects when the limit has been growing.
	g.lagged = ema(g.lagged, g.limit, 1/g.limit)
	binding := float64(inflight) >= DefaultGradient2BindingRatio*math.Floor(min(g.limit, g.lagged))
	switch {
	case g.samples < gradient2Warmup:
		g.samples++
		g.long += (x - g.long) / float64(g.samples)
	case float64(inflight)*2 < g.limit:
		// The long-term latency learns only from samples of clearly
		// application-limited load (under half the limit in flight), whose
		// latency is the downstream's own, not a queue the limit admitted.
		g.long = ema(g.long, g.short, g.longWeight)
	}
	if g.long > 2*g.short {
		g.long *= 0.95 // recovering from a spike: forget it faster
	}
	if g.short >= 2*g.tolerance*g.long {
		// The gradient is at its floor: the limit halves at every sample
		// and the latency does not come down.
		g.high++
		if g.high >= g.longWindow {
			g.long, g.high = g.short, 0 // sustained: the path changed
		}
	} else {
		g.high = 0
	}

	switch {
	case dropped:
		if !g.decreased || now-int64(rtt) >= g.lastDecrease {
			g.limit *= g.dropRatio
			g.decreased, g.lastDecrease = true, now
		}
	case !binding:
		// The limit is not what bounds the load: hold. (Netflix holds only
		// below half the limit, so the limit can outgrow the load and its
		// queue become the long-term latency.)
	default:
		gradient := clamp(g.tolerance*g.long/g.short, 0.5, 1)
		next := g.limit*gradient + g.queue
		// Smoothing applies per round trip (a sample moves the limit
		// Smoothing/limit of the way), since the effect of a change is
		// seen only a round trip later.
		w := g.smoothing / g.limit
		g.limit = g.limit*(1-w) + next*w
	}
	g.limit = clamp(g.limit, g.b.min, g.b.max)
	return g.out.set(g.limit)
}
