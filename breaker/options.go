package breaker

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// Defaults for zero Options fields.
const (
	// DefaultFailureRate is the failure rate that trips a breaker for which
	// none of FailureRate, SlowCallRate and ConsecutiveFailures is set.
	DefaultFailureRate = 0.5
	// DefaultMinCalls is the number of calls a window must hold before its
	// rates are judged (capped at the size of a count window).
	DefaultMinCalls = 20
	// DefaultCountWindow is the size of the count window used when neither
	// CountWindow nor TimeWindow is set.
	DefaultCountWindow = 100
	// DefaultBuckets is the number of buckets of a time window.
	DefaultBuckets = 10
	// DefaultOpenDuration is how long a breaker stays open after a trip,
	// as the gateway's open_for: the half-open probes bound what a sick
	// downstream receives, so a short wait costs it little and a healed one
	// is back within seconds (see docs/defaults.md).
	DefaultOpenDuration = 5 * time.Second
	// DefaultHalfOpenCalls is how many probes may run at once in half-open,
	// as the gateway's half_open_calls; with the default SuccessThreshold,
	// that many successes close the breaker.
	DefaultHalfOpenCalls = 3
)

// maxWindow bounds CountWindow: a window's call count is a 32-bit field.
const maxWindow = 1 << 30

// ErrInvalidOptions is matched (errors.Is) by every error New and NewSet
// return for options that make no sense. It matches
// sluice.ErrInvalidOptions too.
var ErrInvalidOptions = invalid.Sentinel("breaker: invalid options")

// Options configures a Breaker. The zero Options is valid: a breaker that
// trips when at least half of the last 100 calls failed (once 20 have been
// seen), stays open 60 seconds, and then lets one probe through.
//
// A breaker trips on any of three conditions, each disabled by a zero value.
// When all three are zero, FailureRate is DefaultFailureRate.
type Options struct {
	// Name names the breaker in rejections (Rejection.Policy) and in
	// OnStateChange. It may be empty.
	Name string

	// Clock is the clock open durations, time windows and Metrics are read
	// on. Nil means clock.Real.
	Clock clock.Clock

	// FailureRate trips the breaker when the share of failed calls in the
	// window reaches it (≥), once the window holds MinCalls calls. It is a
	// fraction in [0, 1]; zero disables this condition (but see the
	// default above).
	FailureRate float64

	// SlowCallThreshold makes a call that ran longer than it (by
	// Outcome.Latency) a slow call. Zero means no call is slow.
	SlowCallThreshold time.Duration

	// SlowCallRate trips the breaker when the share of slow calls in the
	// window reaches it (≥), once the window holds MinCalls calls. It is a
	// fraction in [0, 1] and needs SlowCallThreshold; zero disables this
	// condition. When it is set, a slow probe in half-open counts as a
	// failed probe.
	SlowCallRate float64

	// ConsecutiveFailures trips the breaker after that many failures in a
	// row in the closed state, whatever the window says. Zero disables
	// this condition.
	ConsecutiveFailures int

	// MinCalls is how many calls the window must hold before FailureRate
	// and SlowCallRate are judged. Zero means DefaultMinCalls, capped at
	// CountWindow. It may not exceed CountWindow.
	MinCalls int

	// CountWindow makes the window the last CountWindow calls. Zero means
	// DefaultCountWindow unless TimeWindow is set; setting both is an error.
	CountWindow int

	// TimeWindow makes the window the calls that ended in the last
	// TimeWindow, kept in Buckets buckets of TimeWindow/Buckets each that
	// age out whole: the window spans between TimeWindow-TimeWindow/Buckets
	// and TimeWindow. Zero means a count window.
	TimeWindow time.Duration

	// Buckets is the number of buckets of a time window. Zero means
	// DefaultBuckets. It is ignored for a count window.
	Buckets int

	// OpenDuration is how long the breaker stays open after its first trip
	// before it lets probes through. Zero means DefaultOpenDuration.
	OpenDuration time.Duration

	// OpenMultiplier grows the open duration on each trip that follows
	// another without the breaker closing in between: the k-th such trip
	// (k from 0) stays open OpenDuration × OpenMultiplier^k, at most
	// MaxOpenDuration. Zero or one means every trip stays open
	// OpenDuration. Closing the breaker starts again from OpenDuration.
	OpenMultiplier float64

	// MaxOpenDuration caps the grown open duration. Zero means ten times
	// OpenDuration. It may not be less than OpenDuration.
	MaxOpenDuration time.Duration

	// HalfOpenCalls is how many probes may be in flight at once in the
	// half-open state; further calls are rejected. A probe still running
	// from an earlier half-open period keeps its slot until it is Done, so
	// the bound holds across periods. Zero means DefaultHalfOpenCalls.
	HalfOpenCalls int

	// SuccessThreshold is how many successful probes close the breaker.
	// Any failed probe opens it again. Zero means HalfOpenCalls.
	SuccessThreshold int

	// OnStateChange, if not nil, is called after every change of state with
	// the breaker's name, the old and the new state. It is called outside
	// any lock of the breaker (it may call the breaker's methods), one
	// change at a time and in the order the changes happened; it may run on
	// the goroutine of a later change rather than on the one that made it.
	OnStateChange func(name string, from, to State)
}

// config is Options with every default applied and durations in
// nanoseconds.
type config struct {
	name          string
	clock         clock.Clock
	failureRate   float64 // 0: disabled
	slowRate      float64 // 0: disabled
	slowThreshold time.Duration
	consecutive   uint64 // 0: disabled
	minCalls      uint64
	countWindow   int   // 0 for a time window
	bucketWidth   int64 // ns, for a time window
	buckets       int
	openDuration  int64 // ns
	multiplier    float64
	maxOpen       int64 // ns
	halfOpenCalls int
	successes     int
	onChange      func(name string, from, to State)
}

