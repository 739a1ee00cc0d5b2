package limit

import "math"

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
	// latency beyond which a drain's measure replaces it, instead of its
	// unqueued calls being averaged in. A periodic drain that measures a
	// latency this much higher probes instead: a longer path, or a
	// capacity lost during the drain, whose queue once became the no-load
	// latency (capacity-half at 1 ms, seed 10: the limit of 8 workers sat
	// at 16 for 16 s).
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
	// Before the no-load latency was ever measured, the delivery rate
	// must also hold above defaultDrainRate of the recent maximum: the
	// round before is one noisy round, and a drain below the knee passed
	// against it (seed 27 at 3× drained 20 → 14 → 11 → 8 and kept 90.9%
	// goodput; seed 25 at 1.5×).
	defaultDrainFell = 0.9
	defaultDrainRate = 0.85
	// defaultBaseDrains caps the count of drains since the no-load
	// latency was replaced, which only sets the interval between drains
	// (see defaultDrainStart): 8, so that the interval can reach
	// DrainEvery.
	defaultBaseDrains = 8
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
	// (1 + Headroom) × no-load latency (plus defaultBaseZ standard errors)
	// × the peak long-run delivery rate, a peak that decays by this
	// fraction per round, restarts with the rate window when a capacity
	// loss or a longer path is confirmed, and falls to the window's
	// maximum in an ambiguous round (else an unconfirmed cut left the
	// floor at the old capacity: capacity-half at 1 ms never converged on
	// 2 seeds of 9–16). The peak of the rate smoothed over two rounds,
	// used before, sat up to 7% above the capacity: a floor that held 8
	// workers at the edge of the ±10% band (capacity-half at 1 ms missed
	// on 5 seeds of 16). Below the knee the latency does not depend on
	// the limit, and the round's knee (its delivery rate × no-load
	// latency) follows the limit down: with a no-load latency measured
	// more than Headroom too low (one drain's measure has 6% noise)
	// nothing pulled the limit back up, and it sank (to 6–9 for 16
	// workers at 3× on seed 7: 60% goodput). At 1/512 the floor forgets a
	// 10% higher rate in about 50 rounds, far slower than that sink.
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
	// The no-load latency is the mean latency of the calls that cannot
	// have queued: those admitted with at most the knee in flight (the
	// smaller of the smoothed and the recent maximum delivery rate × the
	// no-load latency), itself included, so that a worker was free. Their
	// latencies are averaged with equal weight over the last
	// defaultBaseSamples of them (16384: a standard error of 0.7% for
	// exponential service times; with 4096, 1.4%, drift at 1.2× failed
	// on one more seed of 16, at −5.4%). A drain that finds a
	// latency more than defaultDrainReplace away replaces the average,
	// which then counts the drain's samples.
	defaultBaseSamples = 16384
	// defaultBaseZ: the limit's targets and floor use the no-load latency
	// plus this many standard errors of its estimate (estimated from the
	// samples' coefficient of variation), because one too low costs
	// goodput while one too high costs a little latency. 0.5: after the
	// first drain (256 samples, 6% standard error) it adds 3%. Measured
	// on seeds 1–32 before the initial drains were fixed: 1 put the limit
	// of 8 workers too high (capacity-half at 20 ms within 20 s on 15
	// seeds instead of 23, CV met on 28 instead of 30); 0 left seed 27
	// at 90.9% goodput at 3× (93.0% at 0.5).
	defaultBaseZ = 0.5
	// defaultLowVeto: a probe that would rebase on a longer path is
	// overruled when at least this many of its calls were admitted below
	// the old knee and their mean latency is nearer the old no-load
	// latency than the probe's (geometric mean): calls that cannot queue
	// still see a longer path. 32 calls give the mean 18% noise for
	// exponential service times; a path that merely lengthens by half may
	// be overruled once, and the next probe tries again.
	defaultLowVeto = 32
)

// phase is where Default's state machine is.
type phase uint8

