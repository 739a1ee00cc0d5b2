package concurrency

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// waitState is where a queued call stands. It is protected by the lock of
// the queue's owner.
type waitState uint8

const (
	waiting   waitState = iota // in the queue
	granted                    // handed a slot by a release
	expired                    // MaxWait ran out, or evicted by a more important call
	withdrawn                  // its context ended while it was still queued
)

// waiter is one call waiting in a queue. The owner's lock protects every
// field but ready, which is written to at most once, under that lock.
type waiter struct {
	prev, next *waiter
	state      waitState
	class      uint8         // priority class (Limiter only)
	token      uint64        // permit token set when granted (Limiter only)
	ready      chan struct{} // capacity 1: signalled when state leaves waiting
}

func newWaiter(class int) *waiter {
	return &waiter{class: uint8(class), ready: make(chan struct{}, 1)}
}

// decide moves w out of the waiting state and wakes its goroutine. The
// owner's lock must be held and w must already be out of its list.
func (w *waiter) decide(st waitState) {
	w.state = st
	w.ready <- struct{}{}
}

// waitList is an intrusive doubly linked list of waiters. The zero value is
// an empty list. It is protected by the lock of its owner.
type waitList struct {
	head, tail *waiter
	n          int
}

func (l *waitList) pushBack(w *waiter) {
	w.prev, w.next = l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
	l.n++
}

func (l *waitList) remove(w *waiter) {
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	l.n--
}

// queueOwner is a policy with a wait queue: Bulkhead or Limiter.
type queueOwner interface {
	// settle takes w out of the queue as st if it is still waiting (waking
	// it) and returns w's state afterwards.
	settle(w *waiter, st waitState) waitState
	// giveBack releases the slot granted to w, whose caller gave up.
	giveBack(w *waiter)
}

// await blocks until w is decided by q, maxWait elapses on c (when
// maxWait > 0), or ctx is done. It returns nil when w was granted a slot; a
// rejection when the wait expired or w was evicted; and ctx's error, wrapped,
// when ctx ended first. If ctx is done when w wakes, a slot granted at the
// same moment is given back, so that a call whose caller left never runs.
func await(ctx context.Context, q queueOwner, w *waiter, c clock.Clock, maxWait time.Duration, name string, rejection error) error {
	var t clock.Timer
	if maxWait > 0 {
		t = c.AfterFunc(maxWait, func() { q.settle(w, expired) })
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
	}
	st := q.settle(w, withdrawn)
	if t != nil {
		t.Stop()
	}
	switch st {
	case granted:
		if ctx.Err() == nil {
			return nil
		}
		q.giveBack(w)
	case expired:
		return rejection
	}
	return fmt.Errorf("sluice: %s: gave up waiting in the queue: %w", name, ctx.Err())
}
