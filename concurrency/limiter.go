package concurrency

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/internal/invalid"
)

// QueueOrder is the order in which a Limiter's queue serves the calls of one
// priority class.
type QueueOrder uint8

const (
	// FIFO serves the call that waited longest first (the default).
	FIFO QueueOrder = iota
	// LIFO serves the newest call first: under sustained overload the calls
	// most likely to still be wanted run, and the oldest time out.
	LIFO
)

// String returns "fifo" or "lifo".
func (o QueueOrder) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	}
	return "unknown"
}

// MaxLimit is the largest limit a Limiter applies; an Algorithm's larger
// limits are clamped to it.
const MaxLimit = classMask

// LimiterOptions configures a Limiter.
type LimiterOptions struct {
	// Algorithm computes the limit from samples of calls that ran.
	// Required. Its Limit at construction is the initial limit.
	Algorithm limit.Algorithm
	// MaxQueue is how many calls may wait for a slot when none may start.
	// Zero (the default) makes the limiter non-blocking: such calls are
	// rejected at once.
	MaxQueue int
	// Order is the order in which queued calls of one priority class are
	// served. Default FIFO.
	Order QueueOrder
	// MaxWait bounds the time a call waits in the queue, measured on Clock.
	// Zero (the default) means it waits until its context is done.
	MaxWait time.Duration
	// Priorities, when not empty, turns on priority classes: Priorities[p]
	// is the share of the limit guaranteed to Priority p, taken from the
	// call's context (see WithPriority). A priority beyond the last entry
	// belongs to the last class. Fractions are in [0, 1] and sum to at most
	// 1. Empty (the default) means one class: every call is equal and the
	// context is not consulted.
	Priorities []Share
	// DemandHold is how long a refused call counts as demand of its class:
	// meanwhile the class's unused share is kept for it even if it has
	// nothing in flight, and less important classes may not borrow. Each
	// refusal starts the hold again. Default 1s. Used only with Priorities
	// and no queue: with a queue, queued calls are their class's demand.
	DemandHold time.Duration
	// Name names the limiter in rejections and errors. Optional.
	Name string
	// Clock reads the time of samples and measures MaxWait and DemandHold.
	// Nil means clock.Real.
	Clock clock.Clock
	// OnLimitChange, if not nil, is called with the old and new limit each
	// time the limit changes. It is called without any lock held, from the
	// goroutine whose Permit.Done produced the change, possibly from several
	// goroutines at once; it must be quick.
	OnLimitChange func(old, new int)
}

// Limiter is an adaptive concurrency limit: it admits calls while fewer than
// the limit are in flight and feeds the latency of every call that ran to an
// Algorithm, which moves the limit.
//
// # Accounting
//
// Every admitted call holds one slot until its Permit's Done, which must be
// called exactly once (a surplus Done cannot drive a count below zero but
// would free another call's slot). A rejected call holds no slot and
// releases none. Only outcomes whose Class.Ran() feed the Algorithm; a
// sample is dropped (a congestion signal) when the outcome's error matches
// context.DeadlineExceeded, which covers sluice.ErrTimeout. The sample's
// in-flight count is the number in flight when the call was admitted,
// itself included, carried in the Permit's token.
//
// # Queueing
//
// Without a queue (MaxQueue 0) a call that may not start is rejected at once
// with a *sluice.Rejection whose Reason is Overloaded. With a queue it waits
// up to MaxWait; a release hands its slot directly to the best waiter, so an
// arrival never overtakes a waiter that may start. When ctx ends the wait
// Acquire returns ctx's error wrapped, not a rejection.
//
// # Priority classes
//
// With Priorities, class p is guaranteed g(p) = floor(Fraction(p)*limit)
// slots, its share. A class has demand while it has queued calls or (without
// a queue) one of its calls was refused less than DemandHold ago; it is
// active while it has demand or calls in flight. A call may start when fewer
// than limit calls are in flight and either its class holds fewer than its
// share, or it may borrow: no more important class has demand, and the
// slots still free after it cover the unused shares of the other active
// classes. An idle class lends its whole share; once active it takes the
// share back as borrowed calls end, since their slots are then kept for it.
//
// So under overload less important classes are shed first: they stop
// borrowing while a more important class is refused, and fall back to their
// shares. With a queue a freed slot goes first to a waiter within its share,
// then to the most important waiter that may borrow; when the queue is full
// an arrival evicts the waiter of the least important class below it.
//
// The hot path, a call admitted below the limit and its release, is a few
// atomic operations plus the Algorithm's Sample, allocates nothing and takes
// no lock while the queue is empty. A Limiter is safe for concurrent use.
type Limiter struct {
	_ [64]byte
	// state holds the calls in flight per class, classBits each from bit 0,
	// a demand bit per class (see DemandHold) and hasWaiters.
	state atomic.Uint64
	_     [56]byte

	limit     atomic.Int64 // current limit, in [1, MaxLimit]
	alg       limit.Algorithm
	nclass    int
	frac      [NumPriorities]float64
	maxQueue  int
	order     QueueOrder
	maxWait   time.Duration
	label     string
	clock     clock.Clock
	onChange  func(old, new int)
	rejection *sluice.Rejection // shared by every rejection; never modified

	hold int64 // DemandHold in nanoseconds

	_         [64]byte
	rejected  [NumPriorities]atomic.Uint64
	wantUntil [NumPriorities]atomic.Int64 // Nanotime until which a class's demand bit holds
	_         [64]byte

	mu     sync.Mutex // protects queues; held for every state change while hasWaiters is set
	queues [NumPriorities]waitList
	queued atomic.Int64 // calls in all queues, readable without mu
}

