package concurrency

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

func TestPriorityFromContext(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		ctx  context.Context
		want Priority
	}{
		{bg, Normal},
		{WithPriority(bg, Critical), Critical},
		{WithPriority(bg, BestEffort), BestEffort},
		{WithPriority(bg, 200), BestEffort},
		{WithPriority(WithPriority(bg, Critical), BestEffort), BestEffort},
	}
	for i, tt := range tests {
		if got := PriorityFrom(tt.ctx); got != tt.want {
			t.Errorf("#%d: PriorityFrom = %v, want %v", i, got, tt.want)
		}
	}
}

// shares gives Critical 5, Normal 3 and BestEffort 2 slots of a limit of 10.
var shares = []Share{{0.5}, {0.3}, {0.2}}

// fill acquires n permits of priority p, which must be granted.
func fill(t *testing.T, l *Limiter, p Priority, n int) []sluice.Permit {
	t.Helper()
	return mustAcquire(t, WithPriority(context.Background(), p), l, n)
}

// admitted reports how many calls of priority p are admitted, up to max.
func admitted(l *Limiter, p Priority, max int) int {
	ctx := WithPriority(context.Background(), p)
	for i := range max {
		if _, err := l.Acquire(ctx); err != nil {
			return i
		}
	}
	return max
}

func TestLimiterPriorityAdmission(t *testing.T) {
	tests := []struct {
		name string
		held [NumPriorities]int // calls in flight per priority before the probe
		// room is how many more calls of each priority are admitted, each
		// probed alone from the held state.
		room [NumPriorities]int
	}{
		// Idle classes lend their whole share.
		{"all idle", [3]int{0, 0, 0}, [3]int{10, 10, 10}},
		{"best effort borrows everything", [3]int{0, 0, 9}, [3]int{1, 1, 1}},
		// An active class keeps its unused guarantee: Critical holds 1 of
		// its 5, so others leave 4 free.
		{"critical active", [3]int{1, 0, 0}, [3]int{9, 5, 5}},
		{"critical and normal active", [3]int{1, 1, 0}, [3]int{6, 4, 2}},
		// Within its share a class gets in, but borrows only what the
		// other active classes leave.
		{"all active", [3]int{1, 1, 1}, [3]int{4, 2, 1}},
		{"all at their share", [3]int{5, 3, 2}, [3]int{0, 0, 0}},
		{"critical borrowed the rest", [3]int{8, 0, 0}, [3]int{2, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [NumPriorities]int
			for p := range NumPriorities {
				l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(10), Priorities: shares})
				for q, n := range tt.held {
					fill(t, l, Priority(q), n)
				}
				got[p] = admitted(l, Priority(p), 20)
			}
			if got != tt.room {
				t.Fatalf("room per priority = %v, want %v", got, tt.room)
			}
		})
	}
}

// TestLimiterPrioritySheddingOrder lets best effort borrow the whole limit,
// then floods with critical calls: as best-effort calls end, their slots go
// to critical calls, until best effort is back to its share plus what
// Critical leaves.
func TestLimiterPrioritySheddingOrder(t *testing.T) {
	l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(10), Priorities: shares})
	be := fill(t, l, BestEffort, 10) // borrows the idle shares
	if got := admitted(l, Critical, 1); got != 0 {
		t.Fatalf("critical admitted %d at the limit, want 0", got)
	}
	steps := []struct {
		end                  int // best-effort calls that end
		beRoom, critRoom     int // admitted when probed, best effort first
		crit, normal, effort int // in flight after the probes
	}{
		// Critical has demand: best effort may not borrow the freed slots.
		{end: 4, beRoom: 0, critRoom: 4, crit: 4, effort: 6},
		// Critical fills its share and then borrows.
		{end: 2, beRoom: 0, critRoom: 2, crit: 6, effort: 4},
		// Best effort is back to its share of 2, which it keeps.
		{end: 2, beRoom: 0, critRoom: 2, crit: 8, effort: 2},
		// Within its share best effort gets in, even with Critical refused.
		{end: 1, beRoom: 1, critRoom: 0, crit: 8, effort: 2},
	}
	for i, st := range steps {
		for range st.end {
			be[0].Done(success)
			be = be[1:]
		}
		if got := admitted(l, BestEffort, 10); got != st.beRoom {
			t.Fatalf("step %d: best effort admitted %d, want %d", i, got, st.beRoom)
		}
		if got := admitted(l, Critical, 10); got != st.critRoom {
			t.Fatalf("step %d: critical admitted %d, want %d", i, got, st.critRoom)
		}
		got := [3]int{l.InFlightOf(Critical), l.InFlightOf(Normal), l.InFlightOf(BestEffort)}
		if want := [3]int{st.crit, st.normal, st.effort}; got != want {
			t.Fatalf("step %d: in flight per priority = %v, want %v", i, got, want)
		}
	}
}

