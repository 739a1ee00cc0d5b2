package concurrency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

func TestNewLimiterValidation(t *testing.T) {
	alg := fixedLimit(4)
	tests := []struct {
		name    string
		opts    LimiterOptions
		wantErr string
	}{
		{"ok", LimiterOptions{Algorithm: alg}, ""},
		{"ok with priorities", LimiterOptions{Algorithm: alg, Priorities: []Share{{0.5}, {0.3}, {0.2}}}, ""},
		{"no algorithm", LimiterOptions{}, "Algorithm"},
		{"negative queue", LimiterOptions{Algorithm: alg, MaxQueue: -1}, "MaxQueue"},
		{"bad order", LimiterOptions{Algorithm: alg, Order: 7}, "Order"},
		{"negative wait", LimiterOptions{Algorithm: alg, MaxWait: -time.Second}, "MaxWait"},
		{"too many classes", LimiterOptions{Algorithm: alg, Priorities: make([]Share, 4)}, "at most 3"},
		{"fraction above 1", LimiterOptions{Algorithm: alg, Priorities: []Share{{1.5}}}, "Fraction"},
		{"fractions above 1 in sum", LimiterOptions{Algorithm: alg, Priorities: []Share{{0.6}, {0.6}}}, "sum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLimiter(tt.opts)
			if tt.wantErr == "" {
				if err != nil || l == nil {
					t.Fatalf("NewLimiter: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewLimiter error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestLimiterInitialLimitIsClamped(t *testing.T) {
	for _, tt := range []struct{ alg, want int }{{0, 1}, {5, 5}, {MaxLimit + 10, MaxLimit}} {
		l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(tt.alg)})
		if got := l.Limit(); got != tt.want {
			t.Errorf("Limit with an algorithm at %d = %d, want %d", tt.alg, got, tt.want)
		}
	}
}

func TestLimiterRejectsAtTheLimitWithoutTouchingSlots(t *testing.T) {
	ctx := context.Background()
	alg := &recorder{limit: 2}
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg, Name: "infer"})
	ps := mustAcquire(t, ctx, l, 2)
	for range 3 {
		_, err := l.Acquire(ctx)
		var rej *sluice.Rejection
		if !errors.As(err, &rej) || rej.Reason != sluice.Overloaded || rej.Policy != "infer" {
			t.Fatalf("Acquire at the limit = %v, want an Overloaded rejection from \"infer\"", err)
		}
	}
	if l.InFlight() != 2 || l.Rejected() != 3 || len(alg.got()) != 0 {
		t.Fatalf("InFlight, Rejected, samples = %d, %d, %d, want 2, 3, 0", l.InFlight(), l.Rejected(), len(alg.got()))
	}
	for _, p := range ps {
		p.Done(success)
	}
	if l.InFlight() != 0 {
		t.Fatalf("InFlight = %d, want 0", l.InFlight())
	}
}

// TestLimiterRejectedCallsNeverSample is the regression test for the seed
// design, where rejected calls recorded near-zero latency samples and freed
// slots they never held.
func TestLimiterRejectedCallsNeverSample(t *testing.T) {
	ctx := context.Background()
	alg := &recorder{limit: 1}
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg})
	g := sluice.New(l)
	held := mustAcquire(t, ctx, l, 1)[0]
	for range 5 {
		_, err := sluice.Do(ctx, g, func(context.Context) (int, error) { return 1, nil })
		if !errors.Is(err, sluice.ErrRejected) {
			t.Fatalf("Do at the limit = %v, want a rejection", err)
		}
		r := l.Run(ctx, func(context.Context) sluice.Result { return sluice.Result{} })
		if r.Class != sluice.Dropped || !errors.Is(r.Err, sluice.ErrRejected) {
			t.Fatalf("Run at the limit = %+v, want a Dropped rejection", r.Outcome)
		}
	}
	if n := len(alg.got()); n != 0 || l.InFlight() != 1 {
		t.Fatalf("samples, InFlight = %d, %d, want 0, 1", n, l.InFlight())
	}
	held.Done(success)
	if n := len(alg.got()); n != 1 || l.InFlight() != 0 {
		t.Fatalf("samples, InFlight = %d, %d, want 1, 0", n, l.InFlight())
	}
}

