package concurrency

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

func TestNewBulkheadValidation(t *testing.T) {
	tests := []struct {
		name    string
		opts    BulkheadOptions
		wantErr string
	}{
		{"ok", BulkheadOptions{MaxConcurrent: 1}, ""},
		{"ok with queue", BulkheadOptions{MaxConcurrent: 4, MaxQueue: 10, MaxWait: time.Second}, ""},
		{"zero max", BulkheadOptions{}, "MaxConcurrent"},
		{"negative queue", BulkheadOptions{MaxConcurrent: 1, MaxQueue: -1}, "MaxQueue"},
		{"negative wait", BulkheadOptions{MaxConcurrent: 1, MaxWait: -1}, "MaxWait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBulkhead(tt.opts)
			if tt.wantErr == "" {
				if err != nil || b == nil {
					t.Fatalf("NewBulkhead: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewBulkhead error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewNamesEveryBadOption(t *testing.T) {
	alg := fixedLimit(4)
	tests := []struct {
		name  string
		new   func() error
		names []string
	}{
		{"bulkhead", func() error {
			_, err := NewBulkhead(BulkheadOptions{MaxQueue: -1, MaxWait: -time.Second})
			return err
		}, []string{"MaxConcurrent 0", "MaxQueue -1", "MaxWait -1s"}},
		{"limiter", func() error {
			_, err := NewLimiter(LimiterOptions{Order: 7, DemandHold: -1, Priorities: []Share{{1.5}, {0.2}}})
			return err
		}, []string{"Algorithm is required", "Order 7", "DemandHold -1ns", "Priorities[0].Fraction 1.5", "fractions sum to 1.7"}},
		{"limiter queue and wait", func() error {
			_, err := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: -2, MaxWait: -time.Second, Priorities: make([]Share, 4)})
			return err
		}, []string{"MaxQueue -2", "MaxWait -1s", "Priorities has 4 entries"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			invalidtest.Check(t, tt.new(), nil, tt.names...)
		})
	}
}

func TestBulkheadFailFast(t *testing.T) {
	ctx := context.Background()
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 2, Name: "db"})
	ps := mustAcquire(t, ctx, b, 2)
	_, err := b.Acquire(ctx)
	var rej *sluice.Rejection
	if !errors.As(err, &rej) || rej.Reason != sluice.Overloaded || rej.Policy != "db" {
		t.Fatalf("Acquire when full = %v, want an Overloaded rejection from \"db\"", err)
	}
	if got := b.InFlight(); got != 2 {
		t.Fatalf("InFlight after rejection = %d, want 2", got)
	}
	ps[0].Done(success)
	ps = append(ps[1:], mustAcquire(t, ctx, b, 1)...)
	for _, p := range ps {
		p.Done(success)
	}
	ps[0].Done(success) // surplus: must not drive the count below zero
	if got := b.InFlight(); got != 0 {
		t.Fatalf("InFlight at the end = %d, want 0", got)
	}
}

func TestBulkheadQueueIsFIFO(t *testing.T) {
	ctx := context.Background()
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1, MaxQueue: 3})
	first := mustAcquire(t, ctx, b, 1)[0]
	out := make(chan acquired, 4)
	for i := range 3 {
		acquireAsync(ctx, b, i, out)
		eventually(t, func() bool { return b.Queued() == i+1 })
	}
	if _, err := b.Acquire(ctx); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("Acquire with the queue full = %v, want a rejection", err)
	}
	// An arrival must not overtake the queue while a slot is handed over.
	first.Done(success)
	for want := range 3 {
		got := <-out
		if got.err != nil || got.id != want {
			t.Fatalf("served waiter %d (err %v), want waiter %d", got.id, got.err, want)
		}
		if b.InFlight() != 1 {
			t.Fatalf("InFlight = %d, want 1", b.InFlight())
		}
		got.permit.Done(success)
	}
	if b.InFlight() != 0 || b.Queued() != 0 {
		t.Fatalf("InFlight, Queued = %d, %d, want 0, 0", b.InFlight(), b.Queued())
	}
}

func TestBulkheadMaxWaitOnFakeClock(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Time{})
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1, MaxQueue: 1, MaxWait: time.Second, Clock: clk})
	held := mustAcquire(t, ctx, b, 1)[0]
	out := make(chan acquired, 1)
	acquireAsync(ctx, b, 0, out)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second - 1)
	if b.Queued() != 1 {
		t.Fatalf("Queued before MaxWait = %d, want 1", b.Queued())
	}
	clk.Advance(1)
	got := <-out
	var rej *sluice.Rejection
	if !errors.As(got.err, &rej) || rej.Reason != sluice.Overloaded {
		t.Fatalf("Acquire after MaxWait = %v, want an Overloaded rejection", got.err)
	}
	held.Done(success)
	if b.InFlight() != 0 || b.Queued() != 0 || clk.Timers() != 0 {
		t.Fatalf("InFlight, Queued, Timers = %d, %d, %d, want 0s", b.InFlight(), b.Queued(), clk.Timers())
	}
}

