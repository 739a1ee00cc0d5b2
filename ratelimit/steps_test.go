package ratelimit

import (
	"testing"
	"time"
)

// step is one request at a fixed instant and what it must get.
type step struct {
	at    time.Duration
	n     int
	want  bool
	retry time.Duration // checked when want is false
	left  int           // Remaining
}

func runSteps(t *testing.T, l Limit, steps []step) {
	t.Helper()
	m := NewMemory(MemoryOptions{})
	for i, s := range steps {
		d, err := m.AllowNAt("k", l, s.n, int64(s.at))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d.Allowed != s.want || d.Remaining != s.left || (!s.want && d.RetryAfter != s.retry) {
			t.Fatalf("step %d (n=%d at %v): got %+v, want allowed %v, remaining %d, retry %v",
				i, s.n, s.at, d, s.want, s.left, s.retry)
		}
	}
}

const ms = time.Millisecond

func TestSteps(t *testing.T) {
	tests := []struct {
		name  string
		l     Limit
		steps []step
	}{
		{"gcra", Limit{Algorithm: GCRA, Limit: 10, Period: time.Second, Burst: 3}, []step{
			{0, 3, true, 0, 0},
			{0, 1, false, 100 * ms, 0},
			{50 * ms, 1, false, 50 * ms, 0},
			{100 * ms, 1, true, 0, 0},
			{100 * ms, 4, false, RetryNever, 0},
			{350 * ms, 2, true, 0, 0},
			{1000 * ms, 0, true, 0, 3},
		}},
		{"token bucket", Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 3}, []step{
			{0, 3, true, 0, 0},
			{0, 1, false, 100 * ms, 0},
			{50 * ms, 1, false, 50 * ms, 0},
			{100 * ms, 1, true, 0, 0},
			{150 * ms, 1, false, 50 * ms, 0}, // half a token is kept, not truncated
			{350 * ms, 2, true, 0, 0},
			{1000 * ms, 0, true, 0, 3},
		}},
		{"leaky bucket", Limit{Algorithm: LeakyBucket, Limit: 10, Period: time.Second, Burst: 3}, []step{
			{0, 3, true, 0, 0},
			{0, 1, false, 100 * ms, 0},
			{100 * ms, 1, true, 0, 0},
			{150 * ms, 1, false, 50 * ms, 0},
			{350 * ms, 2, true, 0, 0},
			{1000 * ms, 0, true, 0, 3},
		}},
		{"fixed window", Limit{Algorithm: FixedWindow, Limit: 3, Period: time.Second}, []step{
			{0, 2, true, 0, 1},
			{999 * ms, 2, false, 1 * ms, 1},
			{999 * ms, 1, true, 0, 0},
			{1000 * ms, 3, true, 0, 0}, // a new window: 4 events in 1ms
			{1500 * ms, 1, false, 500 * ms, 0},
			{1500 * ms, 4, false, RetryNever, 0},
		}},
		{"sliding window", Limit{Algorithm: SlidingWindow, Limit: 10, Period: time.Second}, []step{
			{0, 10, true, 0, 0},
			{1000 * ms, 1, false, 100 * ms, 0}, // the previous window weighs 10
			{1500 * ms, 5, true, 0, 0},         // it weighs 5 halfway
			{1600 * ms, 1, true, 0, 0},         // 5 + 1 + ceil(10·0.4)
			{1650 * ms, 1, false, 50 * ms, 0},
			{1700 * ms, 1, true, 0, 0},
			// In the next window the 7 events of this one weigh ceil(7·0.9) = 7,
			// and 5 fit once 7·(1−e) ≤ 5, at e = 0.2857142860.
			{2100 * ms, 5, false, 185714286, 3},
			{2400 * ms, 5, true, 0, 0},
		}},
		{"sliding log", Limit{Algorithm: SlidingLog, Limit: 3, Period: time.Second}, []step{
			{5, 1, true, 0, 2},
			{5, 1, true, 0, 1}, // the same nanosecond counts twice
			{100 * ms, 2, false, time.Second - 100*ms + 5, 1},
			{100 * ms, 1, true, 0, 0},
			{time.Second + 4, 1, false, 1, 0},
			{time.Second + 5, 2, true, 0, 0}, // both events at 5ns expired together
			{time.Second + 5, 4, false, RetryNever, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.l, tt.steps) })
	}
}

// TestSetLimitKeepsState changes the limit of a key that has used its quota:
// the new limit applies to the state the key has, it does not start afresh.
func TestSetLimitKeepsState(t *testing.T) {
	tests := []struct {
		name     string
		from, to Limit
		// used events at 0 under from; then remaining under to at 0
		used, left int
	}{
		{"token bucket keeps its tokens", Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 10},
			Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 20}, 6, 4},
		{"token bucket clamps to a smaller burst", Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 10},
			Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 2}, 6, 2},
		{"leaky bucket keeps its level", Limit{Algorithm: LeakyBucket, Limit: 10, Period: time.Second, Burst: 10},
			Limit{Algorithm: LeakyBucket, Limit: 10, Period: time.Second, Burst: 20}, 6, 14},
		{"gcra keeps its arrival time", Limit{Algorithm: GCRA, Limit: 10, Period: time.Second, Burst: 10},
			Limit{Algorithm: GCRA, Limit: 20, Period: time.Second, Burst: 10}, 6, 0}, // 600ms of debt: 12 events of 50ms
		{"fixed window keeps its count", Limit{Algorithm: FixedWindow, Limit: 10, Period: time.Second},
			Limit{Algorithm: FixedWindow, Limit: 8, Period: time.Second}, 6, 2},
		{"sliding window keeps its counts", Limit{Algorithm: SlidingWindow, Limit: 10, Period: time.Second},
			Limit{Algorithm: SlidingWindow, Limit: 7, Period: time.Minute}, 6, 1},
		{"sliding log keeps its timestamps", Limit{Algorithm: SlidingLog, Limit: 10, Period: time.Second},
			Limit{Algorithm: SlidingLog, Limit: 4, Period: time.Second}, 6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			if d, err := m.AllowNAt("k", tt.from, tt.used, 0); err != nil || !d.Allowed {
				t.Fatalf("using %d: %+v, %v", tt.used, d, err)
			}
			d, err := m.AllowNAt("k", tt.to, 0, 0)
			if err != nil || d.Remaining != tt.left {
				t.Fatalf("after the change: %+v, %v; want remaining %d", d, err, tt.left)
			}
		})
	}
}
