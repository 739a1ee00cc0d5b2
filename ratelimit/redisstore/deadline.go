package redisstore

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is a reusable context for one call to Redis at a time on the
// real clock: the values of a parent that cannot be cancelled, and a
// deadline. context.WithTimeout costs five allocations per call; a
// deadlineCtx, kept in a pooled batch, costs none (a new Done channel only
// after a deadline has passed).
//
// Its timer is re-armed for each call. A late run of the timer's function,
// from an earlier call, finds the deadline in the future (or the context
// disarmed) and does nothing.
type deadlineCtx struct {
	at    time.Time // the deadline; set by arm before the call
	timer *time.Timer

	mu     sync.Mutex
	parent context.Context // protected by mu; set by arm, for Value
	armed  bool            // protected by mu
	done   chan struct{}   // protected by mu; closed at the deadline
	err    error           // protected by mu; context.DeadlineExceeded once closed
}

// arm starts a call of at most d under parent, which must not be
// cancellable (parent.Done() == nil), and returns the context for it.
func (c *deadlineCtx) arm(parent context.Context, d time.Duration) context.Context {
	c.mu.Lock()
	c.parent = parent
	c.at = time.Now().Add(d)
	c.armed = true
	if c.err != nil || c.done == nil {
		c.done = make(chan struct{})
		c.err = nil
	}
	c.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d)
	}
	return c
}

// disarm ends the call: the context may be armed again.
func (c *deadlineCtx) disarm() {
	c.timer.Stop()
	c.mu.Lock()
	c.armed = false
	c.parent = nil
	c.mu.Unlock()
}

// expire closes Done if the call is still armed and its deadline has come.
func (c *deadlineCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed || c.err != nil || time.Now().Before(c.at) {
		return
	}
	c.err = context.DeadlineExceeded
	close(c.done)
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *deadlineCtx) Value(key any) any {
	c.mu.Lock()
	parent := c.parent
	c.mu.Unlock()
	if parent == nil {
		return nil
	}
	return parent.Value(key)
}
