package ratelimit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// ShaperOptions configures a Shaper.
type ShaperOptions struct {
	// Name names the shaper in its rejections (sluice.Rejection.Policy).
	Name string
	// Limit sets the rate: one caller every Period/Limit, rounded up to a
	// whole nanosecond. Its Algorithm and Burst are ignored: a shaper makes
	// no bursts. It must be valid (see Limit.Validate).
	Limit Limit
	// MaxQueue is the most callers that may wait at once; a caller that
	// would be one more is rejected. Zero means no cap on the count (the
	// queue is still bounded by MaxDelay). It must not be negative.
	MaxQueue int
	// MaxDelay is the longest a caller may be asked to wait; a caller whose
	// turn would come later is rejected at once. Zero means Limit.Period. It
	// must not be negative.
	MaxDelay time.Duration
	// Clock is the clock the shaper waits on; nil means clock.Real.
	Clock clock.Clock
}

// Shaper is the leaky bucket as a queue: it lets callers through one at a
// time at a steady rate, making the others wait their turn in FIFO order, so
// that what it protects sees a smooth flow instead of bursts. A caller that
// finds the shaper idle for a full interval goes through at once.
//
// A caller whose wait would exceed MaxDelay, or who would make the queue
// longer than MaxQueue, is rejected at once with a *sluice.Rejection (Reason
// sluice.RateLimited) saying when to retry. A caller whose context ends while
// it waits leaves the queue and frees its turn: every caller behind it moves
// up one interval. (This differs from cancelling an x/time/rate Reservation,
// which gives back only what later reservations have not taken.) A caller
// whose turn has already come when its context ends has used its turn and
// is let through.
//
// Guarantee: turns are at least Period/Limit apart, so at most
// 1 + Limit·t/Period callers go through in any interval of length t, as long
// as the clock's timers fire on time; a timer that fires late lets through
// together the callers whose turns have passed, keeping the long-run rate.
//
// One Shaper shapes one stream; keep one per key to shape keys separately.
// A Shaper is safe for concurrent use.
type Shaper struct {
	clock clock.Clock
	name  string

	mu       sync.Mutex // protects everything below
	limit    Limit
	t        int64 // interval between turns, in nanoseconds
	maxQueue int
	maxDelay int64
	started  bool    // a caller has gone through
	last     int64   // the instant of the last turn, if started
	queue    []*turn // the waiting callers, first to go first
	due      int64   // when queue[0] goes, if the queue is not empty
	timer    clock.Timer
	gen      uint64 // identifies the current timer
}

// turn is one waiting caller; ch is closed when its turn comes.
type turn struct{ ch chan struct{} }

var (
	_ sluice.Admitter = (*Shaper)(nil)
	_ sluice.Policy   = (*Shaper)(nil)
)

// NewShaper returns a Shaper configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions and ErrInvalidLimit
// (errors.Is) that names every unusable option.
func NewShaper(opts ShaperOptions) (*Shaper, error) {
	ps := invalid.Problems{Prefix: "ratelimit: invalid shaper options", Sentinel: ErrInvalidLimit}
	if opts.MaxQueue < 0 {
		ps.Addf("MaxQueue %d is negative", opts.MaxQueue)
	}
	if opts.MaxDelay < 0 {
		ps.Addf("MaxDelay %v is negative", opts.MaxDelay)
	}
	l, p, err := shaperParams(opts.Limit)
	ps.Add(err)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	s := &Shaper{clock: clock.Or(opts.Clock), name: opts.Name, maxQueue: opts.MaxQueue, maxDelay: int64(opts.MaxDelay)}
	s.limit, s.t = l, p.t
	if s.maxDelay == 0 {
		s.maxDelay = int64(opts.Limit.Period)
	}
	return s, nil
}

// shaperParams returns l as a Shaper runs it (GCRA, no burst) and its
// params, or the error naming its problems.
func shaperParams(l Limit) (Limit, params, error) {
	l.Algorithm, l.Burst = GCRA, 0
	p, err := l.params()
	return l, p, err
}

