package redisstore

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/clock"
)

// circuit is the store's small breaker around Redis: after threshold
// consecutive failures it opens for openFor, during which no call reaches
// Redis; then one call at a time is let through as a probe (half-open): a
// successful probe closes it, a failed one opens it again for openFor.
//
// Consecutive means one after the other in time: a failed call that started
// before the last counted failure was recorded overlapped it, and does not
// count again. A stall of Redis that times out every call in flight at once
// (64 concurrent callers, one 60ms pause) is one failure, not 64; a dead
// Redis, where each new call fails, reaches the threshold after threshold
// round trips.
//
// It is lock-free: a closed circuit costs one atomic load per call. Only a
// probe closes an open circuit; results of calls that started before it
// opened only add to the failure count.
type circuit struct {
	clock     clock.Clock
	threshold int32
	openFor   int64 // nanoseconds

	failures    atomic.Int32 // consecutive failures while closed
	lastFailure atomic.Int64 // Nanotime at which the last failure was counted
	openUntil   atomic.Int64 // 0: closed; otherwise open until this Nanotime
	probing     atomic.Bool  // a half-open probe is in flight
}

// allow reports whether a call may go to Redis and whether it is the
// half-open probe. When it may not, wait is how long the circuit stays open
// (zero while another probe is in flight).
func (c *circuit) allow() (ok, probe bool, wait int64) {
	until := c.openUntil.Load()
	if until == 0 {
		return true, false, 0
	}
	now := c.clock.Nanotime()
	if now < until {
		return false, false, until - now
	}
	if c.probing.CompareAndSwap(false, true) {
		return true, true, 0
	}
	return false, false, 0
}

// success records a call that Redis answered.
func (c *circuit) success(probe bool) {
	c.failures.Store(0)
	if probe {
		c.openUntil.Store(0)
		c.probing.Store(false)
	}
}

// failure records a call, started at Nanotime start, that failed; it opens
// the circuit on the threshold-th consecutive failure, or at once for a
// probe.
func (c *circuit) failure(probe bool, start int64) {
	now := c.clock.Nanotime()
	if probe {
		c.openUntil.Store(now + c.openFor)
		c.probing.Store(false)
		return
	}
	if start < c.lastFailure.Load() {
		return // it overlapped a counted failure
	}
	c.lastFailure.Store(now)
	if c.failures.Add(1) >= c.threshold && c.openUntil.CompareAndSwap(0, now+c.openFor) {
		c.failures.Store(0)
	}
}

// abandon records a probe whose caller gave up before Redis answered: the
// circuit stays half-open and the next call probes again.
func (c *circuit) abandon(probe bool) {
	if probe {
		c.probing.Store(false)
	}
}

// isOpen reports whether calls are currently kept from Redis.
func (c *circuit) isOpen() bool { return c.openUntil.Load() != 0 }
