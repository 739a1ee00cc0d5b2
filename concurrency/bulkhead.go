package concurrency

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// hasWaiters is the top bit of a state word: the wait queue is not empty.
// While it is set every change of the state word happens under the owner's
// lock, and a free slot goes to a waiter, never to a new arrival.
const hasWaiters = uint64(1) << 63

// BulkheadOptions configures a Bulkhead.
type BulkheadOptions struct {
	// MaxConcurrent is how many calls may run at once. Required: > 0.
	MaxConcurrent int
	// MaxQueue is how many calls may wait for a slot when all are taken, in
	// FIFO order. Zero (the default) means no queue: a call that finds every
	// slot taken is rejected at once.
	MaxQueue int
	// MaxWait bounds the time a call waits in the queue, measured on Clock.
	// Zero (the default) means it waits until its context is done.
	MaxWait time.Duration
	// Name names the bulkhead in rejections and errors. Optional.
	Name string
	// Clock measures MaxWait. Nil means clock.Real.
	Clock clock.Clock
}

// Bulkhead is a static concurrency limit: at most MaxConcurrent calls run at
// once, and up to MaxQueue more wait for a slot in FIFO order.
//
// Acquiring a free slot and releasing it without waiters are one atomic
// operation each and allocate nothing. A release with waiters hands its slot
// straight to the first of them, so a new arrival never overtakes the queue.
//
// A Bulkhead is safe for concurrent use. It ignores outcomes: use a Limiter
// for a limit that adapts to latency.
type Bulkhead struct {
	_ [64]byte
	// state holds the calls in flight in its low 32 bits and hasWaiters.
	state atomic.Uint64
	_     [56]byte

	max       uint64
	maxQueue  int
	maxWait   time.Duration
	label     string
	clock     clock.Clock
	rejection *sluice.Rejection // shared by every rejection; never modified

	mu     sync.Mutex // protects queue; held for every state change while hasWaiters is set
	queue  waitList
	queued atomic.Int64 // queue.n, readable without mu
}

var (
	_ sluice.Admitter = (*Bulkhead)(nil)
	_ sluice.Releaser = (*Bulkhead)(nil)
	_ sluice.Policy   = (*Bulkhead)(nil)
)

// maxBulkhead bounds MaxConcurrent so that the count fits in its 32 bits.
const maxBulkhead = 1<<32 - 1

// NewBulkhead returns a Bulkhead configured by opts. For unusable opts (a
// MaxConcurrent that is not positive, a negative field) it returns an error
// matching sluice.ErrInvalidOptions (errors.Is) that names every unusable
// option.
func NewBulkhead(opts BulkheadOptions) (*Bulkhead, error) {
	ps := invalid.Problems{Prefix: "concurrency: invalid bulkhead options"}
	if opts.MaxConcurrent <= 0 || opts.MaxConcurrent > maxBulkhead {
		ps.Addf("MaxConcurrent %d is not in [1, %d]", opts.MaxConcurrent, maxBulkhead)
	}
	if opts.MaxQueue < 0 {
		ps.Addf("MaxQueue %d is negative", opts.MaxQueue)
	}
	if opts.MaxWait < 0 {
		ps.Addf("MaxWait %v is negative", opts.MaxWait)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	label := "bulkhead"
	if opts.Name != "" {
		label += " " + strconv.Quote(opts.Name)
	}
	return &Bulkhead{
		max:       uint64(opts.MaxConcurrent),
		maxQueue:  opts.MaxQueue,
		maxWait:   opts.MaxWait,
		label:     label,
		clock:     clock.Or(opts.Clock),
		rejection: &sluice.Rejection{Reason: sluice.Overloaded, Policy: opts.Name},
	}, nil
}

// Acquire takes a slot. When every slot is taken it waits in the queue, if
// there is one with room, until a release hands it a slot, MaxWait elapses or
// ctx is done.
//
// It returns a *sluice.Rejection (Reason Overloaded) when the queue is full
// or absent, or the wait ran out; the same value is returned every time and
// must not be modified. When ctx ends the wait it returns ctx's error wrapped
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded holds), not a
// rejection: the caller gave up, the bulkhead did not refuse. ctx is not
// consulted when a slot is free. A permit granted after a wait in the queue
// is marked so (sluice.Permit.Waited): a Guard then checks its earlier
// policies, a circuit breaker say, again.
func (b *Bulkhead) Acquire(ctx context.Context) (sluice.Permit, error) {
	for {
		s := b.state.Load()
		if s >= b.max { // full, or hasWaiters set
			break
		}
		if b.state.CompareAndSwap(s, s+1) {
			return sluice.NewPermit(b, 0), nil
		}
	}
	if b.maxQueue == 0 {
		return sluice.Permit{}, b.rejection
	}
	return b.wait(ctx)
}