// SetLimit changes the rate for the turns scheduled from now on; the turn
// already scheduled keeps its time. It returns an error, and changes nothing,
// if l is invalid.
func (s *Shaper) SetLimit(l Limit) error {
	l, p, err := shaperParams(l)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.limit, s.t = l, p.t
	s.mu.Unlock()
	return nil
}

// Limit returns the current limit (with Algorithm GCRA and Burst zero).
func (s *Shaper) Limit() Limit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}

// Queued returns how many callers are waiting.
func (s *Shaper) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Wait returns nil when the caller's turn comes, at once if the shaper is
// idle. It returns a *sluice.Rejection at once if the caller's turn would
// come more than MaxDelay from now or the queue is full, and ctx's error if
// ctx ends before the turn comes (the turn is then freed).
func (s *Shaper) Wait(ctx context.Context) error {
	_, err := s.wait(ctx)
	return err
}

// wait is Wait, and also reports whether the caller queued for its turn.
func (s *Shaper) wait(ctx context.Context) (queued bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	now := s.clock.Nanotime()
	at := now
	switch {
	case len(s.queue) > 0:
		at = s.due + int64(len(s.queue))*s.t
	case s.started:
		at = max(now, s.last+s.t)
	}
	if at <= now {
		s.started, s.last = true, now
		s.mu.Unlock()
		return false, nil
	}
	if s.maxQueue > 0 && len(s.queue) >= s.maxQueue {
		retry := time.Duration(s.due - now)
		s.mu.Unlock()
		return false, &sluice.Rejection{Reason: sluice.RateLimited, Policy: s.name, RetryAfter: retry}
	}
	if at-now > s.maxDelay {
		retry := time.Duration(at - now - s.maxDelay)
		s.mu.Unlock()
		return false, &sluice.Rejection{Reason: sluice.RateLimited, Policy: s.name, RetryAfter: retry}
	}
	w := &turn{ch: make(chan struct{})}
	s.queue = append(s.queue, w)
	if len(s.queue) == 1 {
		s.due = at
		s.schedule(now)
	}
	s.mu.Unlock()

	select {
	case <-w.ch:
		return true, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.queue, w)
	if i < 0 {
		return true, nil // the turn came as ctx ended: it is used
	}
	s.queue = slices.Delete(s.queue, i, i+1)
	if len(s.queue) == 0 {
		s.timer.Stop()
		s.timer = nil
		s.gen++
	}
	return true, ctx.Err()
}

// schedule starts the timer for the turn at s.due, which is after now.
// s.mu must be held.
func (s *Shaper) schedule(now int64) {
	s.gen++
	gen := s.gen
	s.timer = s.clock.AfterFunc(time.Duration(s.due-now), func() { s.fire(gen) })
}

// fire lets through every waiting caller whose turn has come, then schedules
// the next turn.
func (s *Shaper) fire(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		return // a timer stopped too late
	}
	s.timer = nil
	now := s.clock.Nanotime()
	for len(s.queue) > 0 && s.due <= now {
		close(s.queue[0].ch)
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.started, s.last = true, s.due
		s.due += s.t
	}
	if len(s.queue) > 0 {
		s.schedule(now)
	}
}

// Acquire waits for the caller's turn, as Wait does, and returns a zero
// Permit (Done does nothing), marked as granted after a wait when the caller
// queued for its turn (sluice.Permit.Waited), so that a Guard checks the
// policies before the shaper again.
func (s *Shaper) Acquire(ctx context.Context) (sluice.Permit, error) {
	queued, err := s.wait(ctx)
	if err != nil || !queued {
		return sluice.Permit{}, err
	}
	return sluice.Permit{}.AfterWait(), nil
}

// Run runs next when the caller's turn comes; see sluice.RunAdmitted.
func (s *Shaper) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, s, next)
}
