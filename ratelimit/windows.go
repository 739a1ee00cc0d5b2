package ratelimit

import "time"

// fixedWindow is the fixed-window counter: b events were admitted in the
// window that ends at instant a. Windows are aligned to multiples of Period
// on the clock. When the Period changes the current window keeps its end;
// the next one is aligned to the new Period.
//
// Guarantee: at most Limit events in each aligned window, hence at most
// 2·Limit in any interval of length Period (a full quota at the end of one
// window and another at the start of the next).
func (s *state) fixedWindow(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	end, count := s.a, s.b
	if now >= end {
		end, count = floorDiv(now, p.period)*p.period+p.period, 0
	}
	switch {
	case n > p.limit:
		d.RetryAfter = RetryNever
	case count+n > p.limit:
		d.RetryAfter = time.Duration(end - now)
	default:
		d.Allowed = true
		if n > 0 {
			count += n
			s.a, s.b, s.full = end, count, end
		}
	}
	d.Remaining = int(max(0, p.limit-count))
	if count > 0 {
		d.ResetAfter = time.Duration(end - now)
	}
	return d
}

// slidingWindow is the sliding-window counter: c events were admitted in the
// aligned window that starts at instant a, and b in the window before it. It
// estimates the events of the last Period as b weighted by the part of the
// previous window still inside it, plus c, as if the previous window's
// events had been spread evenly; it admits n if the estimate plus n is at
// most Limit. The weight is computed exactly, in integers.
//
// Guarantee: at most Limit events in each aligned window, and at most
// 2·Limit − 1 in any interval of length Period. That is the error bound of
// the estimate: an exact sliding log would admit Limit; the estimate is
// exact when the previous window's events were evenly spread, and admits
// up to Limit−1 too many only when they were bunched at its end.
func (s *state) slidingWindow(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	start, prev, cur := s.a, s.b, s.c
	now = max(now, start)
	if k := (now - start) / p.period; k > 0 {
		if k == 1 {
			prev = cur
		} else {
			prev = 0
		}
		cur, start = 0, start+k*p.period
	}
	e := now - start
	w, inexact := mulDiv(prev, p.period-e, p.period)
	if inexact {
		w++ // the previous window's weighted events, rounded up
	}
	switch {
	case n > p.limit:
		d.RetryAfter = RetryNever
	case cur+n+w > p.limit:
		d.RetryAfter = time.Duration(slidingRetry(p, start, prev, cur, n) - now)
	default:
		d.Allowed = true
		if n > 0 {
			cur += n
			s.a, s.b, s.c = start, prev, cur
			s.full = start + 2*p.period
		}
	}
	d.Remaining = int(max(0, p.limit-cur-w))
	switch {
	case cur > 0:
		d.ResetAfter = time.Duration(start + 2*p.period - now)
	case prev > 0:
		d.ResetAfter = time.Duration(start + p.period - now)
	}
	return d
}

// slidingRetry returns the first instant at which a request for n ≤ Limit
// events would be admitted by a sliding-window counter whose current window
// starts at start and holds cur events, after prev in the previous one.
func slidingRetry(p params, start, prev, cur, n int64) int64 {
	if m := p.limit - cur - n; m >= 0 {
		// Within this window, once prev·(Period−e) ≤ m·Period.
		q, _ := mulDiv(m, p.period, prev)
		return start + p.period - min(q, p.period)
	}
	// In the next window, where cur becomes the previous count.
	q, _ := mulDiv(p.limit-n, p.period, cur)
	return start + 2*p.period - min(q, p.period)
}

// slidingLog is the sliding-window log: log holds the timestamp of every
// event admitted in the last Period, at most Limit of them (a request for n
// events records n timestamps, so two events in the same nanosecond count
// twice). A request is admitted when the events of the half-open window
// (now−Period, now] plus n are at most Limit. When Limit shrinks, the oldest
// timestamps beyond it are dropped, which changes no decision.
//
// Guarantee: exact: at most Limit events in any interval of length Period
// that is open at one end.
func (s *state) slidingLog(p params, n, now int64) Decision {
	d := Decision{Limit: int(p.cap)}
	r := s.log
	var alive int64
	if r != nil {
		if r.n > 0 {
			now = max(now, r.newest())
		}
		r.expire(now-p.period, int(p.limit))
		alive = int64(r.n)
	}
	switch {
	case n > p.limit:
		d.RetryAfter = RetryNever
	case alive+n > p.limit:
		d.RetryAfter = time.Duration(r.at(int(alive+n-p.limit)-1) + p.period - now)
	default:
		d.Allowed = true
		if n > 0 {
			if r == nil {
				r = &ring{}
				s.log = r
			}
			r.push(now, int(n), int(p.limit))
			alive += n
			s.full = now + p.period
		}
	}
	d.Remaining = int(p.limit - alive)
	if alive > 0 {
		d.ResetAfter = time.Duration(r.newest() + p.period - now)
	}
	return d
}

// ring is a FIFO of timestamps, oldest first, in a circular buffer that grows
// by doubling up to the limit.
type ring struct {
	ts   []int64
	head int // index of the oldest timestamp
	n    int // number of timestamps held
}

// at returns the i-th oldest timestamp, 0 ≤ i < r.n.
func (r *ring) at(i int) int64 { return r.ts[(r.head+i)%len(r.ts)] }

func (r *ring) newest() int64 { return r.at(r.n - 1) }

// expire drops the timestamps at or before cutoff, then the oldest ones
// beyond limit, and shrinks the buffer if it is larger than limit.
func (r *ring) expire(cutoff int64, limit int) {
	for r.n > 0 && (r.ts[r.head] <= cutoff || r.n > limit) {
		r.head = (r.head + 1) % len(r.ts)
		r.n--
	}
	if len(r.ts) > limit {
		r.resize(limit)
	}
}

// push appends k copies of t; r.n+k must be at most limit.
func (r *ring) push(t int64, k, limit int) {
	if r.n+k > len(r.ts) {
		r.resize(min(limit, max(4, 2*len(r.ts), r.n+k)))
	}
	for range k {
		r.ts[(r.head+r.n)%len(r.ts)] = t
		r.n++
	}
}

// resize moves the timestamps, oldest first, to a buffer of size c ≥ r.n.
func (r *ring) resize(c int) {
	ts := make([]int64, c)
	for i := range r.n {
		ts[i] = r.at(i)
	}
	r.ts, r.head = ts, 0
}
