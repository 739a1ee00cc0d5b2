// Package breaker is a circuit breaker: it stops calling a downstream that
// keeps failing or answering slowly, lets it recover, and probes it before
// trusting it again.
//
// A Breaker is an admission policy (sluice.Admitter, sluice.Releaser,
// sluice.Policy). It has five states:
//
//   - Closed: every call is admitted and its outcome is recorded in a sliding
//     window, the last N calls or the calls of the last T (Options). The
//     breaker trips to Open when, once the window holds MinCalls calls, the
//     failure rate or the slow-call rate reaches its threshold, or after
//     ConsecutiveFailures failures in a row.
//   - Open: every call is rejected at once with a *sluice.Rejection whose
//     RetryAfter is the open time left. After the open duration, which may
//     grow on repeated trips, the next call (or State, or Metrics) moves the
//     breaker to HalfOpen.
//   - HalfOpen: at most HalfOpenCalls probes run at once; other calls are
//     rejected. SuccessThreshold successful probes close the breaker with an
//     empty window; one failed probe opens it again.
//   - ForcedOpen and Disabled, set by ForceOpen and Disable, reject every call
//     or admit every call without recording anything, until Close, Reset or
//     Open.
//
// Only outcomes whose Class.Ran() feed the window and decide probes; an
// Ignored or Dropped outcome only frees the probe slot it held. Every Permit
// carries the generation of the state it was granted in: an outcome reported
// after the state changed is discarded, so calls started before a trip or a
// close cannot sway the new state.
//
// A healthy breaker costs one atomic load in Acquire and, with a count
// window, one contended atomic add in Done (a time window adds a clock
// reading and a second add); it allocates nothing. Locks are taken only to
// change state, in the half-open state and once per bucket of a time window.
// Use a Set to give each downstream method its own breaker.
package breaker

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// State is the state of a Breaker. The zero State is Closed.
type State uint8

// The states of a Breaker.
const (
	// Closed admits every call and records its outcome.
	Closed State = iota
	// Open rejects every call until the open duration has passed.
	Open
	// HalfOpen admits up to HalfOpenCalls probes at once.
	HalfOpen
	// ForcedOpen rejects every call until the breaker is closed, reset,
	// opened or disabled by hand.
	ForcedOpen
	// Disabled admits every call and records nothing until the breaker is
	// closed, reset, opened or forced open by hand.
	Disabled
)

// String returns the state in lower case: "closed", "open", "half-open",
// "forced-open" or "disabled".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	case ForcedOpen:
		return "forced-open"
	case Disabled:
		return "disabled"
	}
	return "unknown"
}

// The state word holds the state in its low bits and the generation, which
// every change of state increments, above them. A Permit's token is the
// state word it was granted under.
const (
	stateBits = 3
	stateMask = 1<<stateBits - 1
)

func stateOf(w uint64) State { return State(w & stateMask) }

// Breaker is a circuit breaker. Create it with New; it is safe for
// concurrent use. See the package documentation for its behaviour.
type Breaker struct {
	state     atomic.Uint64 // state word: generation << stateBits | State
	openUntil atomic.Int64  // clock.Nanotime at which Open ends
	cfg       config
	cw        *countWindow   // the window, when it counts calls
	tw        *timeWindow    // the window, when it spans time
	consec    *atomic.Uint64 // consecutive failures, on the window's hot line
	rejected  atomic.Uint64  // rejections since New or Reset

	mu          sync.Mutex // protects everything below, and state changes
	trips       int        // trips since the breaker last closed
	totalTrips  uint64     // trips since New or Reset
	probes      int        // half-open permits not yet Done, of any generation
	probeOK     int        // successful probes in this half-open state
	events      []event    // state changes not yet delivered to onChange
	dispatching bool       // a goroutine is delivering events
}

type event struct{ from, to State }

var (
	_ sluice.Admitter  = (*Breaker)(nil)
	_ sluice.Releaser  = (*Breaker)(nil)
	_ sluice.Policy    = (*Breaker)(nil)
	_ sluice.Rechecker = (*Breaker)(nil)
)