func TestLimiterSamples(t *testing.T) {
	tests := []struct {
		name    string
		outcome sluice.Outcome
		want    []sample // the now field is the fake clock's, 0
	}{
		{"success", sluice.Outcome{Class: sluice.Success, Latency: 7 * time.Millisecond},
			[]sample{{rtt: 7 * time.Millisecond, inflight: 3}}},
		{"failure", sluice.Outcome{Class: sluice.Failure, Err: errors.New("boom"), Latency: time.Millisecond},
			[]sample{{rtt: time.Millisecond, inflight: 3}}},
		{"deadline is dropped", sluice.Outcome{Class: sluice.Failure, Err: fmt.Errorf("call: %w", context.DeadlineExceeded), Latency: time.Second},
			[]sample{{rtt: time.Second, inflight: 3, dropped: true}}},
		{"sluice timeout is dropped", sluice.Outcome{Class: sluice.Failure, Err: sluice.ErrTimeout, Latency: time.Second},
			[]sample{{rtt: time.Second, inflight: 3, dropped: true}}},
		{"ignored", sluice.Outcome{Class: sluice.Ignored, Err: context.Canceled, Latency: time.Second}, nil},
		{"dropped", sluice.Outcome{Class: sluice.Dropped, Err: errors.New("later policy")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			alg := &recorder{limit: 10}
			l, _ := NewLimiter(LimiterOptions{Algorithm: alg, Clock: clock.NewFake(time.Time{})})
			ps := mustAcquire(t, ctx, l, 3)
			ps[2].Done(tt.outcome)
			got := alg.got()
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("samples = %+v, want %+v", got, tt.want)
			}
			if l.InFlight() != 2 {
				t.Fatalf("InFlight = %d, want 2", l.InFlight())
			}
		})
	}
}

func TestLimiterLimitChanges(t *testing.T) {
	ctx := context.Background()
	alg := &recorder{limit: 2}
	type change struct{ old, new int }
	var mu sync.Mutex
	var changes []change
	var l *Limiter
	l, _ = NewLimiter(LimiterOptions{
		Algorithm: alg,
		MaxQueue:  4,
		OnLimitChange: func(old, new int) {
			// Called without locks: reading the limiter must not deadlock.
			_ = l.Limit() + l.InFlight() + l.Queued()
			mu.Lock()
			changes = append(changes, change{old, new})
			mu.Unlock()
		},
	})
	ps := mustAcquire(t, ctx, l, 2)
	out := make(chan acquired, 2)
	for i := range 2 {
		acquireAsync(ctx, l, i, out)
		eventually(t, func() bool { return l.Queued() == i+1 })
	}
	// The release hands its slot to waiter 0; the rise to 4 admits waiter 1.
	alg.set(4)
	ps[0].Done(success)
	a, b := <-out, <-out
	if a.err != nil || b.err != nil {
		t.Fatalf("waiters: %v, %v", a.err, b.err)
	}
	if l.Limit() != 4 || l.InFlight() != 3 || l.Queued() != 0 {
		t.Fatalf("Limit, InFlight, Queued = %d, %d, %d, want 4, 3, 0", l.Limit(), l.InFlight(), l.Queued())
	}
	alg.set(1)
	for _, p := range []sluice.Permit{ps[1], a.permit, b.permit} {
		p.Done(success)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []change{{2, 4}, {4, 1}}; fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Fatalf("OnLimitChange calls = %v, want %v", changes, want)
	}
}

func TestLimiterQueueOrder(t *testing.T) {
	tests := []struct {
		order QueueOrder
		want  []int
	}{
		{FIFO, []int{0, 1, 2}},
		{LIFO, []int{2, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.order.String(), func(t *testing.T) {
			ctx := context.Background()
			l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(1), MaxQueue: 3, Order: tt.order})
			held := mustAcquire(t, ctx, l, 1)[0]
			out := make(chan acquired, 3)
			for i := range 3 {
				acquireAsync(ctx, l, i, out)
				eventually(t, func() bool { return l.Queued() == i+1 })
			}
			held.Done(success)
			var got []int
			for range 3 {
				a := <-out
				if a.err != nil {
					t.Fatal(a.err)
				}
				got = append(got, a.id)
				a.permit.Done(success)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("served %v, want %v", got, tt.want)
			}
			if l.InFlight() != 0 || l.Queued() != 0 {
				t.Fatalf("InFlight, Queued = %d, %d, want 0, 0", l.InFlight(), l.Queued())
			}
		})
	}
}