const (
	steady       phase = iota // estimating and following the target
	probePre                  // ambiguous; this round measures before a probe
	probeSettle               // limit raised; this round mixes old and new
	probeMeasure              // limit raised; this round measures it
	drainSettle               // limit lowered; this round mixes old and new
	drainMeasure              // limit lowered; this round measures it
)

// round holds one measurement round's statistics.
type round struct {
	rate     float64 // completions per nanosecond
	rtt      float64 // mean latency, nanoseconds
	inflight float64 // mean in-flight count at the start of its calls
	drops    float64 // fraction of its samples that dropped
	full     float64 // fraction of its samples that found the limit reached
	peak     float64 // largest in-flight count of its samples
	n        float64 // samples
	low      float64 // samples admitted at most lowCut in flight
	lowRtt   float64 // their mean latency
	sq       float64 // mean squared latency, nanoseconds²
}

// endRound runs the state machine on a finished round. It requires d.mu.
func (d *Default) endRound(r round) {
	d.rtt = ema(d.rtt, r.rtt, defaultRateWeight)
	d.rate = ema(d.rate, r.rate, defaultRateWeight)
	d.inflight = ema(d.inflight, r.inflight, defaultInflightWeight)
	if d.base == 0 {
		d.base = r.rtt
	}
	if r.rtt > 0 {
		d.cv2 = ema(d.cv2, math.Max(0, r.sq/(r.rtt*r.rtt)-1), defaultRateLongWeight)
	}
	switch d.ph {
	case probePre, probeSettle, probeMeasure, drainSettle, drainMeasure:
		// A drain's unqueued calls are folded in when it ends, unless
		// it found a change; a probe's tell a queue from a longer path.
		d.pendLow += r.low
		d.pendSum += r.low * r.lowRtt
	default:
		if !d.ambiguous(r.rtt, d.rate) {
			// (In an ambiguous round the capacity may have fallen
			// below the cut.)
			d.foldBase(r.low, r.low*r.lowRtt)
		}
	}
	switch d.ph {
	case probePre:
		d.startProbe(r)
		return
	case probeSettle:
		d.ph = probeMeasure
		return
	case probeMeasure:
		if r, ok := d.measure(r); ok {
			d.endProbe(r)
		}
		return
	case drainSettle:
		d.ph = drainMeasure
		return
	case drainMeasure:
		if r, ok := d.measure(r); ok {
			d.endDrain(r)
		}
		return
	}
	d.pushRate(d.rate)
	d.burstPeak = math.Max(r.peak, d.burstPeak*(1-defaultBurstPeakDecay))
	d.rateLong = ema(d.rateLong, r.rate, defaultRateLongWeight)
	d.capPeak = math.Max(d.rateLong, d.capPeak*(1-defaultPeakDecay))
	if !d.baseFresh {
		// The no-load latency is the first round's, which may have
		// queued: drain soon, whether or not the limit binds.
		d.unfresh++
		switch {
		case d.inflight < defaultIdle*d.limit:
			// Far below the limit: the limit made no queue, and drains
			// would not bind.
			d.baseFresh = true
		case d.unfresh >= defaultFirstDrain:
			d.unfresh = 0
			d.startDrain(r, math.Min(d.limit, d.inflight)*defaultDrainGain, true)
			return
		}
	}

	if r.drops >= defaultDropFraction {
		d.limit *= math.Max(0.5, 1-r.drops)
		d.binding, d.suspect = 0, 0
		return
	}
	// The round's calls started under this round's limit or the last one.
	binding := r.inflight >= defaultBinding*math.Min(d.limit, d.prevLimit) || r.full >= defaultFullBinding
	d.freeLong = ema(d.freeLong, b2f(!binding), defaultFreeWeight)
	reached := binding && d.free > 0 || !binding && r.full >= defaultBurstFull
	if reached && d.rateLong < defaultBurstUtil*d.maxRate() {
		// The limit was reached for part of a free round, or in a binding
		// round after a free one, while the downstream has been well below
		// its delivery rate on average: a burst, which the queue will
		// drain. Make room for it rather than shed it. (An overload binds
		// round after round, so this cannot repeat in one.)
		d.binding, d.free = 0, 0
		d.limit *= defaultBurstGain
		return
	}
	if !binding {
		d.binding, d.suspect, d.saturated = 0, 0, 0
		d.free++
		if r.rtt > d.base*(1+defaultQueued) {
			// A queue the limit did not admit: demand beyond capacity, or
			// a burst. Hold; if it persists the limit will bind.
			return
		}
		if d.free < defaultPersist {
			// One free round between binding ones is the noise of a
			// saturated downstream, not spare capacity.
			return
		}
		target := max(d.slack*d.inflight, d.knee(d.maxRate()*d.baseHi()), d.b.initial)
		if d.freeLong >= defaultFreeLong {
			// Mostly unsaturated: make room for the bursts seen lately.
			target = math.Max(target, defaultBurstPeakGain*d.burstPeak)
		}
		d.limit = ema(d.limit, target, defaultLimitWeight)
		return
	}

	d.binding++
	d.sinceDrain++
	d.free = 0
	if d.ambiguous(r.rtt, d.rate) {
		d.suspect++
		// A queue at a lower delivery rate: the capacity may have
		// fallen, so the floor remembers no more than the recent rates
		// (else an unconfirmed cut left the limit at the old knee).
		d.capPeak = math.Min(d.capPeak, d.maxRate())
		strong := r.rtt > defaultStrongLatency*d.base && r.rate < defaultStrongRate*d.maxRate()
		if d.saturated >= defaultPersist && (d.suspect >= 2 || strong) {
			// The limit bound at full delivery rate before: the
			// downstream slowed under it. Most likely its capacity fell:
			// cut to the knee the round measures (the second such round,
			// whose calls all started after the change), and let the
			// drain's measure confirm (a queue) or undo it (a longer
			// path).
			if cut := (1 + defaultQueued) * r.rate * d.base; cut < defaultDrainGain*d.limit {
				d.startDrain(r, cut, true)
				return
			}
		}
		// Hold the limit until a probe says which it is.
		if d.saturated < defaultPersist && (d.suspect >= 2 || strong) {
			d.suspect, d.ph = 0, probePre
		}
		return
	}
	d.suspect = 0
	if r.rtt < defaultStrongLatency*d.base {
		// Only a round under twice the no-load latency is the queue of
		// a limit near the knee, evidence of an overload before a
		// slowdown: a longer path that reached a generous limit is
		// not, and was cut as a lost capacity.
		d.saturated++
	}
	if d.sinceDrain >= min(d.drainEvery, defaultDrainStart<<d.drains) {
		d.startDrain(r, math.Min(d.limit*defaultDrainGain, defaultDrainKnee*d.maxRate()*d.base), false)
		return
	}
	// Little's law: the round's delivery rate × no-load latency × (1 +
	// Headroom) is the target for the in-flight count the round had. The
	// limit moves by the same ratio, (1 + Headroom) × no-load latency /
	// latency, so that the rounding of the limit and the gap between the
	// limit and the in-flight count do not bias it.
	d.fullLong = ema(d.fullLong, r.full, defaultRateLongWeight)
	ratio := math.Max((1+d.headroom)*d.baseHi()/r.rtt, d.knee(r.inflight*d.baseHi()/r.rtt)/d.limit)
	if ratio < 1 && d.binding < defaultPersist {
		// A burst is not yet an overload.
		return
	}
	d.limit = ema(d.limit, d.limit*ratio, defaultLimitWeight)
	// Never below the knee of the delivery rate the limit has reached:
	// see defaultPeakDecay.
	d.limit = math.Max(d.limit, (1+d.headroom)*d.capPeak*d.baseHi())
}

