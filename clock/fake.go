package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance or Set is called. Timers fire,
// in order of their deadlines, from inside the call that moves the clock past
// them: AfterFunc callbacks run synchronously in that call (without any lock
// of the clock held), so that when Advance returns everything due has
// happened. The zero value is not usable; use NewFake.
type Fake struct {
	mu      sync.Mutex // protects everything below
	now     time.Time
	start   time.Time
	timers  []*fakeTimer
	waiters []waiter
}

type waiter struct {
	n  int
	ch chan struct{}
}

// NewFake returns a fake clock that reads start. A zero start is replaced by
// 2026-01-01T00:00:00Z so that tests print stable times.
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return &Fake{now: start, start: start}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Nanotime returns the nanoseconds elapsed on the fake clock since NewFake.
func (f *Fake) Nanotime() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(f.now.Sub(f.start))
}

// Advance moves the clock forward by d and fires every timer that falls due,
// in deadline order. A negative d is ignored: time never goes backwards.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the clock to t, firing due timers as Advance does. A t before the
// current fake time is ignored.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(t) {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		ft := f.timers[0]
		f.timers = f.timers[1:]
		if ft.when.After(f.now) {
			f.now = ft.when
		}
		now := f.now
		ft.fired = true
		f.mu.Unlock()
		ft.fire(now)
	}
}

// Timers returns how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are waiting to fire, or ctx is
// done. Tests use it to know that a goroutine has started waiting on the
// clock before they advance it.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	f.mu.Lock()
	if len(f.timers) >= n {
		f.mu.Unlock()
		return nil
	}
	w := waiter{n: n, ch: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterFunc implements Clock.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(d, &fakeTimer{f: f, fn: fn})
}

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, &fakeTimer{f: f, ch: make(chan time.Time, 1)})
}

// WithTimeout implements Clock: the context is cancelled with
// context.DeadlineExceeded when the fake clock reaches now+d. Its Deadline
// method reports that instant in the fake clock's time (or the parent's
// deadline, if earlier), so code that compares a deadline with the clock's
// Now sees the time left on the fake clock.
func (f *Fake) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	deadline := f.Now().Add(d)
	if pd, ok := ctx.Deadline(); ok && pd.Before(deadline) {
		deadline = pd
	}
	t := f.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	fctx := &fakeDeadlineCtx{Context: cctx, deadline: deadline}
	return fctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// fakeDeadlineCtx reports the cancellation cause as its error, so that a
// fake timeout looks like a real one (context.DeadlineExceeded).
type fakeDeadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *fakeDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *fakeDeadlineCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}

func (f *Fake) add(d time.Duration, t *fakeTimer) *fakeTimer {
	f.mu.Lock()
	t.when = f.now.Add(d)
	if d <= 0 {
		now := f.now
		t.fired = true
		f.mu.Unlock()
		t.fire(now)
		return t
	}
	i := sort.Search(len(f.timers), func(i int) bool { return f.timers[i].when.After(t.when) })
	f.timers = append(f.timers, nil)
	copy(f.timers[i+1:], f.timers[i:])
	f.timers[i] = t
	var ready []chan struct{}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if len(f.timers) >= w.n {
			ready = append(ready, w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
	f.mu.Unlock()
	for _, ch := range ready {
		close(ch)
	}
	return t
}

type fakeTimer struct {
	f     *Fake
	when  time.Time
	fn    func()
	ch    chan time.Time
	fired bool // protected by f.mu
}

func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		t.fn()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
