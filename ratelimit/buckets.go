package ratelimit

import (
	"math"
	"math/bits"
	"time"
)

// state is one key's state. Its fields mean different things for each
// algorithm (see the algorithms' methods); fresh makes a state with a full
// quota. The algorithms are pure state transitions: given the same state,
// params, n and now they make the same Decision, and they change the state
// only when they admit n ≥ 1 events (a rejection or a read leaves it as it
// was, apart from the sliding log dropping timestamps that have expired).
//
// Time only moves forward for a key: a now earlier than the state's own
// latest instant is treated as that instant, so a stale clock reading taken
// before the caller got the lock can never make room that was not there.
type state struct {
	a, b, c int64
	log     *ring // SlidingLog only: timestamps of admitted events
	full    int64 // from this instant on the quota is full and the key idle
	alg     algo
}

// fresh returns the state of a key with its full quota at now.
func fresh(p params, now int64) state {
	s := state{alg: p.alg, full: now}
	switch p.alg {
	case algoGCRA:
		s.a = now
	case algoTokenBucket:
		s.a, s.b = now, int64(math.Float64bits(float64(p.cap)))
	case algoLeakyBucket:
		s.a = now
	case algoFixedWindow:
		s.a = math.MinInt64
	case algoSlidingWindow:
		s.a = floorDiv(now, p.period) * p.period
	}
	return s
}

// decide answers a request for n ≥ 0 events at now and, if it admits n ≥ 1,
// consumes them. A request for zero events reads the state: it is always
// allowed. s.alg must be p.alg.
func (s *state) decide(p params, n, now int64) Decision {
	d := s.algorithm(p, n, now)
	if n == 0 {
		d.Allowed, d.RetryAfter = true, 0
	}
	return d
}

func (s *state) algorithm(p params, n, now int64) Decision {
	switch p.alg {
	case algoTokenBucket:
		return s.tokenBucket(p, n, now)
	case algoLeakyBucket:
		return s.leakyBucket(p, n, now)
	case algoFixedWindow:
		return s.fixedWindow(p, n, now)
	case algoSlidingWindow:
		return s.slidingWindow(p, n, now)
	case algoSlidingLog:
		return s.slidingLog(p, n, now)
	}
	return s.gcra(p, n, now)
}

// gcra is the generic cell rate algorithm: a is the theoretical arrival time
// (TAT), the instant at which the key would be back to a full quota. Each
// event moves it T = ceil(Period/Limit) further; a request is admitted when
// the new TAT is at most Capacity×T ahead of now.
//
// Guarantee: at most Burst + Limit·t/Period events in any interval of length
// t (T is rounded up to a whole nanosecond, so the rate is never above
// Limit/Period and below it by less than one nanosecond per event).
func (s *state) gcra(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	tat := max(s.a, now)
	tau := p.cap * p.t
	switch {
	case n > p.cap:
		d.RetryAfter = RetryNever
	case tat+n*p.t-tau > now:
		d.RetryAfter = time.Duration(tat + n*p.t - tau - now)
	default:
		d.Allowed = true
		if n > 0 {
			tat += n * p.t
			s.a, s.full = tat, tat
		}
	}
	d.Remaining = int(max(0, tau-(tat-now)) / p.t)
	d.ResetAfter = time.Duration(tat - now)
	return d
}

// tokenBucket is the token bucket: b holds the tokens (a float64, so that
// fractions of a token are kept, never truncated) as of instant a. Tokens
// refill at Limit per Period up to Capacity; a request takes n tokens. When
// the limit changes the token count is kept, clamped to the new Capacity.
//
// Guarantee: at most Burst + Limit·t/Period events in any interval of length
// t.
func (s *state) tokenBucket(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	capf, per, lim, nf := float64(p.cap), float64(p.period), float64(p.limit), float64(n)
	base, last := math.Float64frombits(uint64(s.b)), s.a
	// tokens returns the tokens e nanoseconds after last.
	tokens := func(e int64) float64 { return min(capf, base+float64(e)*lim/per) }
	e := max(now, last) - last
	switch t := tokens(e); {
	case n > p.cap:
		d.RetryAfter = RetryNever
	case t < nf:
		wait := firstAt((nf-base)*per/lim, e, func(e int64) bool { return tokens(e) >= nf })
		d.RetryAfter = time.Duration(wait - e)
	default:
		d.Allowed = true
		if n > 0 {
			base, last, e = t-nf, last+e, 0
			s.a, s.b = last, int64(math.Float64bits(base))
		}
	}
	t := tokens(e)
	d.Remaining = int(max(0, math.Floor(t)))
	full := firstAt((capf-base)*per/lim, e, func(e int64) bool { return tokens(e) >= capf })
	d.ResetAfter = time.Duration(full - e)
	if d.Allowed && n > 0 {
		s.full = last + full
	}
	return d
}

// leakyBucket is the leaky bucket as a meter: b holds the water level (a
// float64) as of instant a. Water drains at Limit per Period; a request pours
// n units in and is rejected if the bucket would overflow its Capacity. When
// the limit changes the level is kept as it is: a larger Capacity makes room
// at once, a smaller one may leave the bucket over-full until it drains.
//
// Guarantee: at most Burst + Limit·t/Period events in any interval of length
// t.
func (s *state) leakyBucket(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	capf, per, lim, nf := float64(p.cap), float64(p.period), float64(p.limit), float64(n)
	base, last := math.Float64frombits(uint64(s.b)), s.a
	// level returns the water level e nanoseconds after last.
	level := func(e int64) float64 { return max(0, base-float64(e)*lim/per) }
	e := max(now, last) - last
	switch lv := level(e); {
	case n > p.cap:
		d.RetryAfter = RetryNever
	case lv+nf > capf:
		wait := firstAt((base+nf-capf)*per/lim, e, func(e int64) bool { return level(e)+nf <= capf })
		d.RetryAfter = time.Duration(wait - e)
	default:
		d.Allowed = true
		if n > 0 {
			base, last, e = lv+nf, last+e, 0
			s.a, s.b = last, int64(math.Float64bits(base))
		}
	}
	d.Remaining = int(max(0, math.Floor(capf-level(e))))
	empty := firstAt(base*per/lim, e, func(e int64) bool { return level(e) == 0 })
	d.ResetAfter = time.Duration(empty - e)
	if d.Allowed && n > 0 {
		s.full = last + empty
	}
	return d
}

// firstAt returns the least e ≥ lo for which the monotone condition ok holds,
// starting the search from guess, an estimate in floating point that is off
// by at most a few nanoseconds. It makes the RetryAfter and ResetAfter of
// the float64 algorithms agree exactly with their decisions.
func firstAt(guess float64, lo int64, ok func(e int64) bool) int64 {
	e := lo
	if guess > float64(lo) {
		e = int64(min(math.Ceil(guess), maxHorizon))
	}
	for range 64 {
		if e > lo && ok(e-1) {
			e--
		} else if !ok(e) {
			e++
		} else {
			break
		}
	}
	return e
}

// floorDiv is a/b rounded towards minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// mulDiv returns floor(a·b/c) and whether the remainder is non-zero, for
// a, b ≥ 0 and c > 0, computing a·b in 128 bits. A quotient that does not
// fit in an int64 is returned as math.MaxInt64.
func mulDiv(a, b, c int64) (q int64, inexact bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64, true
	}
	uq, r := bits.Div64(hi, lo, uint64(c))
	if uq > math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(uq), r != 0
}