// wait is the slow path of Acquire: take a slot under mu, or queue.
func (b *Bulkhead) wait(ctx context.Context) (sluice.Permit, error) {
	b.mu.Lock()
	for {
		s := b.state.Load()
		if s < b.max {
			if b.state.CompareAndSwap(s, s+1) {
				b.mu.Unlock()
				return sluice.NewPermit(b, 0), nil
			}
			continue
		}
		if b.queue.n >= b.maxQueue {
			b.mu.Unlock()
			return sluice.Permit{}, b.rejection
		}
		// Set hasWaiters on exactly the state judged full, so that a
		// concurrent release either frees the slot first (and the CAS
		// fails) or sees the flag and hands the slot to the queue.
		if s&hasWaiters != 0 || b.state.CompareAndSwap(s, s|hasWaiters) {
			break
		}
	}
	w := newWaiter(0)
	b.queue.pushBack(w)
	b.queued.Store(int64(b.queue.n))
	b.mu.Unlock()

	if err := await(ctx, b, w, b.clock, b.maxWait, b.label, b.rejection); err != nil {
		return sluice.Permit{}, err
	}
	return sluice.NewPermit(b, 0).AfterWait(), nil
}

// Release frees the slot of a permit, handing it to the first waiter if
// there is one. The outcome is ignored. It is called by Permit.Done; a
// surplus call never drives the count below zero.
func (b *Bulkhead) Release(_ uint64, _ sluice.Outcome) { b.release() }

// Run runs next behind a permit of b; see sluice.RunAdmitted.
func (b *Bulkhead) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, b, next)
}

// InFlight returns how many calls hold a slot.
func (b *Bulkhead) InFlight() int { return int(uint32(b.state.Load())) }

// Queued returns how many calls wait for a slot.
func (b *Bulkhead) Queued() int { return int(b.queued.Load()) }

func (b *Bulkhead) release() {
	for {
		s := b.state.Load()
		if s&hasWaiters != 0 {
			if b.handOff() {
				return
			}
			continue
		}
		if s == 0 {
			return
		}
		if b.state.CompareAndSwap(s, s-1) {
			return
		}
	}
}

// handOff gives the releasing caller's slot to the first waiter. It reports
// false, doing nothing, if the queue emptied before mu was taken.
func (b *Bulkhead) handOff() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.queue.head
	if w == nil {
		return false
	}
	b.unqueue(w)
	w.decide(granted) // the slot changes hands: the count stays the same
	return true
}

// unqueue removes w from the queue. mu must be held.
func (b *Bulkhead) unqueue(w *waiter) {
	b.queue.remove(w)
	b.queued.Store(int64(b.queue.n))
	if b.queue.n == 0 {
		b.state.And(^hasWaiters)
	}
}

// settle implements queueOwner.
func (b *Bulkhead) settle(w *waiter, st waitState) waitState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.state == waiting {
		b.unqueue(w)
		w.decide(st)
	}
	return w.state
}

// giveBack implements queueOwner.
func (b *Bulkhead) giveBack(*waiter) { b.release() }

// IgnoresLatency reports true: a bulkhead never reads a call's latency
// (sluice.LatencyIgnorer), so a Guard of bulkheads does not time calls.
func (b *Bulkhead) IgnoresLatency() bool { return true }