// New returns a closed Breaker configured by opts. For unusable opts it
// returns an error matching sluice.ErrInvalidOptions and ErrInvalidOptions
// (errors.Is) that names every unusable option.
func New(opts Options) (*Breaker, error) {
	cfg, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return newBreaker(cfg), nil
}

func newBreaker(cfg config) *Breaker {
	b := &Breaker{cfg: cfg}
	if cfg.countWindow > 0 {
		b.cw = newCountWindow(cfg.countWindow)
		b.consec = &b.cw.consec
	} else {
		b.tw = newTimeWindow(cfg.bucketWidth, cfg.buckets)
		b.consec = &b.tw.consec
	}
	return b
}

// Name returns the breaker's name (Options.Name).
func (b *Breaker) Name() string { return b.cfg.name }

// Run runs next if the breaker admits the call and records its outcome; a
// rejection comes back as a Dropped Result carrying the *sluice.Rejection.
func (b *Breaker) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, b, next)
}

// Acquire admits a call or rejects it with a *sluice.Rejection (Reason
// sluice.CircuitOpen, Policy the breaker's name). RetryAfter is the open time
// left when Open, and zero when ForcedOpen or when HalfOpen with every probe
// slot taken. Acquire never waits; ctx is not used.
//
// In the closed state Acquire is one atomic load and allocates nothing.
// Finish every Permit with Done exactly once.
func (b *Breaker) Acquire(ctx context.Context) (sluice.Permit, error) {
	w := b.state.Load()
	if stateOf(w) == Closed {
		return sluice.NewPermit(b, w), nil
	}
	return b.acquireSlow(ctx, w)
}

func (b *Breaker) acquireSlow(ctx context.Context, w uint64) (sluice.Permit, error) {
	switch stateOf(w) {
	case Disabled:
		return sluice.Permit{}, nil
	case ForcedOpen:
		return sluice.Permit{}, b.reject(0)
	case Open:
		if left := b.openUntil.Load() - b.cfg.clock.Nanotime(); left > 0 {
			return sluice.Permit{}, b.reject(left)
		}
	}
	b.mu.Lock()
	w, left := b.refreshLocked()
	if stateOf(w) != HalfOpen {
		b.mu.Unlock()
		b.dispatch()
		if stateOf(w) == Open {
			return sluice.Permit{}, b.reject(left)
		}
		return b.Acquire(ctx) // the state changed meanwhile
	}
	if b.probes >= b.cfg.halfOpenCalls {
		b.mu.Unlock()
		b.dispatch()
		return sluice.Permit{}, b.reject(0)
	}
	b.probes++
	b.mu.Unlock()
	b.dispatch()
	return sluice.NewPermit(b, w), nil
}

func (b *Breaker) reject(retryAfter int64) error {
	b.rejected.Add(1)
	return &sluice.Rejection{Reason: sluice.CircuitOpen, Policy: b.cfg.name, RetryAfter: time.Duration(retryAfter)}
}

// refreshLocked moves an Open breaker whose open duration has passed to
// HalfOpen. It returns the state word and, when Open, the open time left.
// b.mu must be held.
func (b *Breaker) refreshLocked() (w uint64, left int64) {
	w = b.state.Load()
	if stateOf(w) != Open {
		return w, 0
	}
	if left = b.openUntil.Load() - b.cfg.clock.Nanotime(); left > 0 {
		return w, left
	}
	return b.setLocked(HalfOpen), 0
}

// Stands reports whether a permit granted under token still stands: the
// breaker has not changed state since. It implements sluice.Rechecker, so
// that a Guard passes a call through the breaker again when the call had to
// wait for a later policy's permit (a queued concurrency limit) and the
// breaker opened, or changed state otherwise, meanwhile.
func (b *Breaker) Stands(token uint64) bool { return b.state.Load() == token }

// Release records how a call admitted under token ended. It implements
// sluice.Releaser; use Permit.Done rather than calling it directly.
func (b *Breaker) Release(token uint64, o sluice.Outcome) {
	switch stateOf(token) {
	case Closed:
		if o.Class.Ran() && b.state.Load() == token {
			b.record(token, o)
		}
	case HalfOpen:
		b.releaseProbe(token, o)
	}
}