func TestLimiterMaxWaitOnFakeClock(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Time{})
	alg := &recorder{limit: 1}
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 2, MaxWait: 100 * time.Millisecond, Clock: clk})
	held := mustAcquire(t, ctx, l, 1)[0]
	out := make(chan acquired, 2)
	acquireAsync(ctx, l, 0, out)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(50 * time.Millisecond)
	acquireAsync(ctx, l, 1, out)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(50 * time.Millisecond) // waiter 0 expires, waiter 1 has 50ms left
	a := <-out
	if a.id != 0 || !errors.Is(a.err, sluice.ErrRejected) {
		t.Fatalf("first result = waiter %d, %v; want waiter 0 rejected", a.id, a.err)
	}
	if l.Queued() != 1 || l.Rejected() != 1 {
		t.Fatalf("Queued, Rejected = %d, %d, want 1, 1", l.Queued(), l.Rejected())
	}
	held.Done(success)
	b := <-out
	if b.id != 1 || b.err != nil {
		t.Fatalf("second result = waiter %d, %v; want waiter 1 admitted", b.id, b.err)
	}
	b.permit.Done(success)
	if l.InFlight() != 0 || clk.Timers() != 0 || len(alg.got()) != 2 {
		t.Fatalf("InFlight, Timers, samples = %d, %d, %d, want 0, 0, 2", l.InFlight(), clk.Timers(), len(alg.got()))
	}
}

func TestLimiterContextCancelWhileQueued(t *testing.T) {
	alg := &recorder{limit: 1}
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 1})
	held := mustAcquire(t, context.Background(), l, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan acquired, 1)
	acquireAsync(ctx, l, 0, out)
	eventually(t, func() bool { return l.Queued() == 1 })
	cancel()
	a := <-out
	if !errors.Is(a.err, context.Canceled) || errors.Is(a.err, sluice.ErrRejected) {
		t.Fatalf("Acquire = %v, want context.Canceled and no rejection", a.err)
	}
	if l.Queued() != 0 || l.Rejected() != 0 {
		t.Fatalf("Queued, Rejected = %d, %d, want 0, 0", l.Queued(), l.Rejected())
	}
	held.Done(success)
	if l.InFlight() != 0 || len(alg.got()) != 1 {
		t.Fatalf("InFlight, samples = %d, %d, want 0, 1", l.InFlight(), len(alg.got()))
	}
}

// TestLimiterGrantAfterCancelPassesSlotOn covers a waiter handed a slot
// after its context ended: the slot goes to the next waiter, with no sample.
func TestLimiterGrantAfterCancelPassesSlotOn(t *testing.T) {
	alg := &recorder{limit: 1}
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 2})
	held := mustAcquire(t, context.Background(), l, 1)[0]
	w := newWaiter(0)
	l.mu.Lock()
	l.state.Or(hasWaiters)
	l.queues[0].pushBack(w)
	l.queued.Add(1)
	l.mu.Unlock()
	out := make(chan acquired, 1)
	acquireAsync(context.Background(), l, 1, out)
	eventually(t, func() bool { return l.Queued() == 2 })

	held.Done(success) // grants w, whose caller has gone
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := await(ctx, l, w, clock.Real, 0, l.label, l.rejection); !errors.Is(err, context.Canceled) {
		t.Fatalf("await = %v, want context.Canceled", err)
	}
	got := <-out
	if got.err != nil {
		t.Fatalf("next waiter: %v", got.err)
	}
	got.permit.Done(success)
	if l.InFlight() != 0 || l.Queued() != 0 || len(alg.got()) != 2 {
		t.Fatalf("InFlight, Queued, samples = %d, %d, %d, want 0, 0, 2", l.InFlight(), l.Queued(), len(alg.got()))
	}
}

func TestLimiterNoSlotLeakUnderCancelAndRelease(t *testing.T) {
	prio := []Share{{0.5}, {0.25}, {0.25}}
	// Without MaxWait, a lost wake-up would hang the test.
	for _, tt := range []struct {
		name string
		opts LimiterOptions
	}{
		{"non-blocking", LimiterOptions{Algorithm: fixedLimit(4)}},
		{"fifo", LimiterOptions{Algorithm: fixedLimit(4), MaxQueue: 4, MaxWait: time.Millisecond}},
		{"lifo", LimiterOptions{Algorithm: fixedLimit(4), MaxQueue: 4, Order: LIFO}},
		{"flapping limit", LimiterOptions{Algorithm: &flapping{}, MaxQueue: 4}},
		{"priorities", LimiterOptions{Algorithm: fixedLimit(4), Priorities: prio}},
		{"priorities queued", LimiterOptions{Algorithm: fixedLimit(4), MaxQueue: 3, MaxWait: time.Millisecond, Priorities: prio}},
		{"priorities flapping", LimiterOptions{Algorithm: &flapping{}, MaxQueue: 3, Priorities: prio}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			tt.opts.Clock = clk
			l, _ := NewLimiter(tt.opts)
			stressAdmitter(t, l, clk)
			if l.InFlight() != 0 || l.Queued() != 0 {
				t.Fatalf("InFlight, Queued = %d, %d, want 0, 0", l.InFlight(), l.Queued())
			}
		})
	}
}