// TestLimiterDemandHoldExpires checks that a refused class stops reserving
// its share once DemandHold has passed on the clock without a new refusal.
func TestLimiterDemandHoldExpires(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(10), Priorities: shares, Clock: clk, DemandHold: time.Second})
	be := fill(t, l, BestEffort, 10)
	admitted(l, Critical, 1) // refused: Critical's share is reserved
	be[0].Done(success)
	if got := admitted(l, BestEffort, 1); got != 0 {
		t.Fatalf("best effort admitted %d during the hold, want 0", got)
	}
	clk.Advance(time.Second)
	if got := admitted(l, BestEffort, 1); got != 1 {
		t.Fatalf("best effort admitted %d after the hold, want 1", got)
	}
}

// TestLimiterPriorityQueue checks that a freed slot goes to a waiter within
// its share before an older waiter that would borrow, that a slot reserved
// for an active class stays free, and that a full queue evicts the least
// important waiter.
func TestLimiterPriorityQueue(t *testing.T) {
	l, _ := NewLimiter(LimiterOptions{
		Algorithm:  fixedLimit(4),
		MaxQueue:   2,
		Priorities: []Share{{0.5}, {0}, {0.5}}, // Critical 2, BestEffort 2
	})
	be := fill(t, l, BestEffort, 4) // borrows Critical's idle share
	out := make(chan acquired, 4)
	acquireAsync(WithPriority(context.Background(), BestEffort), l, 0, out)
	eventually(t, func() bool { return l.Queued() == 1 })
	acquireAsync(WithPriority(context.Background(), Critical), l, 1, out)
	eventually(t, func() bool { return l.Queued() == 2 })

	// The queue is full: a Critical arrival evicts the best-effort waiter.
	acquireAsync(WithPriority(context.Background(), Critical), l, 2, out)
	if a := <-out; a.id != 0 || !errors.Is(a.err, sluice.ErrRejected) {
		t.Fatalf("got waiter %d (%v), want best-effort waiter 0 evicted", a.id, a.err)
	}
	eventually(t, func() bool { return l.Queued() == 2 })

	// Each best-effort release goes to a Critical waiter, in FIFO order.
	var crit []sluice.Permit
	for want := 1; want <= 2; want++ {
		be[want-1].Done(success)
		a := <-out
		if a.id != want || a.err != nil {
			t.Fatalf("got waiter %d (%v), want critical waiter %d", a.id, a.err, want)
		}
		crit = append(crit, a.permit)
	}
	// A best-effort waiter may borrow only once Critical is idle: while
	// Critical is active its unused share is kept.
	acquireAsync(WithPriority(context.Background(), BestEffort), l, 3, out)
	eventually(t, func() bool { return l.Queued() == 1 })
	crit[0].Done(success)
	if l.Queued() != 1 {
		t.Fatalf("Queued = %d, want 1: the freed slot is Critical's", l.Queued())
	}
	crit[1].Done(success)
	if a := <-out; a.id != 3 || a.err != nil {
		t.Fatalf("got waiter %d (%v), want best-effort waiter 3", a.id, a.err)
	}
	if got := fmt.Sprint(l.InFlightOf(Critical), l.InFlightOf(BestEffort), l.Queued()); got != "0 3 0" {
		t.Fatalf("critical, best effort in flight, queued = %s, want 0 3 0", got)
	}
	if l.RejectedOf(BestEffort) != 1 {
		t.Fatalf("RejectedOf(BestEffort) = %d, want 1", l.RejectedOf(BestEffort))
	}
}

// TestLimiterPriorityQueueKeepsReservedSlotFree checks that a slot freed
// while an active class is short of its share is not handed to a borrower.
func TestLimiterPriorityQueueKeepsReservedSlotFree(t *testing.T) {
	l, _ := NewLimiter(LimiterOptions{
		Algorithm:  fixedLimit(4),
		MaxQueue:   1,
		Priorities: []Share{{0.5}, {0}, {0.5}},
	})
	be := fill(t, l, BestEffort, 3) // borrows 1 of Critical's idle share
	crit := fill(t, l, Critical, 1) // Critical is active: it reserves 1 more
	out := make(chan acquired, 1)
	acquireAsync(WithPriority(context.Background(), BestEffort), l, 0, out)
	eventually(t, func() bool { return l.Queued() == 1 })
	be[0].Done(success)
	if l.Queued() != 1 || l.InFlight() != 3 {
		t.Fatalf("Queued, InFlight = %d, %d, want 1, 3: the slot is Critical's", l.Queued(), l.InFlight())
	}
	fill(t, l, Critical, 1) // takes its reserved slot at once
	crit[0].Done(success)   // Critical still holds 1 of 2: keeps it free
	if l.Queued() != 1 {
		t.Fatalf("Queued = %d, want 1", l.Queued())
	}
	be[1].Done(success) // best effort is below its share again
	if a := <-out; a.err != nil {
		t.Fatalf("best-effort waiter: %v", a.err)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Critical.String(), "critical"},
		{Normal.String(), "normal"},
		{BestEffort.String(), "best_effort"},
		{Priority(9).String(), "unknown"},
		{FIFO.String(), "fifo"},
		{LIFO.String(), "lifo"},
		{QueueOrder(9).String(), "unknown"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("String = %q, want %q", tt.got, tt.want)
		}
	}
}