// code classifies a call that ran.
func (b *Breaker) code(o sluice.Outcome) code {
	c := codeRan
	if o.Class == sluice.Failure {
		c |= codeFail
	}
	if b.cfg.slowThreshold > 0 && o.Latency > b.cfg.slowThreshold {
		c |= codeSlow
	}
	return c
}

// record adds a call of the closed state token to the window and trips the
// breaker if a condition is met.
func (b *Breaker) record(token uint64, o sluice.Outcome) {
	c := b.code(o)
	var w counts
	changed := true
	if b.cw != nil {
		w, changed = b.cw.record(c)
	} else {
		w = b.tw.record(b.cfg.clock.Nanotime(), c)
	}
	trip := changed && b.cfg.tripsOn(w)
	if b.cfg.consecutive > 0 {
		if c&codeFail != 0 {
			trip = b.consec.Add(1) >= b.cfg.consecutive || trip
		} else if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
	}
	if trip {
		b.mu.Lock()
		if b.state.Load() == token {
			b.setLocked(Open)
		}
		b.mu.Unlock()
		b.dispatch()
	}
}

func (b *Breaker) releaseProbe(token uint64, o sluice.Outcome) {
	b.mu.Lock()
	if b.probes > 0 { // only a Permit done twice could make it negative
		b.probes--
	}
	if !o.Class.Ran() || b.state.Load() != token {
		b.mu.Unlock()
		return
	}
	c := b.code(o)
	if c&codeFail != 0 || (c&codeSlow != 0 && b.cfg.slowRate > 0) {
		b.setLocked(Open)
	} else if b.probeOK++; b.probeOK >= b.cfg.successes {
		b.setLocked(Closed)
	}
	b.mu.Unlock()
	b.dispatch()
}

// setLocked moves the breaker to state to under a new generation and returns
// the new state word. b.mu must be held.
func (b *Breaker) setLocked(to State) uint64 {
	old := b.state.Load()
	switch to {
	case Open:
		now := b.cfg.clock.Nanotime()
		d := b.cfg.openFor(b.trips)
		until := now + d
		if until < now {
			until = math.MaxInt64
		}
		b.openUntil.Store(until)
		b.trips++
		b.totalTrips++
	case HalfOpen:
		b.probeOK = 0
	case Closed:
		b.trips = 0
		b.consec.Store(0)
		if b.cw != nil {
			b.cw.reset()
		} else {
			b.tw.reset()
		}
	}
	w := (old>>stateBits+1)<<stateBits | uint64(to)
	b.state.Store(w)
	if from := stateOf(old); from != to && b.cfg.onChange != nil {
		b.events = append(b.events, event{from, to})
	}
	return w
}

// dispatch delivers pending state changes to OnStateChange, in order and
// outside the lock. If another goroutine is already delivering, it will
// deliver these too.
func (b *Breaker) dispatch() {
	if b.cfg.onChange == nil {
		return
	}
	b.mu.Lock()
	if b.dispatching || len(b.events) == 0 {
		b.mu.Unlock()
		return
	}
	b.dispatching = true
	finished := false
	defer func() {
		if !finished { // a callback panicked: let the next change deliver
			b.mu.Lock()
			b.dispatching = false
			b.mu.Unlock()
		}
	}()
	for len(b.events) > 0 {
		evs := b.events
		b.events = nil
		b.mu.Unlock()
		for _, ev := range evs {
			b.cfg.onChange(b.cfg.name, ev.from, ev.to)
		}
		b.mu.Lock()
	}
	b.dispatching = false
	finished = true
	b.mu.Unlock()
}

// State returns the breaker's state. An Open breaker whose open duration has
// passed moves to HalfOpen first.
func (b *Breaker) State() State {
	w := b.state.Load()
	if stateOf(w) == Open && b.openUntil.Load() <= b.cfg.clock.Nanotime() {
		b.mu.Lock()
		w, _ = b.refreshLocked()
		b.mu.Unlock()
		b.dispatch()
	}
	return stateOf(w)
}

