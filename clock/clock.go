// Package clock abstracts time so that every policy in sluice can be driven by
// a fake clock in tests.
//
// Policies read time through a Clock: Nanotime for the hot path (a monotonic
// reading, cheap and never going backwards), Now where a wall time is needed,
// and timers and deadlines for anything that waits. Real is the clock of the
// machine; Fake is a manual clock for tests that only moves when told to.
package clock

import (
	"context"
	"time"
)

// Clock is a source of time. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current wall time.
	Now() time.Time
	// Nanotime returns a monotonic reading in nanoseconds. Only differences
	// between readings of the same clock are meaningful; a reading never
	// decreases.
	Nanotime() int64
	// AfterFunc calls f in its own goroutine once d has elapsed and returns a
	// Timer that can cancel the call.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a Timer that sends the current time on C once d has
	// elapsed.
	NewTimer(d time.Duration) Timer
	// WithTimeout returns a copy of ctx that is cancelled once d has elapsed
	// on this clock, with context.DeadlineExceeded as its error.
	WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// Timer is a single-shot timer created by a Clock.
type Timer interface {
	// C is the channel the timer sends on; it is nil for timers made by
	// AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
}

// Sleep waits for d on c, or until ctx is done, whichever comes first. It
// returns ctx's error if ctx ended the wait and nil otherwise. A d of zero or
// less returns at once (with ctx's error if ctx is already done).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Or returns c, or Real when c is nil. Policies call it on their options so
// that a nil Clock means the machine's clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Real is the machine's clock.
var Real Clock = realClock{}

// epoch anchors Nanotime: time.Since on a time with a monotonic reading only
// reads the monotonic clock, which is what makes Nanotime cheap.
var epoch = time.Now()

type realClock struct{}

func (realClock) Now() time.Time  { return time.Now() }
func (realClock) Nanotime() int64 { return int64(time.Since(epoch)) }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (realClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