var (
	_ sluice.Admitter = (*Limiter)(nil)
	_ sluice.Releaser = (*Limiter)(nil)
	_ sluice.Policy   = (*Limiter)(nil)
)

const (
	classBits = 20
	classMask = 1<<classBits - 1
	wantShift = NumPriorities * classBits // first demand bit

	defaultDemandHold = time.Second
)

// NewLimiter returns a Limiter configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions (errors.Is) that names
// every unusable option.
func NewLimiter(opts LimiterOptions) (*Limiter, error) {
	ps := invalid.Problems{Prefix: "concurrency: invalid limiter options"}
	if opts.Algorithm == nil {
		ps.Addf("Algorithm is required")
	}
	if opts.MaxQueue < 0 {
		ps.Addf("MaxQueue %d is negative", opts.MaxQueue)
	}
	if opts.Order > LIFO {
		ps.Addf("Order %d is neither FIFO nor LIFO", opts.Order)
	}
	if opts.MaxWait < 0 {
		ps.Addf("MaxWait %v is negative", opts.MaxWait)
	}
	if opts.DemandHold < 0 {
		ps.Addf("DemandHold %v is negative", opts.DemandHold)
	}
	if len(opts.Priorities) > NumPriorities {
		ps.Addf("Priorities has %d entries, at most %d allowed", len(opts.Priorities), NumPriorities)
	}
	sum := 0.0
	for i, sh := range opts.Priorities {
		if !(sh.Fraction >= 0 && sh.Fraction <= 1) {
			ps.Addf("Priorities[%d].Fraction %v is not in [0, 1]", i, sh.Fraction)
		}
		sum += sh.Fraction
	}
	if sum > 1+1e-9 {
		ps.Addf("Priorities: fractions sum to %v, more than 1", sum)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	label := "concurrency limit"
	if opts.Name != "" {
		label += " " + strconv.Quote(opts.Name)
	}
	l := &Limiter{
		alg:       opts.Algorithm,
		nclass:    max(1, min(len(opts.Priorities), NumPriorities)),
		maxQueue:  opts.MaxQueue,
		order:     opts.Order,
		maxWait:   opts.MaxWait,
		label:     label,
		clock:     clock.Or(opts.Clock),
		onChange:  opts.OnLimitChange,
		rejection: &sluice.Rejection{Reason: sluice.Overloaded, Policy: opts.Name},
	}
	l.hold = int64(cmp.Or(opts.DemandHold, defaultDemandHold))
	l.frac[0] = 1
	for i, sh := range opts.Priorities {
		l.frac[i] = sh.Fraction
	}
	l.limit.Store(clampLimit(opts.Algorithm.Limit()))
	return l, nil
}

// Acquire admits a call of the priority carried by ctx (see the type's
// documentation for the rules) or, when it may not start, queues it or
// rejects it with a *sluice.Rejection (Reason Overloaded); the same
// rejection value is returned every time and must not be modified. If ctx
// ends the wait, Acquire returns ctx's error wrapped. ctx is not consulted
// for cancellation when the call may start at once. A permit granted after
// a wait in the queue is marked so (sluice.Permit.Waited): a Guard then
// checks its earlier policies, a circuit breaker say, again.
func (l *Limiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	if l.nclass > 1 {
		return l.acquireClass(ctx, l.classOf(PriorityFrom(ctx)))
	}
	lim := uint64(l.limit.Load())
	for {
		s := l.state.Load()
		if s >= lim { // at the limit, or hasWaiters set
			break
		}
		if l.state.CompareAndSwap(s, s+1) {
			return sluice.NewPermit(l, permitToken(s+1, 0)), nil
		}
	}
	if l.maxQueue == 0 {
		l.rejected[0].Add(1)
		return sluice.Permit{}, l.rejection
	}
	return l.wait(ctx, 0)
}

// Release frees the slot of a permit and, if the call ran, feeds its latency
// to the Algorithm and applies the new limit. It is called by Permit.Done.
func (l *Limiter) Release(token uint64, o sluice.Outcome) {
	c := int(token & 3)
	l.release(c)
	if !o.Class.Ran() {
		return
	}
	dropped := o.Err != nil && errors.Is(o.Err, context.DeadlineExceeded)
	n := l.alg.Sample(l.clock.Nanotime(), o.Latency, int(token>>2), dropped)
	l.setLimit(n)
}

// Run runs next behind a permit of l; see sluice.RunAdmitted.
func (l *Limiter) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, l, next)
}