// Open trips the breaker by hand: it is Open for the open duration (grown as
// for any trip), then half-open as usual. An Open breaker stays as it is.
func (b *Breaker) Open() { b.set(Open, false) }

// Close closes the breaker by hand with an empty window and the open
// duration back at OpenDuration. It also leaves ForcedOpen and Disabled.
func (b *Breaker) Close() { b.set(Closed, false) }

// Reset closes the breaker as Close does and also zeroes the Trips and
// Rejections counters of Metrics.
func (b *Breaker) Reset() { b.set(Closed, true) }

// ForceOpen rejects every call until Close, Reset, Open or Disable. Calling
// it again does nothing.
func (b *Breaker) ForceOpen() { b.set(ForcedOpen, false) }

// Disable admits every call and records nothing until Close, Reset, Open or
// ForceOpen. Calling it again does nothing.
func (b *Breaker) Disable() { b.set(Disabled, false) }

func (b *Breaker) set(to State, zero bool) {
	b.mu.Lock()
	if to == Closed || stateOf(b.state.Load()) != to {
		b.setLocked(to)
	}
	if zero {
		b.totalTrips = 0
		b.rejected.Store(0)
	}
	b.mu.Unlock()
	b.dispatch()
}

// Metrics is a snapshot of a Breaker.
type Metrics struct {
	// State is the breaker's state.
	State State
	// Generation counts the changes of state since New (a Close or Reset
	// of a closed breaker counts too: it empties the window).
	Generation uint64
	// Calls, Failures and SlowCalls are the calls in the window. The window
	// is emptied when the breaker closes and otherwise kept while the
	// breaker is open or half-open (a time window still ages).
	Calls, Failures, SlowCalls int
	// ConsecutiveFailures is the current run of failures in the closed
	// state; it is only counted when Options.ConsecutiveFailures is set.
	ConsecutiveFailures int
	// Probes is how many half-open permits are not yet Done, including
	// those of earlier half-open periods; ProbeSuccesses how many probes
	// succeeded in this half-open state.
	Probes, ProbeSuccesses int
	// OpenFor is the open time left when State is Open; zero otherwise.
	OpenFor time.Duration
	// Trips counts trips and Rejections rejected calls since New or Reset.
	Trips, Rejections uint64
}

// FailureRate returns Failures/Calls, or 0 when Calls is zero.
func (m Metrics) FailureRate() float64 { return rate(m.Failures, m.Calls) }

// SlowCallRate returns SlowCalls/Calls, or 0 when Calls is zero.
func (m Metrics) SlowCallRate() float64 { return rate(m.SlowCalls, m.Calls) }

func rate(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Metrics returns a snapshot of the breaker. Like State, it moves an Open
// breaker whose open duration has passed to HalfOpen.
func (b *Breaker) Metrics() Metrics {
	b.mu.Lock()
	w, left := b.refreshLocked()
	var c counts
	if b.cw != nil {
		c = b.cw.counts()
	} else {
		c = b.tw.countsAt(b.cfg.clock.Nanotime())
	}
	m := Metrics{
		State:               stateOf(w),
		Generation:          w >> stateBits,
		Calls:               int(c.calls),
		Failures:            int(c.failures),
		SlowCalls:           int(c.slow),
		ConsecutiveFailures: int(b.consec.Load()),
		Probes:              b.probes,
		OpenFor:             time.Duration(left),
		Trips:               b.totalTrips,
		Rejections:          b.rejected.Load(),
	}
	if m.State == HalfOpen {
		m.ProbeSuccesses = b.probeOK
	}
	b.mu.Unlock()
	b.dispatch()
	return m
}

// IgnoresLatency reports whether the breaker never reads a call's latency:
// true unless Options.SlowCallThreshold is set. It lets a sluice.Guard skip
// timing calls (sluice.LatencyIgnorer).
func (b *Breaker) IgnoresLatency() bool { return b.cfg.slowThreshold <= 0 }
