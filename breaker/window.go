package breaker

import (
	"sync"
	"sync/atomic"
)

// A call's contribution to a window is kept in two words so that recording
// a call is one atomic add (two for a slow call): tally packs the number of
// calls (low 32 bits) and how many of them failed (high 32 bits); a separate
// word counts slow calls.
const (
	oneCall    = 1
	oneFailure = 1 << 32
	callMask   = 1<<32 - 1
)

// code describes one recorded call: codeRan is set for every call, codeFail
// for a failure, codeSlow for a call that ran longer than SlowCallThreshold.
// An empty slot of a count window holds 0.
type code = uint32

const (
	codeRan  code = 1
	codeFail code = 2
	codeSlow code = 4
)

func tallyOf(c code) uint64 {
	return uint64(c&codeRan) + uint64(c&codeFail>>1)<<32
}

func slowOf(c code) uint64 { return uint64(c & codeSlow >> 2) }

// counts is a window's aggregate: calls, failures and slow calls.
type counts struct {
	calls, failures, slow uint64
}

func countsOf(tally, slow uint64) counts {
	return counts{calls: tally & callMask, failures: tally >> 32, slow: slow}
}

// pad keeps contended words on a cache line of their own.
type pad [64]byte

// countWindow holds the outcomes of the last len(slots) calls in a ring.
//
// Recording a call takes a sequence number (one atomic add), swaps the
// call's code into its slot and adds the difference between the new and the
// old code to the aggregate. When the code in the slot is already the same,
// which is what a healthy breaker sees all day, nothing else is written.
// Because every change to a slot goes through Swap and adds exactly the
// difference it made, the aggregate always converges to the sum of the
// slots, whatever the interleaving.
type countWindow struct {
	_      pad
	seq    atomic.Uint64 // calls recorded so far; seq % len(slots) is the next slot
	tally  atomic.Uint64 // packed calls and failures over the slots
	slow   atomic.Uint64 // slow calls over the slots
	consec atomic.Uint64 // consecutive failures (owned by Breaker, kept on this line)
	_      pad
	slots  []atomic.Uint32
}

func newCountWindow(n int) *countWindow {
	return &countWindow{slots: make([]atomic.Uint32, n)}
}

// record stores c in the next slot. It returns the aggregate after the
// change, and changed=false (with zero counts) when the aggregate did not
// change.
func (w *countWindow) record(c code) (counts, bool) {
	i := (w.seq.Add(1) - 1) % uint64(len(w.slots))
	s := &w.slots[i]
	if s.Load() == c {
		return counts{}, false
	}
	return w.swap(s, c), true
}

// swap stores c in s and applies the difference to the aggregate.
func (w *countWindow) swap(s *atomic.Uint32, c code) counts {
	old := s.Swap(c)
	tally := w.tally.Load()
	if d := tallyOf(c) - tallyOf(old); d != 0 {
		tally = w.tally.Add(d)
	}
	slow := w.slow.Load()
	if d := slowOf(c) - slowOf(old); d != 0 {
		slow = w.slow.Add(d)
	}
	return countsOf(tally, slow)
}

// reset empties every slot.
func (w *countWindow) reset() {
	for i := range w.slots {
		w.swap(&w.slots[i], 0)
	}
}

func (w *countWindow) counts() counts {
	return countsOf(w.tally.Load(), w.slow.Load())
}

// bucket is one period of a time window.
type bucket struct {
	tally atomic.Uint64
	slow  atomic.Uint64
}

// timeWindow holds the calls of the last len(buckets) periods of width
// nanoseconds: bucket n%len(buckets) holds the calls that ended in period
// n = now/width. The window therefore spans between (len-1)*width and
// len*width of time, the current period included.
//
// A call is added to the aggregate first and to its bucket second; a bucket
// that ages out is emptied with Swap and its counts taken off the aggregate.
// So the aggregate is never less than the sum of the buckets and never goes
// negative.
type timeWindow struct {
	_      pad
	tally  atomic.Uint64 // packed calls and failures over the buckets
	slow   atomic.Uint64 // slow calls over the buckets
	consec atomic.Uint64 // consecutive failures (owned by Breaker, kept on this line)
	_      pad
	head   atomic.Int64 // the latest period seen; written once per period
	_      pad
	width  int64
	mu     sync.Mutex // serialises advance
	bucket []bucket
}

func newTimeWindow(width int64, n int) *timeWindow {
	return &timeWindow{width: width, bucket: make([]bucket, n)}
}

// record adds c to the period of now and returns the aggregate after it.
func (w *timeWindow) record(now int64, c code) counts {
	n := now / w.width
	h := w.head.Load()
	if n > h {
		w.advance(n)
	} else if n <= h-int64(len(w.bucket)) {
		return w.counts() // ended so long ago that its period has aged out
	}
	b := &w.bucket[n%int64(len(w.bucket))]
	tally := w.tally.Add(tallyOf(c))
	b.tally.Add(tallyOf(c))
	slow := w.slow.Load()
	if c&codeSlow != 0 {
		slow = w.slow.Add(1)
		b.slow.Add(1)
	}
	return countsOf(tally, slow)
}

// advance moves the head to period n, emptying the buckets of the periods
// that age out on the way. It never moves the head backwards.
func (w *timeWindow) advance(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.head.Load()
	if n <= h {
		return
	}
	from := h + 1
	if n-from >= int64(len(w.bucket)) {
		from = n - int64(len(w.bucket)) + 1
	}
	for p := from; p <= n; p++ {
		w.empty(&w.bucket[p%int64(len(w.bucket))])
	}
	w.head.Store(n)
}

func (w *timeWindow) empty(b *bucket) {
	if t := b.tally.Swap(0); t != 0 {
		w.tally.Add(-t)
	}
	if s := b.slow.Swap(0); s != 0 {
		w.slow.Add(-s)
	}
}

// reset empties every bucket.
func (w *timeWindow) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.bucket {
		w.empty(&w.bucket[i])
	}
}

// countsAt returns the aggregate after ageing the window to now.
func (w *timeWindow) countsAt(now int64) counts {
	if n := now / w.width; n > w.head.Load() {
		w.advance(n)
	}
	return w.counts()
}

func (w *timeWindow) counts() counts {
	return countsOf(w.tally.Load(), w.slow.Load())
}
