package retry

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

func newTestBudget(t *testing.T, opts BudgetOptions) (*Budget, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	opts.Clock = fc
	b, err := NewBudget(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, fc
}

// withdrawAll withdraws until refused and returns how many were granted.
func withdrawAll(b *Budget) int {
	n := 0
	for b.TryWithdraw() {
		n++
	}
	return n
}

func TestNewBudgetErrors(t *testing.T) {
	tests := []struct {
		opts BudgetOptions
		want string
	}{
		{BudgetOptions{Window: -time.Second}, "Window -1s is below 10ns"},
		{BudgetOptions{Window: 9}, "Window 9ns is below 10ns"},
		{BudgetOptions{Ratio: math.Inf(1)}, "Ratio +Inf is not a finite number"},
		{BudgetOptions{MinPerSecond: math.NaN()}, "MinPerSecond NaN is not a finite number"},
	}
	for _, tt := range tests {
		_, err := NewBudget(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "retry: budget: ") {
			t.Errorf("NewBudget(%+v) error = %v, want one containing %q", tt.opts, err, tt.want)
		}
	}
}

// The reserve alone: MinPerSecond·Window retries with no call made.
func TestBudgetReserve(t *testing.T) {
	tests := []struct {
		name string
		opts BudgetOptions
		want int
	}{
		{"defaults", BudgetOptions{}, 100}, // 10/s over 10s
		{"custom", BudgetOptions{MinPerSecond: 2, Window: 5 * time.Second}, 10},
		{"none", BudgetOptions{MinPerSecond: -1}, 0},
		{"fractional", BudgetOptions{MinPerSecond: 0.5, Window: 3 * time.Second}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newTestBudget(t, tt.opts)
			if got := b.Available(); got != tt.want {
				t.Errorf("Available() = %d, want %d", got, tt.want)
			}
			if got := withdrawAll(b); got != tt.want {
				t.Errorf("withdrew %d, want %d", got, tt.want)
			}
			if got := b.Refused(); got != 1 {
				t.Errorf("Refused() = %d, want 1", got)
			}
		})
	}
}

// The ratio: 1000 calls allow Ratio·1000 retries on top of the reserve.
func TestBudgetRatio(t *testing.T) {
	tests := []struct {
		name string
		opts BudgetOptions
		want int
	}{
		{"default ratio, no minimum", BudgetOptions{MinPerSecond: -1}, 200},
		{"default ratio and minimum", BudgetOptions{}, 300},
		{"ratio 0.5", BudgetOptions{Ratio: 0.5, MinPerSecond: -1}, 500},
		{"no ratio", BudgetOptions{Ratio: -1}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newTestBudget(t, tt.opts)
			for range 1000 {
				b.Deposit()
			}
			if got := withdrawAll(b); got != tt.want {
				t.Errorf("withdrew %d, want %d", got, tt.want)
			}
		})
	}
}

// Deposits and withdrawals leave the window a tenth at a time (here, one
// second at a time).
func TestBudgetWindowSlides(t *testing.T) {
	b, fc := newTestBudget(t, BudgetOptions{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
	steps := []struct {
		at        time.Duration // fake time since the start
		deposits  int
		tries     int // withdrawals attempted
		granted   int
		available int // after the withdrawals
	}{
		{0, 10, 4, 4, 6},                 // 10 calls, 4 retries
		{5 * time.Second, 5, 20, 11, 0},  // 15 calls in the window: 15 retries
		{9 * time.Second, 0, 1, 0, 0},    // nothing has left yet
		{10 * time.Second, 0, 1, 0, 0},   // second 0 left: 5 calls, 11 retries
		{15 * time.Second, 0, 0, 0, 0},   // second 5 left: the window is empty
		{15 * time.Second, 3, 5, 3, 0},   // fresh calls allow fresh retries
		{20 * time.Second, 10, 0, 0, 10}, //
		{24 * time.Second, 0, 10, 10, 0}, // retries later than the calls...
		{30 * time.Second, 0, 0, 0, 0},   // ...outlive them: 0 calls, 10 retries
		{34 * time.Second, 0, 0, 0, 0},   // second 24 left too
		{34 * time.Second, 2, 0, 0, 2},   //
		{1000 * time.Hour, 1, 10, 1, 0},  // long idle: stale buckets do not count
	}
	for i, s := range steps {
		fc.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(s.at))
		for range s.deposits {
			b.Deposit()
		}
		granted := 0
		for range s.tries {
			if b.TryWithdraw() {
				granted++
			}
		}
		if granted != s.granted || b.Available() != s.available {
			t.Fatalf("step %d (t=%v): granted %d, available %d; want %d, %d",
				i, s.at, granted, b.Available(), s.granted, s.available)
		}
	}
}

// Many goroutines withdrawing at once never take more than the budget holds.
func TestBudgetConcurrent(t *testing.T) {
	b, _ := newTestBudget(t, BudgetOptions{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second})
	const workers, calls = 8, 500
	var granted [workers]int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range calls {
				b.Deposit()
				for range 3 {
					if b.TryWithdraw() {
						granted[w]++
					}
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, g := range granted {
		total += g
	}
	// Every withdrawal was checked against the deposits made before it, so
	// the total is at most 0.2·4000 + 10, and draining what is left makes it
	// exactly that.
	if total > 810 {
		t.Fatalf("granted %d retries, want at most 810", total)
	}
	if left := withdrawAll(b); total+left != 810 {
		t.Fatalf("granted %d retries and %d more after, want 810 in all", total, left)
	}
}

// Refund gives a withdrawal back, in the bucket that still counts one,
// and does nothing once the window counts none.
func TestBudgetRefund(t *testing.T) {
	b, fc := newTestBudget(t, BudgetOptions{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc.Set(at)
	b.Deposit()
	b.Deposit()
	if got := withdrawAll(b); got != 2 {
		t.Fatalf("withdrew %d, want 2", got)
	}
	fc.Set(at.Add(3 * time.Second)) // both withdrawals are in an older bucket
	b.Refund()
	if got := b.Available(); got != 1 {
		t.Fatalf("after a refund: %d available, want 1", got)
	}
	b.Refund()
	b.Refund() // nothing left to give back
	if got := withdrawAll(b); got != 2 {
		t.Fatalf("after the refunds: withdrew %d, want 2", got)
	}
	fc.Set(at.Add(20 * time.Second)) // the window has moved past them
	b.Refund()
	if got := b.Available(); got != 0 {
		t.Fatalf("a refund with no withdrawal in the window: %d available, want 0", got)
	}
}
