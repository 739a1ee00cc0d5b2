package limit

import (
	"math"
	"sync"
	"time"
)

// Default's defaults.
const (
	// DefaultHeadroom is the smallest queue, as a fraction of the
	// estimated knee (delivery rate × no-load latency), that Default keeps
	// while the downstream is saturated: 0.05. The queue grows above it
	// with the measured overload (see Default). It was 0.1 for every
	// overload; at 3× with 8 workers that put the limit at 9.5, half the
	// time outside ±10% of the optimum, while one call of queue already
	// keeps 98% of the workers busy there.
	DefaultHeadroom = 0.05
	// DefaultSlack is the ratio of limit to smoothed in-flight count Default
	// keeps while its limit does not bind: 2, BBR's cwnd gain. An
	// unsaturated service needs no protection, so the limit leaves room
	// for bursts and for the rise of in-flight calls a longer path brings.
	DefaultSlack = 2.0
	// DefaultRoundSamples is the fewest samples in a measurement round: 128.
	// A round also lasts at least one smoothed round trip. With 128 samples
	// the mean latency and the delivery rate of one round vary by about 9%
	// for exponential service times, below the 10% Headroom the control
	// must resolve; fewer make the decisions noisy, more make them slow.
	DefaultRoundSamples = 128
	// DefaultDrainEvery is the most binding rounds between two drains (see
	// Default): 128, so that once the no-load latency is settled drains
	// cost under 1% of goodput and add little variation to the limit.
	DefaultDrainEvery = 128
)

// DefaultOptions configures a Default. The zero value is valid: every zero
// field takes its default.
type DefaultOptions struct {
	// InitialLimit is the limit before the first sample. Default
	// DefaultInitialLimit, clamped into [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit is the smallest limit. Default DefaultMinLimit.
	MinLimit int
	// MaxLimit is the largest limit. Default DefaultMaxLimit.
	MaxLimit int
	// Headroom is the smallest queue kept while saturated, as a fraction
	// of the estimated optimum. Default DefaultHeadroom.
	Headroom float64
	// Slack is the ratio of limit to smoothed in-flight count kept while
	// the limit does not bind; at least 1. Default DefaultSlack.
	Slack float64
	// RoundSamples is the fewest samples in a measurement round. Default
	// DefaultRoundSamples.
	RoundSamples int
	// DrainEvery is the most binding rounds between two drains. Default
	// DefaultDrainEvery.
	DrainEvery int
}