// startDrain lowers the limit to to for a drain, after round r. A drain
// that may commit keeps the lowered limit if it finds it still queued. It
// requires d.mu.
func (d *Default) startDrain(r round, to float64, commit bool) {
	d.binding, d.saturated, d.suspect, d.sinceDrain = 0, 0, 0, 0
	d.pre, d.held, d.heldRate, d.ph, d.commit = r, d.limit, d.rate, drainSettle, commit
	d.limit = to
}

// ambiguous reports whether a binding round with latency rtt and delivery
// rate rate is both queued (the latency would shrink the limit) and slow (the
// delivery rate is below its recent maximum): the capacity fell, the path got
// longer, or the no-load latency is too low and the limit is below the knee,
// where shrinking it only cuts the delivery rate. It requires d.mu.
func (d *Default) ambiguous(rtt, rate float64) bool {
	return rtt > d.base*(1+defaultQueued) && rate < defaultSuspectRate*d.maxRate()
}

// startProbe ends the measure before a probe and raises the limit for the
// probe. The measure is taken after the rounds that raised the suspicion,
// not from them, so that it is not biased by their selection. It requires
// d.mu.
func (d *Default) startProbe(m round) {
	d.pre, d.ph = m, probeSettle
	d.limit *= defaultProbeGain
}

