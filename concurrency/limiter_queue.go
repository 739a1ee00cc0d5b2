package concurrency

import (
	"context"

	"github.com/sluicehq/sluice"
)

// This file holds the Limiter's slow path: the queue. While the queue is not
// empty hasWaiters is set and every change of the state word happens under
// l.mu, and after each change dispatch hands free slots to the waiters that
// may take them. So under l.mu no queued call may start, and an arrival that
// may start overtakes no one who could.
//
// Queued calls are their class's demand, so a limiter with a queue sets no
// demand bits; and no waiter is ever stranded: a waiter that may not start
// while slots are free is held back by calls in flight, whose releases
// dispatch again.

// wait is the slow path of Acquire for a limiter with a queue. A permit
// granted after a wait in the queue is marked so (sluice.Permit.AfterWait).
func (l *Limiter) wait(ctx context.Context, c int) (sluice.Permit, error) {
	l.mu.Lock()
	l.dispatch() // apply a limit that rose before judging the arrival
	for {
		s := l.state.Load()
		if l.admits(s&^hasWaiters, c, uint64(l.limit.Load()), l.queuedMask()) {
			if l.state.CompareAndSwap(s, s+one(c)) {
				l.mu.Unlock()
				return sluice.NewPermit(l, permitToken(total(s)+1, c)), nil
			}
			continue
		}
		if int(l.queued.Load()) >= l.maxQueue && !l.evictFor(c) {
			l.mu.Unlock()
			l.rejected[c].Add(1)
			return sluice.Permit{}, l.rejection
		}
		// Set hasWaiters on exactly the state judged full, so that a
		// concurrent release either frees its slot first (and the CAS fails)
		// or sees the flag and hands the slot to the queue.
		if s&hasWaiters != 0 || l.state.CompareAndSwap(s, s|hasWaiters) {
			break
		}
	}
	w := newWaiter(c)
	l.queues[c].pushBack(w)
	l.queued.Add(1)
	l.mu.Unlock()

	if err := await(ctx, l, w, l.clock, l.maxWait, l.label, l.rejection); err != nil {
		return sluice.Permit{}, err
	}
	return sluice.NewPermit(l, w.token).AfterWait(), nil
}

// releaseLocked frees a slot of class c under l.mu and hands free slots to
// waiters. It reports false, doing nothing, if the queue emptied before l.mu
// was taken.
func (l *Limiter) releaseLocked(c int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s&hasWaiters == 0 {
		return false
	}
	if count(s, c) > 0 {
		l.state.Add(-one(c))
	}
	l.dispatch()
	return true
}

// dispatch hands free slots to the waiters that may take them, best first.
// l.mu must be held.
func (l *Limiter) dispatch() {
	for {
		s := l.state.Load()
		if s&hasWaiters == 0 {
			return
		}
		w := l.pick(s&^hasWaiters, uint64(l.limit.Load()))
		if w == nil {
			return
		}
		c := int(w.class)
		// Count the slot before unqueueing, which may clear hasWaiters and
		// let arrivals in through the fast path.
		s = l.state.Add(one(c))
		l.unqueue(w)
		w.token = permitToken(total(s&^hasWaiters), c)
		w.decide(granted)
	}
}

// pick returns the waiter that should take the next free slot in state s
// under limit lim, or nil if none may: first a waiter whose class is within
// its guarantee, then one whose class may borrow, most important class
// first in both rounds. l.mu must be held.
func (l *Limiter) pick(s, lim uint64) *waiter {
	if total(s) >= lim {
		return nil
	}
	for q := range l.nclass {
		if l.queues[q].n > 0 && count(s, q) < l.guarantee(q, lim) {
			return l.next(q)
		}
	}
	mask := l.queuedMask()
	for q := range l.nclass {
		if l.queues[q].n > 0 && l.admits(s, q, lim, mask) {
			return l.next(q)
		}
	}
	return nil
}

// next returns the waiter of class q to serve first. l.mu must be held.
func (l *Limiter) next(q int) *waiter {
	if l.order == LIFO {
		return l.queues[q].tail
	}
	return l.queues[q].head
}

// evictFor rejects the queued call that would be served last among those of
// the least important class below class c, making room for a call of class
// c. It reports whether there was one. l.mu must be held.
func (l *Limiter) evictFor(c int) bool {
	for q := l.nclass - 1; q > c; q-- {
		if l.queues[q].n == 0 {
			continue
		}
		w := l.queues[q].tail
		if l.order == LIFO {
			w = l.queues[q].head
		}
		l.unqueue(w)
		w.decide(expired)
		l.rejected[q].Add(1)
		return true
	}
	return false
}

// queuedMask returns a mask with bit q set when class q has queued calls.
// l.mu must be held.
func (l *Limiter) queuedMask() uint {
	var m uint
	for q := range l.nclass {
		if l.queues[q].n > 0 {
			m |= 1 << q
		}
	}
	return m
}

// unqueue removes w from its queue, clearing hasWaiters when the last
// waiter leaves. l.mu must be held.
func (l *Limiter) unqueue(w *waiter) {
	l.queues[w.class].remove(w)
	if l.queued.Add(-1) == 0 {
		l.state.And(^hasWaiters)
	}
}

// settle implements queueOwner. A call leaving the queue may let another
// start (its class no longer reserves a share), so it dispatches.
func (l *Limiter) settle(w *waiter, st waitState) waitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.state == waiting {
		l.unqueue(w)
		w.decide(st)
		if st == expired {
			l.rejected[w.class].Add(1)
		}
		l.dispatch()
	}
	return w.state
}

// giveBack implements queueOwner: the slot is released without a sample.
func (l *Limiter) giveBack(w *waiter) { l.release(int(w.class)) }