// Limit returns the current limit.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight returns how many admitted calls have not yet called Done.
func (l *Limiter) InFlight() int { return int(total(l.state.Load())) }

// InFlightOf returns how many calls of priority p are in flight. Without
// priority classes every priority counts all calls.
func (l *Limiter) InFlightOf(p Priority) int {
	return int(count(l.state.Load(), l.classOf(p)))
}

// Queued returns how many calls wait in the queue.
func (l *Limiter) Queued() int { return int(l.queued.Load()) }

// Rejected returns how many calls were rejected since the limiter was made:
// at once, when their wait expired, or when evicted from the queue. Calls
// whose context ended while queued are not counted.
func (l *Limiter) Rejected() uint64 {
	var n uint64
	for i := range l.rejected {
		n += l.rejected[i].Load()
	}
	return n
}

// RejectedOf returns how many calls of priority p were rejected. Without
// priority classes every priority counts all rejections.
func (l *Limiter) RejectedOf(p Priority) uint64 { return l.rejected[l.classOf(p)].Load() }

// classOf maps a priority to its class index.
func (l *Limiter) classOf(p Priority) int { return min(int(p), l.nclass-1) }

// release frees a slot of class c, handing it to a waiter if there are any.
func (l *Limiter) release(c int) {
	d := one(c)
	for {
		s := l.state.Load()
		if s&hasWaiters != 0 {
			if l.releaseLocked(c) {
				return
			}
			continue
		}
		if count(s, c) == 0 {
			return
		}
		if l.state.CompareAndSwap(s, s-d) {
			return
		}
	}
}

// setLimit applies a limit computed by the Algorithm.
func (l *Limiter) setLimit(n int) {
	v := clampLimit(n)
	if l.limit.Load() == v {
		return
	}
	old := l.limit.Swap(v)
	if old == v {
		return
	}
	if l.state.Load()&hasWaiters != 0 {
		l.mu.Lock()
		l.dispatch()
		l.mu.Unlock()
	}
	if l.onChange != nil {
		l.onChange(int(old), int(v))
	}
}

func clampLimit(n int) int64 { return int64(min(max(n, 1), MaxLimit)) }

// permitToken packs the in-flight count at admission and the class.
func permitToken(inflight uint64, c int) uint64 { return inflight<<2 | uint64(c) }

func one(c int) uint64 { return 1 << (c * classBits) }

func count(s uint64, c int) uint64 { return s >> (c * classBits) & classMask }

func total(s uint64) uint64 {
	var t uint64
	for c := range NumPriorities {
		t += count(s, c)
	}
	return t
}
