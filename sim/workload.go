package sim

import "math"

// cumulative returns the normalized cumulative weights of xs, nil when
// empty.
func cumulative[T any](xs []T, w func(T) float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	c := make([]float64, len(xs))
	s := 0.0
	for i, x := range xs {
		s += w(x)
		c[i] = s
	}
	for i := range c {
		c[i] /= s
	}
	return c
}

// pick returns the index that a uniform u selects in a cumulative table.
func pick(cum []float64, u float64) int {
	for i, c := range cum {
		if u < c {
			return i
		}
	}
	return len(cum) - 1
}

// phaseLen draws the length of the next bursty phase.
func (e *engine) phaseLen() int64 {
	m := e.sc.Arrivals.BurstOff
	if e.burstOn {
		m = e.sc.Arrivals.BurstOn
	}
	return int64(e.arrRng.ExpFloat64() * float64(m))
}

// curRate is the arrival rate in the current bursty phase.
func (e *engine) curRate() float64 {
	a := e.sc.Arrivals
	if a.Kind != Bursty {
		return e.rate
	}
	if e.burstOn {
		return e.rate * a.BurstFactor
	}
	p := float64(a.BurstOn) / float64(a.BurstOn+a.BurstOff)
	return e.rate * (1 - a.BurstFactor*p) / (1 - p)
}

// drawArrival returns the first arrival after t.
func (e *engine) drawArrival(t int64) int64 {
	for {
		r := e.curRate()
		dt := math.Inf(1)
		if r > 0 {
			dt = e.arrRng.ExpFloat64() / r
		}
		if e.sc.Arrivals.Kind != Bursty || float64(t)+dt < float64(e.phaseEnd) {
			if dt > float64(e.stop) {
				return e.stop
			}
			return t + max(1, int64(dt))
		}
		t = e.phaseEnd
		e.burstOn = !e.burstOn
		e.phaseEnd = t + e.phaseLen()
	}
}

// drawWork draws the time a new request occupies a worker.
func (e *engine) drawWork() int64 {
	var x float64
	switch e.sc.Service.Kind {
	case Exponential:
		x = e.svcRng.ExpFloat64() * e.svcMean
	case Lognormal:
		x = math.Exp(e.lnMu + e.sc.Service.Sigma*e.svcRng.NormFloat64())
	case Bimodal:
		m := e.fastMean
		if e.svcRng.Float64() < e.sc.Service.SlowFraction {
			m *= e.sc.Service.SlowFactor
		}
		x = e.svcRng.ExpFloat64() * m
	case Constant:
		x = e.svcMean
	}
	if e.costCum != nil {
		x *= e.sc.Costs[pick(e.costCum, e.svcRng.Float64())].Factor
	}
	return max(1, int64(x))
}