func TestBulkheadContextEndsWait(t *testing.T) {
	tests := []struct {
		name string
		want error
	}{
		{"cancelled", context.Canceled},
		{"deadline", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1, MaxQueue: 1, Clock: clk})
			held := mustAcquire(t, context.Background(), b, 1)[0]
			ctx, cancel := clk.WithTimeout(context.Background(), time.Second)
			defer cancel()
			out := make(chan acquired, 1)
			acquireAsync(ctx, b, 0, out)
			eventually(t, func() bool { return b.Queued() == 1 })
			if tt.want == context.Canceled {
				cancel()
			} else {
				clk.Advance(time.Second)
			}
			got := <-out
			if !errors.Is(got.err, tt.want) || errors.Is(got.err, sluice.ErrRejected) {
				t.Fatalf("Acquire = %v, want %v and no rejection", got.err, tt.want)
			}
			if b.Queued() != 0 {
				t.Fatalf("Queued = %d, want 0", b.Queued())
			}
			held.Done(success)
			if b.InFlight() != 0 {
				t.Fatalf("InFlight = %d, want 0", b.InFlight())
			}
		})
	}
}

// TestBulkheadGrantAfterCancelPassesSlotOn covers a waiter handed a slot
// after its context ended: it must give the slot to the next waiter.
func TestBulkheadGrantAfterCancelPassesSlotOn(t *testing.T) {
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1, MaxQueue: 2})
	held := mustAcquire(t, context.Background(), b, 1)[0]
	w := newWaiter(0)
	b.mu.Lock()
	b.state.Or(hasWaiters)
	b.queue.pushBack(w)
	b.mu.Unlock()
	out := make(chan acquired, 1)
	acquireAsync(context.Background(), b, 1, out)
	eventually(t, func() bool { return b.Queued() == 2 })

	held.Done(success) // grants w, whose caller has gone
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := await(ctx, b, w, clock.Real, 0, b.label, b.rejection); !errors.Is(err, context.Canceled) {
		t.Fatalf("await = %v, want context.Canceled", err)
	}
	got := <-out
	if got.err != nil {
		t.Fatalf("next waiter: %v", got.err)
	}
	got.permit.Done(success)
	if b.InFlight() != 0 || b.Queued() != 0 {
		t.Fatalf("InFlight, Queued = %d, %d, want 0, 0", b.InFlight(), b.Queued())
	}
}

// TestBulkheadNoSlotLeakUnderCancelAndRelease races cancellations, expiries
// and releases; every slot must come back.
func TestBulkheadNoSlotLeakUnderCancelAndRelease(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 2, MaxQueue: 4, MaxWait: time.Millisecond, Clock: clk})
	stressAdmitter(t, b, clk)
	if b.InFlight() != 0 || b.Queued() != 0 {
		t.Fatalf("InFlight, Queued = %d, %d, want 0, 0", b.InFlight(), b.Queued())
	}
}

// stressAdmitter runs goroutines that acquire with contexts cancelled at
// arbitrary moments while the fake clock fires MaxWait timers.
func stressAdmitter(t *testing.T, a sluice.Admitter, clk *clock.Fake) {
	t.Helper()
	const workers, iterations = 8, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	ticker := make(chan struct{})
	go func() {
		defer close(ticker)
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Millisecond / 2)
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iterations {
				ctx, cancel := context.WithCancel(WithPriority(context.Background(), Priority(i%NumPriorities)))
				if (i+w)%3 == 0 {
					go cancel()
				}
				p, err := a.Acquire(ctx)
				if err == nil {
					if i%2 == 0 {
						p.Done(success)
					} else {
						p.Done(sluice.Outcome{Class: sluice.Dropped})
					}
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-ticker
}

func TestBulkheadInGuard(t *testing.T) {
	ctx := context.Background()
	b, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1})
	g := sluice.New(b)
	var inner error
	got, err := sluice.Do(ctx, g, func(ctx context.Context) (int, error) {
		_, inner = sluice.Do(ctx, g, func(context.Context) (int, error) { return 0, nil })
		return 7, nil
	})
	if got != 7 || err != nil || !errors.Is(inner, sluice.ErrRejected) {
		t.Fatalf("Do = %d, %v; nested Do = %v; want 7, nil and a rejection", got, err, inner)
	}
	r := b.Run(ctx, func(context.Context) sluice.Result { return sluice.Result{Value: 1} })
	if r.Value != 1 || b.InFlight() != 0 {
		t.Fatalf("Run = %+v with %d in flight, want value 1 and 0", r, b.InFlight())
	}
}