// Default is sluice's own limit algorithm, and the one most callers should
// use. It models the downstream the way BBR models a network path, with
// Little's law: in flight = delivery rate × latency. Below its capacity a
// downstream's delivery rate grows with the calls in flight and its latency
// does not; at capacity the delivery rate stops growing and every further
// call waits in a queue, so the latency grows in proportion. The best limit
// is the knee between the two, capacity × no-load latency, plus Headroom.
//
// # Why not latency alone
//
// Latency-based algorithms (Vegas, Gradient2, LatencyGradient) compare the
// latency with a remembered no-load latency. When the path gets longer (a
// slower network, a farther replica) at unchanged capacity, they read the
// longer latency as a queue and shed, though the knee has moved right: the
// same delivery rate now needs proportionally more calls in flight. In
// overload simulations they lose 60–90% of goodput at 80% load that way.
// Default tells a queue from a path by what each does when more calls are let
// in: a queue's latency grows with them and the delivery rate does not; a
// path's delivery rate grows with them at the same latency.
//
// # Measurement
//
// Samples are grouped into rounds of at least RoundSamples samples lasting
// at least a smoothed round trip. Each round gives a delivery rate
// (completions per second), a mean latency (a mean, because Little's law
// needs means and because the minimum of raw samples collapses on one fast
// outlier), a mean in-flight count, the fraction of samples that dropped and
// the fraction that found the limit reached. From them Default keeps the
// maximum smoothed delivery rate of the last 10 rounds, a long-run delivery
// rate, a smoothed in-flight count, and the no-load latency.
//
// The no-load latency is the mean latency of the calls that cannot have
// queued: a call admitted with at most the knee (delivery rate × no-load
// latency) in flight, itself included, found a worker free, whatever the
// load. Every such call of every round counts, with equal weight, over the
// last 16384 of them, so the estimate's noise falls with the samples
// instead of resting on one measure: one drain's two rounds vary by about
// 6%, more than Headroom, and a first drain that read 9% low used to hold
// the limit below the workers for a whole run. Under steady overload a
// third to a half of the calls are admitted at or below the knee; a drain
// (below) adds a few hundred more. Rounds that may have lost capacity
// (ambiguous, below) and probes add none, and a drain's calls count only
// when the drain found no change. Because a no-load latency measured low
// costs goodput (the limit sinks below the knee) while one measured high
// only costs a little latency, the limit's targets use it plus half its
// standard error (3% after the first drain, under 1% later). A drain that
// differs from it by more than a quarter replaces it (a changed path), and
// a drain that finds the latency a quarter higher probes first, since a
// capacity lost during the drain looks the same. Until a drain has measured
// it, the no-load latency is the first round's, which may have queued (a
// limit that starts far above the knee): Default then drains every four
// rounds, binding or not, until a drain finds no queue; a limit whose
// in-flight count stays under half of it is taken as making no queue.
//
// # Control, once per round
//
// Free (the limit does not bind): the load is below what the limit admits.
// After two free rounds without a queue the limit moves toward the largest of
// Slack × the smoothed in-flight count, the knee × (1 + Headroom), and
// InitialLimit, and, while the limit did not bind in most recent rounds
// (a downstream that is not saturated on average), 1.5 × the largest
// in-flight count of recent rounds, a peak that fades by 1/64 a round; with
// a queue it holds. A free round in which some calls found
// the limit reached, or a binding round right after a free one, while the
// long-run delivery rate is under 85% of the maximum, is a burst on an
// unsaturated downstream that its queue will drain: the limit grows by a
// quarter instead of shedding it. An overload binds round after round, so it
// cannot trigger this twice. So at 80% load, bursty or not, the limit stays
// out of the way (a burst of 1.2× for ~100 ms queues 16 calls on 16
// workers; the limit then sits at 3–5× the knee), and a low request rate
// never meets it.
//
// Binding (the mean in-flight count is at least 85% of the limit, or at
// least a fifth of the round's calls found the limit reached: at moderate
// overload the in-flight count sags below the limit between arrivals while
// the limit still bounds the load; for two rounds in a row): the limit
// moves toward the larger of two targets, smoothed: the limit × (1 +
// Headroom) × no-load latency / latency, and the round's knee (in-flight
// count × no-load latency / latency, which by Little's law is delivery rate
// × no-load latency) plus the overload queue. The first moves the in-flight
// count to the knee × (1 + Headroom): below the knee, Headroom more than
// now, so the limit grows geometrically until the delivery rate stops
// following — which is how a raised capacity is found. The second puts the
// limit at the knee plus the queue that keeps the workers busy at the
// measured overload ρ ≈ 1/(1 − fraction of calls that found the limit
// reached): the in-flight count falls below the limit one call at a time
// with odds 1/ρ, so about ln 10 / ln ρ − 1 calls (one at 3×, three to four
// at 1.5×, at most 45% of the knee) leave the workers idle under 10% of
// the time. Heavy overload refills a freed slot at once and needs almost no
// queue; moderate overload needs more. Neither target may take the limit
// below (1 + Headroom) × no-load latency × the highest long-run delivery
// rate it has reached, a peak that fades by 1/512 a round and restarts
// when a lost capacity is confirmed: below the knee the latency says
// nothing about the limit, and without that floor a no-load latency
// measured a few percent low let the limit sink far below the knee.
//
// Ambiguous (binding, latency above 1.1 × the no-load latency,
// smoothed delivery rate under 80% of the maximum): the capacity fell, or
// the path got longer and the limit now throttles the delivery rate, or the
// no-load latency is too low and shrinking would only throttle it more. The
// limit holds for a round (one whose calls may have started before the
// change). What follows depends on what came before:
//
//   - The limit bound at full delivery rate, under twice the no-load
//     latency, for two rounds before (an overload near the knee; a longer
//     path that grows into a generous limit shows at once at twice the
//     latency): the downstream slowed under an unchanged load, most likely
//     a lost capacity. After a second such round (or the first, if the rate
//     halved and the latency doubled) the limit is cut at once to the knee
//     the round measures, delivery rate × no-load latency × (1 + Headroom),
//     as a drain that may keep its limit (below). If instead the latency
//     stays high while the delivery rate falls with the cut, the path got
//     longer: the drain rebases and restores the limit, scaled. A halved
//     capacity is thus settled two rounds after it shows, without first
//     raising the limit.
//   - Otherwise (the load grew into the limit, as a longer path at 80% load
//     does), Default probes: it measures a round, raises the limit by half,
//     lets a round settle and measures two. If the latency grew with the
//     calls in flight (elasticity ≥ 0.5) it is a queue: the rate window
//     restarts at the measured rate and the limit is set to the new knee ×
//     (1 + Headroom). If not and the latency is more than a quarter above
//     the no-load latency, the path changed: the no-load latency is rebased
//     to the measured latency and the limit scaled by their ratio, as
//     Little's law says the same delivery rate needs — unless the calls
//     admitted below the old knee (which cannot queue, but take a longer
//     path too) kept nearer the old no-load latency: a lull in the
//     arrivals before the probe looked like a path at 1.2× overload. If
//     neither, it was noise, and the raise is undone. A longer path costs a few rounds of
//     shedding instead of a lasting loss.
//
// Drain: after DrainEvery binding rounds (32 after the no-load latency was
// replaced, doubling with each drain up to DrainEvery, so that it is
// refined quickly at first and cheaply later), the limit drops to 3/4 for
// three rounds, below the knee, and the drain's unqueued calls join the
// no-load latency as above; the limit and the smoothed delivery rate are
// then restored (the drain's low rate would make the rounds after it look
// like a lost capacity). Like BBR's ProbeRTT it keeps the baseline honest
// while the limit always binds.
// A drain while the no-load latency was never measured, and a cut after a
// lost capacity, may keep their lowered limit: if the latency fell with the
// in-flight count (elasticity ≥ 0.5) while the delivery rate held (within
// 85%), the lowered limit still queued, so it stays, the no-load latency
// becomes at most the drain's latency, and the next drain lowers it again.
// So a limit that starts far above the knee comes down by a quarter every
// few rounds until a drain finds the knee. If such a drain is unclear and
// its latency is still a quarter above the no-load latency, the lowered
// limit stays too.
//
// Drops: a round in which at least 1% of the samples dropped multiplies the
// limit by 1 − drop fraction, at most halving it: a timeout is overload
// whatever the latencies say.
//
// In a simulation (package sim) with 16 workers and exponential service
// times this keeps 96–100% of capacity as goodput at 1.5× to 10× overload,
// p99 within 10% of the no-load p99, with the limit 5–25% above the worker
// count (coefficient of variation 5–10%); settles a halved capacity within
// 0.5 s at 1 ms service and within 0–14 s (up to about 40 rounds) at 20
// ms; sheds under 1% of the arrivals when the path's latency quadruples at
// 80% load (latency-based algorithms shed 15–60%) and under 1% of bursty
// 80% load, at a p99 about 1.3× the no-load p99 there.
//
// What each tuning round tried, measured and rejected is recorded in
// TUNING.md next to this file.
//
// Default is safe for concurrent use: Sample adds to the round under a short
// lock and runs the state machine (a few dozen floating-point operations)
// once per round; Limit is one atomic load. Neither allocates.
type Default struct {
	b          bounds
	headroom   float64
	slack      float64
	minSamples int
	drainEvery int

	mu sync.Mutex // protects the fields below
	// The round being accumulated.
	start           int64
	n, drops, full  int
	sumRtt, sumInfl float64
	sumSq           float64 // sum of squared latencies, ns²
	cv2             float64 // squared coefficient of variation of latencies, smoothed
	peakInfl        int     // the round's largest in-flight count
	lowN            int     // the round's samples admitted with at most lowCut in flight
	lowSum          float64 // and the sum of their latencies
	lowCut          float64 // in-flight count up to which a call cannot have queued
	baseN           float64 // samples the no-load latency averages, at most defaultBaseSamples
	pendLow         float64 // lowN of the probe or drain under way
	pendSum         float64 // and the sum of their latencies
	started         bool
	limit           float64
	prevLimit       float64 // the limit in force during the last round
	ph              phase
	rtt             float64 // smoothed round latency, nanoseconds
	rate            float64 // smoothed delivery rate, per nanosecond
	rateLong        float64 // delivery rate smoothed over many rounds
	inflight        float64 // smoothed in-flight count
	fullLong        float64 // fraction of binding rounds' calls that found the limit reached, smoothed
	base            float64 // no-load latency, nanoseconds
	baseFresh       bool    // base was measured without a queue
	capPeak         float64 // smoothed delivery rate's slowly decaying peak, per nanosecond
	burstPeak       float64 // slowly decaying peak of the rounds' largest in-flight counts
	freeLong        float64 // smoothed fraction of rounds in which the limit did not bind
	rates           [defaultRateWindow]float64
	next            int     // index of the next slot in rates
	binding         int     // consecutive binding rounds
	sinceDrain      int     // binding rounds since the last drain
	free            int     // consecutive rounds that did not bind
	suspect         int     // consecutive ambiguous rounds
	saturated       int     // consecutive binding rounds that were not ambiguous
	unfresh         int     // rounds since the last drain while !baseFresh
	drains          int     // drains averaged into base since it was replaced
	commit          bool    // the drain under way may keep its limit
	pre             round   // the last ambiguous round before a probe
	held            float64 // limit before a drain
	heldRate        float64 // smoothed delivery rate before a drain
	acc             round   // sums of the rounds a probe or drain measured
	accRounds       int     // how many rounds acc sums
	out             published
}