// resolve validates o and applies the defaults. Every problem is reported,
// each wrapping ErrInvalidOptions.
func (o Options) resolve() (config, error) {
	ps := invalid.Problems{Prefix: "breaker: invalid options", Sentinel: ErrInvalidOptions}
	bad := ps.Addf
	rate := func(name string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 1 {
			bad("%s %v is not in [0, 1]", name, v)
		}
	}
	rate("FailureRate", o.FailureRate)
	rate("SlowCallRate", o.SlowCallRate)
	if o.SlowCallRate > 0 && o.SlowCallThreshold <= 0 {
		bad("SlowCallRate %v needs a positive SlowCallThreshold", o.SlowCallRate)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"SlowCallThreshold", int64(o.SlowCallThreshold)},
		{"ConsecutiveFailures", int64(o.ConsecutiveFailures)},
		{"MinCalls", int64(o.MinCalls)},
		{"CountWindow", int64(o.CountWindow)},
		{"TimeWindow", int64(o.TimeWindow)},
		{"Buckets", int64(o.Buckets)},
		{"OpenDuration", int64(o.OpenDuration)},
		{"MaxOpenDuration", int64(o.MaxOpenDuration)},
		{"HalfOpenCalls", int64(o.HalfOpenCalls)},
		{"SuccessThreshold", int64(o.SuccessThreshold)},
	} {
		if f.v < 0 {
			bad("%s %d is negative", f.name, f.v)
		}
	}
	if math.IsNaN(o.OpenMultiplier) || math.IsInf(o.OpenMultiplier, 0) || (o.OpenMultiplier != 0 && o.OpenMultiplier < 1) {
		bad("OpenMultiplier %v is neither 0 nor a finite number ≥ 1", o.OpenMultiplier)
	}
	if o.CountWindow > 0 && o.TimeWindow > 0 {
		bad("CountWindow %d and TimeWindow %v are both set", o.CountWindow, o.TimeWindow)
	}
	if o.CountWindow > maxWindow {
		bad("CountWindow %d exceeds %d", o.CountWindow, maxWindow)
	}

	c := config{
		name:          o.Name,
		clock:         clock.Or(o.Clock),
		failureRate:   o.FailureRate,
		slowRate:      o.SlowCallRate,
		slowThreshold: o.SlowCallThreshold,
		consecutive:   uint64(max(o.ConsecutiveFailures, 0)),
		multiplier:    max(o.OpenMultiplier, 1),
		halfOpenCalls: o.HalfOpenCalls,
		successes:     o.SuccessThreshold,
		onChange:      o.OnStateChange,
	}
	if c.failureRate == 0 && c.slowRate == 0 && c.consecutive == 0 {
		c.failureRate = DefaultFailureRate
	}
	if o.TimeWindow > 0 {
		c.buckets = o.Buckets
		if c.buckets == 0 {
			c.buckets = DefaultBuckets
		}
		c.bucketWidth = int64(o.TimeWindow) / int64(c.buckets)
		if c.bucketWidth == 0 {
			bad("TimeWindow %v is shorter than Buckets (%d) nanoseconds", o.TimeWindow, c.buckets)
		}
		c.minCalls = uint64(max(o.MinCalls, 0))
		if c.minCalls == 0 {
			c.minCalls = DefaultMinCalls
		}
	} else {
		c.countWindow = o.CountWindow
		if c.countWindow == 0 {
			c.countWindow = DefaultCountWindow
		}
		switch {
		case c.countWindow < 0: // reported above
		case o.MinCalls > c.countWindow:
			bad("MinCalls %d exceeds CountWindow %d: the rates could never be judged", o.MinCalls, c.countWindow)
		case o.MinCalls > 0:
			c.minCalls = uint64(o.MinCalls)
		default:
			c.minCalls = uint64(min(DefaultMinCalls, c.countWindow))
		}
	}
	c.openDuration = int64(o.OpenDuration)
	if c.openDuration == 0 {
		c.openDuration = int64(DefaultOpenDuration)
	}
	c.maxOpen = int64(o.MaxOpenDuration)
	switch {
	case c.maxOpen == 0 && c.openDuration > math.MaxInt64/10:
		c.maxOpen = math.MaxInt64
	case c.maxOpen == 0:
		c.maxOpen = 10 * c.openDuration
	case c.maxOpen < c.openDuration && o.OpenDuration >= 0:
		bad("MaxOpenDuration %v is less than OpenDuration %v", o.MaxOpenDuration, time.Duration(c.openDuration))
	}
	if c.halfOpenCalls == 0 {
		c.halfOpenCalls = DefaultHalfOpenCalls
	}
	if c.successes == 0 {
		c.successes = c.halfOpenCalls
	}
	if err := ps.Err(); err != nil {
		return config{}, err
	}
	return c, nil
}

// openFor returns how long the trip that follows k trips without a close
// stays open.
func (c *config) openFor(k int) int64 {
	d := float64(c.openDuration) * math.Pow(c.multiplier, float64(k))
	if d >= float64(c.maxOpen) {
		return c.maxOpen
	}
	return int64(d)
}

// tripsOn reports whether the window w trips the breaker.
func (c *config) tripsOn(w counts) bool {
	if w.calls < c.minCalls || w.failures > w.calls || w.slow > w.calls {
		// Too few calls, or a torn read while two updates cross.
		return false
	}
	n := float64(w.calls)
	return (c.failureRate > 0 && float64(w.failures) >= c.failureRate*n) ||
		(c.slowRate > 0 && float64(w.slow) >= c.slowRate*n)
}
