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
	d.rateLong = ema(d.rateLong, r.rate, defaultRateLongWeight)

	if r.drops >= defaultDropFraction {
		d.limit *= math.Max(0.5, 1-r.drops)
		d.binding, d.suspect = 0, 0
		return
	}
	// The round's calls started under this round's limit or the last one.
	binding := r.inflight >= defaultBinding*math.Min(d.limit, d.prevLimit)
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
		d.binding, d.suspect = 0, 0
		d.free++
		if r.rtt > d.base*(1+d.headroom) {
			// A queue the limit did not admit: demand beyond capacity, or
			// a burst. Hold; if it persists the limit will bind.
			return
		}
		d.base = ema(d.base, r.rtt, defaultBaseWeight)
		d.baseFresh = true
		if d.free < defaultPersist {
			// One free round between binding ones is the noise of a
			// saturated downstream, not spare capacity.
			return
		}
		target := max(d.slack*d.inflight, d.maxRate()*d.base*(1+d.headroom), d.b.initial)
		d.limit = ema(d.limit, target, defaultLimitWeight)
		return
	}

	d.binding++
	d.free = 0
	if d.ambiguous(r.rtt, d.rate) {
		// Hold the limit until a probe says which it is.
		d.suspect++
		strong := r.rtt > defaultStrongLatency*d.base && r.rate < defaultStrongRate*d.maxRate()
		if d.suspect >= 2 || strong {
			d.suspect, d.ph = 0, probePre
		}
		return
	}
	d.suspect = 0
	if d.binding >= d.drainEvery || (!d.baseFresh && d.binding >= defaultFirstDrain) {
		d.binding, d.held, d.ph = 0, d.limit, drainSettle
		d.limit *= defaultDrainGain
		return
	}
	// Little's law: the round's delivery rate × no-load latency × (1 +
	// Headroom) is the target for the in-flight count the round had. The
	// limit moves by the same ratio, (1 + Headroom) × no-load latency /
	// latency, so that the rounding of the limit and the gap between the
	// limit and the in-flight count do not bias it.
	ratio := (1 + d.headroom) * d.base / r.rtt
	if ratio < 1 && d.binding < defaultPersist {
		// A burst is not yet an overload.
		return
	}
	d.limit = ema(d.limit, d.limit*ratio, defaultLimitWeight)
}

// ambiguous reports whether a binding round with latency rtt and delivery
// rate rate is both queued (the latency would shrink the limit) and slow (the
// delivery rate is below its recent maximum): the capacity fell, the path got
// longer, or the no-load latency is too low and the limit is below the knee,
// where shrinking it only cuts the delivery rate. It requires d.mu.
func (d *Default) ambiguous(rtt, rate float64) bool {
	return rtt > d.base*(1+d.headroom) && rate < defaultSuspectRate*d.maxRate()
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
		d.limit = r.rate * d.base * (1 + d.headroom)
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

// endDrain updates the no-load latency from a drain's measure and restores
// the limit. It requires d.mu.
func (d *Default) endDrain(m round) {
	if math.Abs(m.rtt-d.base) > defaultDrainReplace*d.base {
		d.base = m.rtt
	} else {
		d.base = ema(d.base, m.rtt, 0.5)
	}
	d.baseFresh = true
	d.limit, d.ph = d.held, steady
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
	d.rate = rate
}

// maxRate returns the window's maximum delivery rate. It requires d.mu.
func (d *Default) maxRate() float64 {
	m := 0.0
	for _, r := range d.rates {
		m = math.Max(m, r)
	}
	return m
}
