package limit

import "math"

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
}

// endRound runs the state machine on a finished round. It requires d.mu.
func (d *Default) endRound(r round) {
	d.rtt = ema(d.rtt, r.rtt, defaultRateWeight)
	d.rate = ema(d.rate, r.rate, defaultRateWeight)
	d.inflight = ema(d.inflight, r.inflight, defaultInflightWeight)
	if d.base == 0 {
		d.base = r.rtt
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
	d.capPeak = math.Max(d.rate, d.capPeak*(1-defaultPeakDecay))
	d.rateLong = ema(d.rateLong, r.rate, defaultRateLongWeight)
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
		if d.baseFresh && r.inflight < defaultBaseBelow*d.maxRate()*d.base {
			// Well below the knee: nothing can have queued.
			d.base = ema(d.base, r.rtt, defaultBaseWeight)
		}
		if d.free < defaultPersist {
			// One free round between binding ones is the noise of a
			// saturated downstream, not spare capacity.
			return
		}
		target := max(d.slack*d.inflight, d.knee(d.maxRate()*d.base), d.b.initial)
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
	ratio := math.Max((1+d.headroom)*d.base/r.rtt, d.knee(r.inflight*d.base/r.rtt)/d.limit)
	if ratio < 1 && d.binding < defaultPersist {
		// A burst is not yet an overload.
		return
	}
	d.limit = ema(d.limit, d.limit*ratio, defaultLimitWeight)
	// Never below the knee of the delivery rate the limit has reached:
	// see defaultPeakDecay.
	d.limit = math.Max(d.limit, (1+d.headroom)*d.capPeak*d.base)
}

// startDrain lowers the limit to to for a drain, after round r. A drain
// that may commit keeps the lowered limit if it finds it still queued. It
// requires d.mu.
func (d *Default) startDrain(r round, to float64, commit bool) {
	d.binding, d.saturated, d.suspect, d.sinceDrain = 0, 0, 0, 0
	d.pre, d.held, d.ph, d.commit = r, d.limit, drainSettle, commit
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
	if r.rtt < (1+defaultDrainReplace)*d.base || math.Log(r.rate/d.pre.rate)/math.Log(grew) < defaultElastic {
		// Neither a queue nor a longer path (whose delivery rate grows
		// with the calls in flight): noise. Undo the raise.
		d.limit /= defaultProbeGain
		return
	}
	// A longer path: rebase, and scale the limit before the probe as
	// Little's law says the same delivery rate needs.
	old := d.base
	d.base, d.baseFresh = r.rtt, true
	d.limit = math.Max(d.limit, d.limit/defaultProbeGain*d.base/old)
	d.resetRates(r.rate)
}

// measure accumulates the rounds of a probe or drain. After the last it
// returns their average and true. It requires d.mu.
func (d *Default) measure(r round) (round, bool) {
	d.acc.rate += r.rate
	d.acc.rtt += r.rtt
	d.acc.inflight += r.inflight
	d.accRounds++
	if d.accRounds < defaultMeasureRounds {
		return round{}, false
	}
	n := float64(d.accRounds)
	avg := round{rate: d.acc.rate / n, rtt: d.acc.rtt / n, inflight: d.acc.inflight / n}
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
	fell := m.inflight / d.pre.inflight
	elasticity := 0.0
	if fell < defaultDrainFell && m.inflight >= defaultBinding*d.limit {
		elasticity = math.Log(m.rtt/d.pre.rtt) / math.Log(fell)
	}
	if d.commit {
		switch {
		case elasticity >= defaultElastic && m.rate >= defaultDrainRate*d.pre.rate:
			// Still queued: keep the lowered limit. Its latency is at
			// most the no-load latency, but it is one noisy measure:
			// it lowers a no-load latency averaged over several drains
			// only when it is far below it.
			if !d.baseFresh || m.rtt < (1-defaultDrainReplace)*d.base {
				d.base = math.Min(d.base, m.rtt)
			}
			d.resetRates(m.rate)
			return
		case m.rtt > (1+defaultDrainReplace)*d.base && elasticity >= defaultElastic/2:
			// Unclear, and the latency is still well above the
			// no-load latency: keep the lowered limit and learn nothing.
			return
		}
	}
	d.limit = d.held
	if !d.baseFresh || math.Abs(m.rtt-d.base) > defaultDrainReplace*d.base {
		if d.baseFresh && m.rtt > d.base {
			// A longer path: the same delivery rate needs
			// proportionally more calls in flight.
			d.limit *= m.rtt / d.base
		}
		d.base, d.drains = m.rtt, 1
	} else {
		d.drains = min(d.drains+1, defaultBaseDrains)
		d.base += (m.rtt - d.base) / float64(d.drains)
	}
	d.baseFresh = true
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
	d.rate, d.capPeak = rate, rate
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