// endProbe decides what a probe found. It requires d.mu.
func (d *Default) endProbe(r round) {
	d.ph = steady
	pendLow, pendSum := d.pendLow, d.pendSum
	d.pendLow, d.pendSum = 0, 0
	grew := r.inflight / d.pre.inflight
	if grew < 1.1 {
		// The raised limit was not used: the limit was not what held the
		// load, so the latency is not of its making. Keep the raise.
		return
	}
	elasticity := math.Log(r.rtt/d.pre.rtt) / math.Log(grew)
	if elasticity >= defaultElastic {
		// A queue: the capacity fell. Adopt the measured rate at once.
		d.resetRates(r.rate)
		d.limit = d.knee(r.rate * d.base)
		return
	}
	// Calls admitted below the old knee take the longer path too, but
	// do not queue.
	unqueued := pendLow >= defaultLowVeto && pendSum/pendLow < math.Sqrt(d.base*r.rtt)
	if unqueued || r.rtt < (1+defaultDrainReplace)*d.base || math.Log(r.rate/d.pre.rate)/math.Log(grew) < defaultElastic {
		// Neither a queue nor a longer path (whose delivery rate grows
		// with the calls in flight): noise. Undo the raise.
		d.limit /= defaultProbeGain
		return
	}
	// A longer path: rebase, and scale the limit before the probe as
	// Little's law says the same delivery rate needs.
	old := d.base
	d.base, d.baseFresh, d.baseN = r.rtt, true, r.n
	d.limit = math.Max(d.limit, d.limit/defaultProbeGain*d.base/old)
	d.resetRates(r.rate)
}

// measure accumulates the rounds of a probe or drain. After the last it
// returns their average and true. It requires d.mu.
func (d *Default) measure(r round) (round, bool) {
	d.acc.rate += r.rate
	d.acc.rtt += r.rtt
	d.acc.inflight += r.inflight
	d.acc.n += r.n
	d.acc.sq += r.sq
	d.accRounds++
	if d.accRounds < defaultMeasureRounds {
		return round{}, false
	}
	n := float64(d.accRounds)
	avg := round{rate: d.acc.rate / n, rtt: d.acc.rtt / n, inflight: d.acc.inflight / n, n: d.acc.n, sq: d.acc.sq / n}
	d.acc, d.accRounds = round{}, 0
	return avg, true
}

