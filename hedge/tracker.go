package hedge

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tracker estimates a latency quantile from the last n successful attempts
// and publishes the hedge delay it implies.
type tracker struct {
	q        float64
	floor    time.Duration
	ceiling  time.Duration // zero: no ceiling
	every    int           // recompute the quantile after this many samples
	delay    atomic.Int64  // the current delay, in nanoseconds
	mu       sync.Mutex    // protects everything below
	ring     []int64       // the last len(ring) latencies, in nanoseconds
	n        int           // samples in ring, up to len(ring)
	next     int           // where the next sample goes
	pending  int           // samples since the last recomputation
	scratch  []int64       // sorted copy of ring, reused
	computed bool          // the delay has been computed from a full window
}

func newTracker(q float64, window int, floor, ceiling time.Duration) *tracker {
	t := &tracker{
		q:       q,
		floor:   floor,
		ceiling: ceiling,
		every:   max(1, window/8),
		ring:    make([]int64, window),
		scratch: make([]int64, window),
	}
	t.delay.Store(int64(floor))
	return t
}

// current returns the hedge delay.
func (t *tracker) current() time.Duration { return time.Duration(t.delay.Load()) }

// record adds the latency of one successful attempt. The quantile is used
// once the window is full, and then recomputed every t.every samples, so
// that the cost of sorting the window is spread over many calls.
func (t *tracker) record(lat time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.next] = int64(lat)
	t.next = (t.next + 1) % len(t.ring)
	if t.n < len(t.ring) {
		t.n++
	}
	t.pending++
	if t.n < len(t.ring) || (t.computed && t.pending < t.every) {
		return
	}
	t.pending = 0
	t.computed = true
	copy(t.scratch, t.ring)
	slices.Sort(t.scratch)
	// The nearest-rank quantile: the smallest sample with at least a
	// fraction q of the samples at or below it.
	rank := int(math.Ceil(t.q*float64(len(t.scratch)))) - 1
	d := time.Duration(t.scratch[min(max(rank, 0), len(t.scratch)-1)])
	d = max(d, t.floor)
	if t.ceiling > 0 {
		d = min(d, t.ceiling)
	}
	t.delay.Store(int64(d))
}
