package limit

import (
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

// Internal constants of Default. They shape the state machine rather than
// tune it, so they are not options.
const (
	// defaultBinding: the limit binds in a round when the mean in-flight
	// count of its samples is at least this fraction of the limit.
	defaultBinding = 0.85
	// defaultLimitWeight is how far the limit moves toward its target per
	// round: a quarter, which cuts the noise of one round to about a third.
	defaultLimitWeight = 0.25
	// defaultRateWeight smooths the delivery rate and latency across rounds;
	// defaultInflightWeight the in-flight count; defaultRateLongWeight the
	// long-run delivery rate, over about 16 rounds.
	defaultRateWeight     = 0.5
	defaultInflightWeight = 0.25
	defaultRateLongWeight = 2.0 / 17
	// defaultBaseWeight is the weight of a free, unqueued round's latency in
	// the no-load latency.
	defaultBaseWeight = 0.125
	// defaultRateWindow is how many rounds the maximum delivery rate covers.
	defaultRateWindow = 10
	// defaultSuspectRate: a binding round whose latency would shrink the
	// limit while the smoothed delivery rate is below this fraction of its
	// recent maximum is ambiguous. 0.8 is two standard deviations of a
	// round's noise below the maximum.
	defaultSuspectRate = 0.8
	// defaultProbeGain raises the limit during a probe: by half, so that
	// the latency of a queue grows by ln 1.5 ≈ 0.4, four times the noise
	// of the measure, while a longer path's does not grow at all.
	defaultProbeGain = 1.5
	// defaultElastic: a probe whose latency grew by at least this fraction
	// of its in-flight growth (in logarithms) found a queue: halfway
	// between a queue (1) and a path (0).
	defaultElastic = 0.5
	// defaultDrainGain lowers the limit during a drain: to 3/4 of a limit
	// that is at most 1.1 × the knee, so below the knee, with no queue.
	defaultDrainGain = 0.75
	// defaultMeasureRounds is how many rounds a probe or drain measures
	// after a round to settle (whose calls started under the old limit).
	defaultMeasureRounds = 2
	// defaultDrainReplace is the relative difference from the no-load
	// latency beyond which a drain's measure replaces it, instead of being
	// averaged in.
	defaultDrainReplace = 0.25
	// defaultDropFraction is the fraction of a round's samples that must
	// drop before the drops cut the limit: 1%, above the stray timeout.
	defaultDropFraction = 0.01
	// A round that reaches the limit (binds after free rounds, or finds the
	// limit reached for defaultBurstFull of its samples) while the long-run
	// delivery rate is below defaultBurstUtil × the maximum is a burst: the
	// limit grows by defaultBurstGain.
	defaultBurstUtil = 0.85
	defaultBurstGain = 1.25
	defaultBurstFull = 0.02
	// defaultPersist is how many binding rounds in a row it takes before
	// the latency shrinks the limit, and how many free rounds in a row
	// before the limit loosens: one round of either is a burst or noise.
	defaultPersist = 2
	// defaultFirstDrain is how many rounds a no-load latency never measured
	// without a queue may serve before a drain measures it.
	defaultFirstDrain = 4
	// defaultFullBinding: the limit also binds in a round when at least
	// this fraction of its calls found it reached.
	defaultFullBinding = 0.2
	// A drain whose in-flight count fell below defaultDrainFell of the
	// round before it, whose delivery rate held above defaultDrainRate of
	// it and whose latency fell with elasticity defaultElastic, was queued.
	defaultDrainFell = 0.9
	defaultDrainRate = 0.85
	// defaultBaseDrains: the no-load latency is the mean of the last drains'
	// measures, up to this many (then a moving average over about as
	// many), so that its noise falls well below the Headroom.
	defaultBaseDrains = 8
	// defaultBaseBelow: a free round whose in-flight count is below this
	// fraction of the knee refines the no-load latency.
	defaultBaseBelow = 0.7
	// defaultDrainStart is the interval, in binding rounds, between the
	// first drains after the no-load latency was replaced; it doubles with
	// every drain up to DrainEvery, so that the no-load latency is refined
	// quickly at first and cheaply later. 32: at 16, two or three drains
	// (three rounds each at 0.8 × the knee) fell into a 30 s overload,
	// 5% of the time at a limit 20% low, the largest part of the limit's
	// CV and 1–2 points of goodput; at 64 the first drain's noisy
	// measure stood too long (capacity-half at 1 ms missed on one seed
	// of 5–8).
	defaultDrainStart = 32
	// defaultIdle: while the smoothed in-flight count is below this
	// fraction of the limit, the limit makes no queue.
	defaultIdle = 0.5
	// defaultStrongRate and defaultStrongLatency: a round at under half the
	// maximum delivery rate and over twice the no-load latency (a capacity
	// halved, a path doubled) starts a probe without waiting for a second.
	// A binding round over twice the no-load latency is also not counted
	// as an overload near the knee (see the Ambiguous case).
	defaultStrongRate    = 0.5
	defaultStrongLatency = 2.0
	// The queue Default keeps at the knee grows with the measured
	// overload ρ ≈ 1/(1 − full), full being the smoothed fraction of a
	// binding round's calls that found the limit reached: below the limit
	// the in-flight count falls one step with odds 1/ρ, so the workers go
	// idle with probability about ρ^−(q+1) for a queue of q calls. The
	// queue is the q that makes this defaultIdleTarget (0.1: about one
	// call at 3×, three to four at 1.5×, which keeps ≥97% goodput in an
	// M/M/C/L model), at most defaultQueueMax × the knee (0.45: at 1.2×
	// the formula asks for more, and the limit then wanders with the
	// noise of full; 0.25 and 0.35 let mixed-cost collapse on some
	// seeds, 0.5 made the 120 s drift test fail), and at least Headroom.
	// defaultFullMax keeps ρ finite.
	defaultIdleTarget = 0.1
	defaultFullMax    = 0.95
	defaultQueueMax   = 0.45
	// defaultQueued is the latency above the no-load latency that reads
	// as a queue in the tests of a round (hold a free round, suspect a
	// binding one): 10%, the noise of a round's mean, whatever Headroom.
	defaultQueued = 0.1
	// defaultDrainKnee: a periodic drain lowers the limit to at most this
	// fraction of the knee, so that a limit kept above the knee by the
	// overload queue still drains to where nothing queues (3/4 of such
	// a limit did not, and the no-load latency crept up by 10%).
	defaultDrainKnee = 0.8
	// defaultPeakDecay: the limit of a saturated round never falls below
	// (1 + Headroom) × no-load latency × the peak smoothed delivery rate,
	// a peak that decays by this fraction per round, restarts with the
	// rate window when a capacity loss or a longer path is confirmed,
	// and falls to the window's maximum in an ambiguous round (else an
	// unconfirmed cut left the floor at the old capacity: capacity-half
	// at 1 ms never converged on 2 seeds of 9–16). Below the knee the latency does not depend on the
	// limit, and the round's knee (its delivery rate × no-load latency)
	// follows the limit down: with a no-load latency measured more than
	// Headroom too low (one drain's measure has 6% noise) nothing pulled
	// the limit back up, and it sank (to 6–9 for 16 workers at 3× on
	// seed 7: 60% goodput). At 1/512 the floor forgets a 10% higher rate
	// in about 50 rounds, far slower than that sink.
	defaultPeakDecay = 1.0 / 512
	// While the limit did not bind in at least defaultFreeLong of the
	// recent rounds (smoothed with weight defaultFreeWeight, over about
	// 30 rounds), the limit of a free round aims at least at
	// defaultBurstPeakGain × the largest in-flight count of recent rounds,
	// a peak that decays by defaultBurstPeakDecay per round (halving in
	// about 45 rounds, several seconds at 20 ms), so that the bursts of
	// a downstream that is not saturated on average pass. A 1.2× burst of
	// exponential length (mean 100 ms) on 16 workers of 20 ms queues 16
	// calls on average and the long ones far more: a static limit of 2×
	// the knee rejects 3.2% of such 80% load, 3.5× rejects 0.8%. A gain
	// of 1.25 still rejected up to 1.9% on some seeds. Sustained overload
	// binds round after round (freeLong falls under a half within about
	// 11 rounds), and the peak is only a target for free rounds, so it
	// does not hold a limit that binds.
	defaultBurstPeakDecay = 1.0 / 64
	defaultBurstPeakGain  = 1.5
	defaultFreeLong       = 0.5
	defaultFreeWeight     = 1.0 / 16
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
// rate, a smoothed in-flight count, and the no-load latency. The no-load
// latency is measured by drains (below): it is the mean of the last eight
// drains' latencies, replaced outright when a drain differs from it by more
// than a quarter (a changed path). A round's mean varies by about 9%, the
// size of Headroom, so a no-load latency from one round would bias the
// limit by as much for as long as it lasts. Free rounds refine it only when
// their in-flight count is below 70% of the knee, where nothing can queue;
// a round in which the limit binds never does, so a queue of the limit's
// own making never becomes the baseline and the limit cannot drift under
// sustained overload. Until a drain has measured it, the no-load latency is
// the first round's, which may have queued (a limit that starts far above
// the knee): Default then drains every four rounds, binding or not, until a
// drain finds no queue; a limit whose in-flight count stays under half of
// it is taken as making no queue.
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
// below (1 + Headroom) × no-load latency × the highest smoothed delivery
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
//     Little's law says the same delivery rate needs. If neither, it was
//     noise, and the raise is undone. A longer path costs a few rounds of
//     shedding instead of a lasting loss.
//
// Drain: after DrainEvery binding rounds (32 after the no-load latency was
// replaced, doubling with each drain up to DrainEvery, so that it is
// refined quickly at first and cheaply later), the limit drops to 3/4 for
// three rounds, below the knee, and the mean latency of the last two is
// averaged into the no-load latency as above; the limit is then restored
// (scaled up if the no-load latency grew by more than a quarter). Like
// BBR's ProbeRTT it keeps the baseline honest while the limit always binds.
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
// p99 within 6% of the no-load p99, with the limit 5–25% above the worker
// count (coefficient of variation 5–8%); settles a halved capacity within
// 0.5 s at 1 ms service and within 0–14 s (up to about 40 rounds) at 20
// ms; sheds under 1% of the arrivals when the path's latency quadruples at
// 80% load (latency-based algorithms shed 15–60%) and under 1% of bursty
// 80% load, at a p99 about 1.3× the no-load p99 there.
//
// # Tuning record (fourth round, issue #4)
//
// Measured with sluice-sim -seeds 4, before → after (worst over seeds 1–4
// [mean], seeds met): 3× goodput 97.1% [97.7%] → 98.5% [99.3%], p99
// 1.02× → 1.05×; CV 10.4% (2/4) → 7.3% (4/4); drift −10.9% (3/4) → −4.2%
// (4/4); bursty 80% load rejects 4.1% (0/4) → 0.6% (4/4), at a p99 of
// 1.32× instead of 1.06×; latency step 98.5% → 99.4% served; capacity-half
// at 20 ms 29.2 s [9.8 s] → 13.5 s [5.9 s], one seed of four within 2 s
// (13.5 s is 42 rounds of 0.32 s; at 1 ms the 2 s goal allows 125);
// half@1ms 0.2 s → 0.4 s, 4/4. Seeds 5–8, which no earlier round checked:
// 3× collapsed to 60.6% on seed 7 before and keeps 97.6% after; every goal
// but capacity-half at 20 ms (0/4, 20.3 s worst) and drift (3/4, −9.3%)
// holds. Seeds 9–16 are weaker: 3× 6/8 (91.1% worst: a first no-load
// measure 9% low), half@1ms 7/8, CV 7/8, drift 6/8. Against
// go-concurrency-limits (bench/cmd/simpeers, seed 1) Default now wins 8
// of the 10 standard scenarios (was 6).
//
//   - The sink: the round's knee follows a limit below the knee, so a
//     no-load latency measured more than Headroom low (6% noise from one
//     drain) left the limit nothing to grow on: it random-walked down.
//     Fixed by the delivery-rate floor (defaultPeakDecay). Holding the
//     limit while the latency is within 10% of the no-load latency did
//     not stop it (single rounds read 1.3× from noise alone); a growth
//     target at 1.1 × the no-load latency fixed it but put 8 workers at
//     a limit of 10 (half@1ms 28 s); a floor of 1.1 × (instead of 1 +
//     Headroom) broke half@1ms too; a floor decaying at 1/2048 held the
//     old capacity after a halving (half@1ms 25 s); applying the floor
//     only to unqueued rounds was robust but lowered overload goodput by
//     a point (simpeers 6 of 10). A floor still fails when the first
//     drain reads 9% low (seed 13).
//   - Drains: the first ones every 16 binding rounds cost 1–2 points of
//     goodput and most of the CV; every 32 now (64 left the first measure
//     standing too long). Ending a drain's settling round after a few
//     round trips cut their cost further but broke capacity-half on two
//     seeds (one fell to 78% goodput), even for periodic drains only.
//     Draining to 0.9 × the knee instead of 0.8 let the no-load latency
//     creep up again (drift 15%). Measuring the first drain over 4 rounds
//     instead of 2 made things worse on every seed set.
//   - The queue at moderate overload: a static limit needs 21–22 for ≥99%
//     goodput at 1.5× (16 workers), 17–18 at 3×, 16–17 at 10×; goodput
//     itself varies by ±1 point between seeds. Default sits at 19–20 at
//     1.5× (about 4 calls of queue from full ≈ 0.35). An idle target of
//     0.07, or a steeper q = ln 22 / ln ρ − 1.7 (5.5 calls at 1.5×, 1.1 at
//     3×), won overload-1.5x but broke half@1ms or drift: at 8 workers the
//     band leaves no room for the noise of full. So overload-1.5x is still
//     lost to gcl-gradient2 (98.2% at a steady 20.1, CV 2%) by 1.6 points.
//   - Bursty 80% load queues 16 calls per burst, not a few (see
//     defaultBurstPeakGain). Meeting the goal costs p99 (1.32×), so
//     bursty-0.8x is lost to both gcl-gradient2 (74.1% at p99 1.01×) and
//     gcl-aimd (78.5% at 1.15×); before, it was lost to gcl-aimd only. On
//     seed 1 no static limit beats both (L32: 76.9% at 1.05×, L56: 78.8%
//     at 1.16×).
//   - A longer path that grew into the generous limit at 80% load was
//     read as a lost capacity and cut (latency step, seed 8: 95% served):
//     a round counts as an overload before a change only under twice the
//     no-load latency now.
//   - start-high (5 workers, limit 20) still holds at 12–13. Its first
//     drain finds the queue (latency fell with the calls in flight) but
//     is not kept: the drained limit counts as unused when its mean
//     in-flight count is under 85% of it, although a fifth of the calls
//     found it reached. Counting that as binding made seed 1 converge
//     (43 s) but held the limit at 4–6 on seed 3 (85% goodput) and moved
//     drift; not kept.
//   - drift-1.2x and capacity-double: the limit wanders 21–31 at 1.2×
//     (free rounds between binding ones aim at 2 × the in-flight count),
//     so the drift figure moves by ±5% between seeds with any change;
//     after capacity doubles (1.5× on 32 workers) the overload queue puts
//     the limit at 36–38, above the ±10% band (never converges on seed 1;
//     not a goal).
//
// # Tuning record (third round, issue #4)
//
// Measured with sluice-sim -seeds 4 (seeds 1–4), before → after: capacity
// halved at 1 ms service converges in 0.0–0.2 s on every seed (was 8.3 s
// at seed 1, 15.6 s worst); at 20 ms service 5.2 s on seed 1 (was 6.4),
// one seed of four within 2 s, 29 s worst (never before); drift at 1.2×
// worst 10.9% (was 23%), three seeds of four under 5%; goodput at 1.5×
// 96.8% (was 94.8%); 3× overload 97.1–97.6% (was 98.2–98.8%) with p99
// 1.00–1.02×, a queue of one call instead of 1.6. Not met: bursty 80% load still
// rejects 3–4% (the burst rule was not changed), start-high still holds
// at ~13 for 5 workers, CV worst 10.4% on one seed.
//
//   - Fixed Headroom 0.1 → overload queue (above) with Headroom 0.05 as
//     its floor: the fixed tenth put the limit at 9.5 for 8 workers at 3×
//     (band 7–9), the main cause of the slow convergence at 1 ms — the
//     cut itself came two rounds after the change.
//   - The queue capped at 0.25 or 0.35 of the knee let mixed-cost collapse
//     to 46–79% goodput on some seeds, at 0.5 the 120 s drift test failed.
//   - A drain that keeps its lowered limit used to set the no-load latency
//     to the drain's latency if lower: one noisy measure (6%) then biased
//     the knee low and the limit sank below the workers. It now lowers it
//     only when a quarter below (or when never measured).
//   - The cut on a lost capacity to 0.9 × the knee (instead of 1.1×) cut
//     the delivery rate by 15%, so the drain never confirmed it; back to
//     1.1×. Periodic drains go to at most 0.8 × the knee (was 3/4 of the
//     limit, which with the larger queue did not drain and let the no-load
//     latency creep up 10%).
//   - A probe that found no queue took a latency 25% above the no-load
//     latency for a longer path and rebased, even when the delivery rate
//     had not grown with the calls in flight; under mixed costs that
//     rebased on noise and the limit ran away (CV 90%). A longer path now
//     also needs the delivery rate to follow (elasticity ≥ 0.5).
//   - Not tried for lack of time: rounds sized by the measured variance
//     (mixed-cost rounds are 3× noisier than exponential ones), hysteresis
//     on the published limit, a "not saturated" signal for bursts.
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
	peakInfl        int // the round's largest in-flight count
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
	acc             round   // sums of the rounds a probe or drain measured
	accRounds       int     // how many rounds acc sums
	out             published
}

// NewDefault returns a Default configured by opts, or an error wrapping
// ErrInvalidOptions if opts cannot work.
func NewDefault(opts DefaultOptions) (*Default, error) {
	b, err := resolveBounds("Default", opts.InitialLimit, opts.MinLimit, opts.MaxLimit)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"Headroom", opts.Headroom}, {"Slack", opts.Slack},
		{"RoundSamples", float64(opts.RoundSamples)}, {"DrainEvery", float64(opts.DrainEvery)},
	} {
		if err := checkPositive("Default", c.name, c.v); err != nil {
			return nil, err
		}
	}
	d := &Default{
		b:          b,
		headroom:   orDefault(opts.Headroom, DefaultHeadroom),
		slack:      orDefault(opts.Slack, DefaultSlack),
		minSamples: orDefault(opts.RoundSamples, DefaultRoundSamples),
		drainEvery: orDefault(opts.DrainEvery, DefaultDrainEvery),
		limit:      b.initial,
		prevLimit:  b.initial,
	}
	if d.slack < 1 {
		return nil, errorf("Default", "Slack %v below 1", d.slack)
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
	d.sumRtt += nanos(rtt)
	d.sumInfl += float64(inflight)
	d.peakInfl = max(d.peakInfl, inflight)
	if dropped {
		d.drops++
	}
	if inflight >= d.out.get() {
		d.full++
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
	}
	d.start, d.n, d.drops, d.full, d.sumRtt, d.sumInfl, d.peakInfl = now, 0, 0, 0, 0, 0, 0
	inForce := d.limit
	d.endRound(r)
	d.prevLimit = inForce
	d.limit = clamp(d.limit, d.b.min, d.b.max)
	return d.out.set(d.limit)
}