// NewDefault returns a Default configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every unusable option.
func NewDefault(opts DefaultOptions) (*Default, error) {
	ps := problems("Default")
	b := resolveBounds(&ps, opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"Headroom", opts.Headroom}, {"RoundSamples", float64(opts.RoundSamples)}, {"DrainEvery", float64(opts.DrainEvery)},
	} {
		checkPositive(&ps, c.name, c.v)
	}
	slack := orDefault(opts.Slack, DefaultSlack)
	if !(slack >= 1) || math.IsInf(slack, 0) {
		ps.Addf("Slack %v must be a finite number of at least 1", slack)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	d := &Default{
		b:          b,
		headroom:   orDefault(opts.Headroom, DefaultHeadroom),
		slack:      slack,
		minSamples: orDefault(opts.RoundSamples, DefaultRoundSamples),
		drainEvery: orDefault(opts.DrainEvery, DefaultDrainEvery),
		limit:      b.initial,
		prevLimit:  b.initial,
	}
	d.out.set(d.limit)
	return d, nil
}

// Limit returns the current limit.
func (d *Default) Limit() int { return d.out.get() }

// Sample records one call that ran; see Algorithm.
func (d *Default) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.started {
		d.started, d.start = true, now-int64(rtt)
	}
	d.n++
	x := nanos(rtt)
	d.sumRtt += x
	d.sumSq += x * x
	d.sumInfl += float64(inflight)
	d.peakInfl = max(d.peakInfl, inflight)
	if dropped {
		d.drops++
	}
	if inflight >= d.out.get() {
		d.full++
	}
	if !dropped && float64(inflight) <= d.lowCut {
		d.lowN++
		d.lowSum += nanos(rtt)
	}
	elapsed := now - d.start
	if d.n < d.minSamples || float64(elapsed) < d.rtt || elapsed <= 0 {
		return d.out.get()
	}
	r := round{
		rate:     float64(d.n) / float64(elapsed),
		rtt:      d.sumRtt / float64(d.n),
		inflight: d.sumInfl / float64(d.n),
		drops:    float64(d.drops) / float64(d.n),
		full:     float64(d.full) / float64(d.n),
		peak:     float64(d.peakInfl),
		n:        float64(d.n),
		low:      float64(d.lowN),
		sq:       d.sumSq / float64(d.n),
	}
	if d.lowN > 0 {
		r.lowRtt = d.lowSum / float64(d.lowN)
	}
	d.start, d.n, d.drops, d.full, d.sumRtt, d.sumInfl, d.peakInfl = now, 0, 0, 0, 0, 0, 0
	d.lowN, d.lowSum, d.sumSq = 0, 0, 0
	inForce := d.limit
	d.endRound(r)
	switch {
	case d.ph == steady && d.baseFresh:
		// See defaultBaseSamples. A drain keeps the cut from before it.
		d.lowCut = math.Min(d.rate, d.maxRate()) * d.base
	case d.ph == probePre:
		// A probe asks whether calls below the knee before the
		// change take longer too (see defaultLowVeto).
		d.lowCut = d.maxRate() * d.base
	}
	d.prevLimit = inForce
	d.limit = clamp(d.limit, d.b.min, d.b.max)
	return d.out.set(d.limit)
}