// endDrain decides what a drain found. If the latency fell with the calls in
// flight while the delivery rate held, the drained limit still queued: the
// old limit was too high (the capacity fell, or the no-load latency was
// learned with a queue), so the drained limit stays. Otherwise its latency
// is the no-load latency, and the limit is restored, scaled by the change
// of the no-load latency if it grew (a longer path). It requires d.mu.
func (d *Default) endDrain(m round) {
	d.ph = steady
	pendLow, pendSum := d.pendLow, d.pendSum
	d.pendLow, d.pendSum = 0, 0
	fell := m.inflight / d.pre.inflight
	elasticity := 0.0
	if fell < defaultDrainFell && m.inflight >= defaultBinding*d.limit {
		elasticity = math.Log(m.rtt/d.pre.rtt) / math.Log(fell)
	}
	if d.commit {
		switch {
		case elasticity >= defaultElastic && m.rate >= defaultDrainRate*d.pre.rate && (d.baseFresh || m.rate >= defaultDrainRate*d.maxRate()):
			// Still queued: keep the lowered limit. Its latency is at
			// most the no-load latency, but it is one noisy measure:
			// it lowers a no-load latency averaged over several drains
			// only when it is far below it.
			if !d.baseFresh || m.rtt < (1-defaultDrainReplace)*d.base {
				d.base, d.baseN = math.Min(d.base, m.rtt), m.n
			}
			if d.baseFresh {
				d.resetRates(m.rate)
			}
			return
		case m.rtt > (1+defaultDrainReplace)*d.base && elasticity >= defaultElastic/2:
			// Unclear, and the latency is still well above the
			// no-load latency: keep the lowered limit and learn nothing.
			return
		}
	}
	d.limit, d.rate = d.held, d.heldRate
	if d.baseFresh && !d.commit && m.rtt > (1+defaultDrainReplace)*d.base {
		// A longer path, or a capacity lost during the drain: probe.
		d.ph = probePre
		return
	}
	if d.baseFresh && !d.commit {
		d.foldBase(pendLow, pendSum)
	}
	if !d.baseFresh || math.Abs(m.rtt-d.base) > defaultDrainReplace*d.base {
		if d.baseFresh && m.rtt > d.base {
			// A longer path: the same delivery rate needs
			// proportionally more calls in flight.
			d.limit *= m.rtt / d.base
		}
		d.base, d.drains, d.baseN = m.rtt, 1, m.n
	} else {
		d.drains = min(d.drains+1, defaultBaseDrains)
	}
	d.baseFresh = true
}

// foldBase averages n latencies summing to sum, of calls that cannot have
// queued, into the no-load latency. It requires d.mu.
func (d *Default) foldBase(n, sum float64) {
	if !d.baseFresh || n <= 0 {
		return
	}
	d.baseN = math.Min(d.baseN+n, defaultBaseSamples)
	d.base += (sum/n - d.base) * n / d.baseN
}

// baseHi returns the no-load latency plus defaultBaseZ standard errors of
// its estimate. It requires d.mu.
func (d *Default) baseHi() float64 {
	if !d.baseFresh || d.baseN <= 0 {
		return d.base
	}
	return d.base * (1 + defaultBaseZ*math.Sqrt(d.cv2/d.baseN))
}

// pushRate adds a smoothed delivery rate to the window. It requires d.mu.
func (d *Default) pushRate(rate float64) {
	d.rates[d.next] = rate
	d.next = (d.next + 1) % len(d.rates)
}

// resetRates forgets the window's delivery rates, keeping only rate.
func (d *Default) resetRates(rate float64) {
	for i := range d.rates {
		d.rates[i] = 0
	}
	d.rates[0], d.next = rate, 1
	d.rate, d.capPeak, d.rateLong = rate, rate, rate
}

// maxRate returns the window's maximum delivery rate. It requires d.mu.
func (d *Default) maxRate() float64 {
	m := 0.0
	for _, r := range d.rates {
		m = math.Max(m, r)
	}
	return m
}

// knee returns the limit for a downstream whose knee (delivery rate ×
// no-load latency) is k: k plus a queue of the larger of Headroom × k and
// the calls that keep the workers busy at the measured overload. It
// requires d.mu.
func (d *Default) knee(k float64) float64 {
	q := k * defaultQueueMax
	if full := math.Min(d.fullLong, defaultFullMax); full > 0 {
		// The overload ρ ≈ 1/(1 − full). Below the limit the in-flight
		// count falls one call per step with probability 1/ρ, so that
		// the workers idle with probability about ρ^−(q+1).
		q = math.Min(q, math.Log(1/defaultIdleTarget)/-math.Log1p(-full)-1)
	}
	return k + math.Max(q, k*d.headroom)
}

// b2f returns 1 for true and 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
