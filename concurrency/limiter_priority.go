package concurrency

import (
	"context"

	"github.com/sluicehq/sluice"
)

// This file holds the admission rules of a Limiter with priority classes.

// acquireClass is Acquire for a limiter with priority classes; c is the
// call's class.
func (l *Limiter) acquireClass(ctx context.Context, c int) (sluice.Permit, error) {
	for {
		lim := uint64(l.limit.Load())
		s := l.state.Load()
		if s&hasWaiters != 0 {
			break
		}
		if l.admits(s, c, lim, 0) {
			if l.state.CompareAndSwap(s, s+one(c)) {
				return sluice.NewPermit(l, permitToken(total(s)+1, c)), nil
			}
			continue
		}
		if l.maxQueue > 0 {
			break
		}
		if !l.refuse(c, s) {
			l.rejected[c].Add(1)
			return sluice.Permit{}, l.rejection
		}
	}
	return l.wait(ctx, c)
}

// guarantee returns the slots guaranteed to class c under limit lim.
func (l *Limiter) guarantee(c int, lim uint64) uint64 {
	return uint64(l.frac[c]*float64(lim) + 1e-9)
}

// admits reports whether a call of class c may start in state s under limit
// lim. queuedMask has bit q set when class q has queued calls. A class has
// demand when it has queued calls or its demand bit is set; it is active when
// it has demand or calls in flight.
func (l *Limiter) admits(s uint64, c int, lim uint64, queuedMask uint) bool {
	var n [NumPriorities]uint64
	var t uint64
	for q := range l.nclass {
		n[q] = count(s, q)
		t += n[q]
	}
	if t >= lim {
		return false
	}
	if n[c] < l.guarantee(c, lim) {
		return true
	}
	// Borrowing: never while a more important class has demand, and only
	// what the active classes' unused guarantees leave.
	var reserve uint64
	for q := range l.nclass {
		if q == c {
			continue
		}
		demand := queuedMask&(1<<q) != 0 || s&want(q) != 0
		if demand && q < c {
			return false
		}
		if g := l.guarantee(q, lim); (demand || n[q] > 0) && g > n[q] {
			reserve += g - n[q]
		}
	}
	return lim-t-1 >= reserve
}

// refuse records that a call of class c may not start in state s. It first
// drops demand bits whose DemandHold has ended and reports true if there were
// any, since the call may start now; otherwise it sets the class's demand
// bit until DemandHold from now.
func (l *Limiter) refuse(c int, s uint64) bool {
	now := l.clock.Nanotime()
	if l.dropStaleDemand(s, now) {
		return true
	}
	l.wantUntil[c].Store(now + l.hold)
	if s&want(c) == 0 {
		l.state.Or(want(c))
	}
	return false
}

// dropStaleDemand clears the demand bits of s whose hold ended before now
// and reports whether there were any.
func (l *Limiter) dropStaleDemand(s uint64, now int64) bool {
	var stale uint64
	for q := range l.nclass {
		if s&want(q) != 0 && now >= l.wantUntil[q].Load() {
			stale |= want(q)
		}
	}
	if stale == 0 {
		return false
	}
	l.state.And(^stale)
	return true
}

// want returns the demand bit of class c.
func want(c int) uint64 { return 1 << (wantShift + c) }
