package concurrency

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// fixedLimit is a limit.Algorithm whose limit never moves and which records
// nothing: the cheapest algorithm, for benchmarks.
type fixedLimit int

func (f fixedLimit) Limit() int                                 { return int(f) }
func (f fixedLimit) Sample(int64, time.Duration, int, bool) int { return int(f) }

// flapping is a limit.Algorithm whose limit cycles through 1..4, one step
// per sample: it exercises hand-offs while the limit rises and falls.
type flapping struct{ n atomic.Int64 }

func (f *flapping) Limit() int { return 4 }

func (f *flapping) Sample(int64, time.Duration, int, bool) int {
	return int(1 + f.n.Add(1)%4)
}

// sample is one call to recorder.Sample.
type sample struct {
	now      int64
	rtt      time.Duration
	inflight int
	dropped  bool
}

// recorder is a limit.Algorithm with a limit set by the test, recording
// every sample.
type recorder struct {
	mu      sync.Mutex
	limit   int
	samples []sample
}

func (r *recorder) Limit() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limit
}

func (r *recorder) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sample{now, rtt, inflight, dropped})
	return r.limit
}

func (r *recorder) set(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limit = n
}

func (r *recorder) got() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sample(nil), r.samples...)
}

// eventually yields until cond holds. It never sleeps: a test that waits for
// a goroutine to reach a queue relies on the test timeout, not on timing.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		runtime.Gosched()
	}
}

// acquired is the result of an Acquire run in its own goroutine.
type acquired struct {
	id     int
	permit sluice.Permit
	err    error
}

// acquireAsync runs a.Acquire(ctx) in a goroutine and sends the result, with
// id, on out.
func acquireAsync(ctx context.Context, a sluice.Admitter, id int, out chan<- acquired) {
	go func() {
		p, err := a.Acquire(ctx)
		out <- acquired{id: id, permit: p, err: err}
	}()
}

var success = sluice.Outcome{Class: sluice.Success, Latency: time.Millisecond}

// mustAcquire acquires n permits that must be granted at once.
func mustAcquire(t *testing.T, ctx context.Context, a sluice.Admitter, n int) []sluice.Permit {
	t.Helper()
	ps := make([]sluice.Permit, n)
	for i := range ps {
		p, err := a.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire #%d: %v", i, err)
		}
		ps[i] = p
	}
	return ps
}
