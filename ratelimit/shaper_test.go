package ratelimit

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// shaperHarness runs waiters in goroutines against a Shaper on a fake clock.
type shaperHarness struct {
	t    *testing.T
	s    *Shaper
	fc   *clock.Fake
	done chan result
}

type result struct {
	id  int
	at  time.Duration
	err error
}

func newShaperHarness(t *testing.T, opts ShaperOptions) *shaperHarness {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	opts.Clock = fc
	s, err := NewShaper(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &shaperHarness{t: t, s: s, fc: fc, done: make(chan result, 16)}
}

// start runs Wait(ctx) as waiter id and returns once it is queued (or done).
func (h *shaperHarness) start(ctx context.Context, id int) {
	before := h.s.Queued()
	go func() {
		err := h.s.Wait(ctx)
		h.done <- result{id, time.Duration(h.fc.Nanotime()), err}
	}()
	for h.s.Queued() == before && len(h.done) == 0 {
		runtime.Gosched()
	}
}

// next returns the next waiter to finish.
func (h *shaperHarness) next() result { return <-h.done }

func TestShaperSteadyRate(t *testing.T) {
	h := newShaperHarness(t, ShaperOptions{Limit: Limit{Limit: 10, Period: time.Second}})
	ctx := context.Background()
	if err := h.s.Wait(ctx); err != nil {
		t.Fatalf("an idle shaper made the first caller wait: %v", err)
	}
	for id := 1; id <= 3; id++ {
		h.start(ctx, id)
	}
	if h.s.Queued() != 3 {
		t.Fatalf("%d queued, want 3", h.s.Queued())
	}
	for id := 1; id <= 3; id++ {
		h.fc.Advance(99 * time.Millisecond)
		if h.s.Queued() != 4-id {
			t.Fatalf("waiter %d went early", id)
		}
		h.fc.Advance(time.Millisecond)
		r := h.next()
		if r.id != id || r.err != nil || r.at != time.Duration(id)*100*time.Millisecond {
			t.Fatalf("got %+v, want waiter %d at %v", r, id, time.Duration(id)*100*time.Millisecond)
		}
	}
	// Idle for a full interval: the next caller goes at once.
	h.fc.Advance(100 * time.Millisecond)
	if err := h.s.Wait(ctx); err != nil || h.fc.Timers() != 0 {
		t.Fatalf("after an idle interval: %v, %d timers", err, h.fc.Timers())
	}
}

func TestShaperRejects(t *testing.T) {
	ctx := context.Background()
	t.Run("MaxDelay", func(t *testing.T) {
		h := newShaperHarness(t, ShaperOptions{Name: "smooth", Limit: Limit{Limit: 10, Period: time.Second}, MaxDelay: 250 * time.Millisecond})
		_ = h.s.Wait(ctx)
		h.start(ctx, 1) // at 100ms
		h.start(ctx, 2) // at 200ms
		err := h.s.Wait(ctx)
		var rej *sluice.Rejection
		if !errors.As(err, &rej) || rej.Reason != sluice.RateLimited || rej.Policy != "smooth" || rej.RetryAfter != 50*time.Millisecond {
			t.Fatalf("a wait of 300ms with MaxDelay 250ms: %v", err)
		}
		h.fc.Advance(200 * time.Millisecond)
		h.next()
		h.next()
	})
	t.Run("MaxQueue", func(t *testing.T) {
		h := newShaperHarness(t, ShaperOptions{Limit: Limit{Limit: 10, Period: time.Second}, MaxQueue: 2})
		_ = h.s.Wait(ctx)
		h.start(ctx, 1)
		h.start(ctx, 2)
		_, err := h.s.Acquire(ctx)
		if d, ok := sluice.RetryAfter(err); !errors.Is(err, sluice.ErrRejected) || !ok || d != 100*time.Millisecond {
			t.Fatalf("a third waiter with MaxQueue 2: %v", err)
		}
		h.fc.Advance(200 * time.Millisecond)
		h.next()
		h.next()
	})
	t.Run("options", func(t *testing.T) {
		for _, opts := range []ShaperOptions{
			{},
			{Limit: Limit{Limit: 1, Period: time.Second}, MaxQueue: -1},
			{Limit: Limit{Limit: 1, Period: time.Second}, MaxDelay: -1},
		} {
			if _, err := NewShaper(opts); !errors.Is(err, ErrInvalidLimit) {
				t.Errorf("%+v: %v, want ErrInvalidLimit", opts, err)
			}
		}
	})
}

// TestShaperCancel cancels a queued caller: it leaves the queue and those
// behind it move up.
func TestShaperCancel(t *testing.T) {
	h := newShaperHarness(t, ShaperOptions{Limit: Limit{Limit: 10, Period: time.Second}})
	ctx := context.Background()
	_ = h.s.Wait(ctx)
	h.start(ctx, 1) // at 100ms
	cctx, cancel := context.WithCancel(ctx)
	h.start(cctx, 2) // at 200ms
	h.start(ctx, 3)  // at 300ms, moved up to 200ms
	cancel()
	if r := h.next(); r.id != 2 || !errors.Is(r.err, context.Canceled) || r.at != 0 {
		t.Fatalf("cancelled waiter: %+v", r)
	}
	h.fc.Advance(100 * time.Millisecond)
	if r := h.next(); r.id != 1 || r.err != nil {
		t.Fatalf("first waiter: %+v", r)
	}
	h.fc.Advance(100 * time.Millisecond)
	if r := h.next(); r.id != 3 || r.err != nil || r.at != 200*time.Millisecond {
		t.Fatalf("third waiter moved up: %+v", r)
	}
	// Cancelling the only waiter stops the timer; its turn is free again.
	cctx, cancel = context.WithCancel(ctx)
	h.start(cctx, 4) // at 300ms
	cancel()
	if r := h.next(); r.id != 4 || !errors.Is(r.err, context.Canceled) || h.fc.Timers() != 0 {
		t.Fatalf("cancelled only waiter: %+v, %d timers", r, h.fc.Timers())
	}
	h.start(ctx, 5)
	h.fc.Advance(100 * time.Millisecond)
	if r := h.next(); r.id != 5 || r.at != 300*time.Millisecond {
		t.Fatalf("waiter after the cancelled one: %+v", r)
	}
	// A context that is already done does not queue.
	if err := h.s.Wait(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
}

// TestShaperTimeout uses the fake clock's own timeout: the waiter gives up
// before its turn and frees it.
func TestShaperTimeout(t *testing.T) {
	h := newShaperHarness(t, ShaperOptions{Limit: Limit{Limit: 1, Period: time.Second}})
	ctx := context.Background()
	_ = h.s.Wait(ctx)
	tctx, cancel := h.fc.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	h.start(tctx, 1)
	h.fc.Advance(500 * time.Millisecond)
	if r := h.next(); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("timed out waiter: %+v", r)
	}
	h.start(ctx, 2)
	h.fc.Advance(500 * time.Millisecond)
	if r := h.next(); r.id != 2 || r.err != nil || r.at != time.Second {
		t.Fatalf("next waiter: %+v", r)
	}
	if err := h.s.SetLimit(Limit{Limit: 2, Period: time.Second}); err != nil || h.s.Limit().Limit != 2 {
		t.Fatalf("SetLimit: %v", err)
	}
}

// TestShaperMarksQueuedPermits checks that Acquire marks a permit granted
// after the caller queued for its turn (so that a Guard checks the policies
// before the shaper again), and only such a permit.
func TestShaperMarksQueuedPermits(t *testing.T) {
	h := newShaperHarness(t, ShaperOptions{Limit: Limit{Limit: 10, Period: time.Second}})
	ctx := context.Background()
	if p, err := h.s.Acquire(ctx); err != nil || p.Waited() {
		t.Fatalf("first caller: waited %v, %v; want a permit at once", p.Waited(), err)
	}
	got := make(chan sluice.Permit, 1)
	go func() {
		p, err := h.s.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	for h.s.Queued() == 0 {
		runtime.Gosched()
	}
	h.fc.Advance(100 * time.Millisecond)
	if p := <-got; !p.Waited() {
		t.Fatal("a caller that queued got a permit not marked as waited")
	}
}
