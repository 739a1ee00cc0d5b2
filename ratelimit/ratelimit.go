// Package ratelimit limits how often something may happen per key.
//
// A Limit says how much: at most Limit events per Period, with bursts of up
// to Burst for the bucket algorithms. A Store decides, for one key, whether n
// more events fit; Memory is the in-process Store (ratelimit/redisstore
// shares state between processes). On top of a Store, a Limiter is the
// sluice admission policy: it takes the key from the call's context
// (WithKey) and rejects with a *LimitError, a sluice.Rejection that also
// carries the Decision for RateLimit headers. Shaper queues callers and lets
// them through at a steady rate instead of rejecting them.
//
// # Local, Sharded or Memory
//
//   - A Limiter over Memory (the default) for many keys (per client, per
//     route) or when the algorithm is a window one; each decision takes a
//     lock on one of the store's 64 shards and a map lookup. The store is
//     bounded (MaxKeys): when full it evicts idle keys, then the least
//     recently used, and never refuses a new key.
//   - Local for one key known in advance (a global or per-route limit)
//     under moderate concurrency: one int64 updated with a compare-and-swap,
//     exact, a clock reading per call.
//   - Sharded for one very hot key, when Local's clock reading and the
//     cache line every core writes show up in profiles (millions of
//     decisions per second across cores). Most calls decrement a per-shard
//     counter and read no clock. It keeps Local's bound (never more than
//     Burst + Limit·t/Period in an interval of length t) but may admit up to
//     S·H fewer, the permits its shards hold (see Sharded); with a Burst
//     below twice the number of shards it gains nothing over Local.
//
// # Algorithms and their guarantees
//
// Each algorithm is an exact state transition on a few words per key, tested
// at fixed instants. "At most X in any interval of length t" holds for every
// pattern of arrivals, with a full quota at the start:
//
//   - GCRA (the default): one int64, the theoretical arrival time. At most
//     Burst + Limit·t/Period events in any interval of length t (closed at
//     both ends). Its interval Period/Limit is rounded up to a nanosecond.
//   - TokenBucket: fractional tokens (a float64, never truncated) and an
//     instant. Same guarantee as GCRA; a change of limit keeps the token
//     count, clamped to the new Burst.
//   - LeakyBucket, as a meter: a water level that drains at Limit per
//     Period; a request that would overflow Burst is rejected. Same
//     guarantee; a change of limit keeps the level.
//   - FixedWindow: a count per window aligned to multiples of Period. At
//     most Limit per aligned window, so up to 2·Limit in an interval of
//     length Period that straddles two windows.
//   - SlidingWindow: the weighted two-window counter. At most Limit per
//     aligned window and at most 2·Limit−1 in any interval of length
//     Period; that is its error bound against an exact log, reached only
//     when the previous window's events were bunched at its end (it is
//     exact for evenly spread ones).
//   - SlidingLog: a ring of the admitted events' timestamps, at most Limit
//     of them (two events in the same nanosecond are two timestamps). Exact:
//     at most Limit in any interval of length Period open at one end.
//
// A rejected request never consumes quota: a rejection leaves the key's
// state as it was, so a request for one event right after a rejected request
// for several gets the answer it would have had anyway. A request for more
// events than the limit's Capacity is never admitted; its Decision has
// RetryAfter RetryNever. Time never moves backwards for a key: an instant
// older than one the key has seen counts as that one, so a clock reading
// that went stale while waiting for a lock cannot make room (the bug of
// golang/go#71360).
//
// Limits can change at run time without resetting keys: the Limit is passed
// with every request, and each algorithm carries its state over (tokens,
// arrival time, level, counts or timestamps). Only a change of Algorithm
// starts a key afresh.
//
// # Cost
//
// Local, Sharded and a Limiter over Memory decide without allocating. The
// Memory store holds each key's state in a few hundred bytes (SlidingLog
// also 8 bytes per timestamp it holds), and a full store evicts one key on
// each new key. Measured figures, with the commands that produced them,
// are in BENCHMARKS.md at the repository's root.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/invalid"
)

// Algorithm names a rate-limiting algorithm.
type Algorithm string

// The algorithms. Each documents its guarantee where it is implemented. The
// empty Algorithm means GCRA.
const (
	TokenBucket   Algorithm = "token_bucket"
	GCRA          Algorithm = "gcra"
	FixedWindow   Algorithm = "fixed_window"
	SlidingLog    Algorithm = "sliding_log"
	SlidingWindow Algorithm = "sliding_window" // the weighted two-window counter
	LeakyBucket   Algorithm = "leaky_bucket"   // as a meter: reject when full
)

// Limit describes one rate limit: at most Limit events per Period, with bursts
// of up to Burst for the algorithms that have one. The zero Limit is invalid;
// see Validate.
type Limit struct {
	// Algorithm chooses the algorithm; empty means GCRA.
	Algorithm Algorithm
	// Limit is the number of events allowed per Period. It must be at least 1.
	Limit int
	// Period is the length of the window (or the refill period). It must be
	// positive.
	Period time.Duration
	// Burst is the bucket capacity for token bucket, GCRA and leaky bucket.
	// Zero means Limit. The window algorithms ignore it.
	Burst int
}

// Decision is the answer to one request for n events on one key.
type Decision struct {
	// Allowed reports whether the n events were admitted (and consumed).
	Allowed bool
	// Limit is the limit's size (Burst or Limit), for the RateLimit headers:
	// the Capacity of the Limit.
	Limit int
	// Remaining is how many more events would be admitted now.
	Remaining int
	// RetryAfter is how long until the same request could be admitted; zero
	// when Allowed, and RetryNever when the request asks for more events
	// than the limit's capacity and so can never be admitted.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full quota.
	ResetAfter time.Duration
}

// RetryNever is the RetryAfter of a Decision whose request can never be
// admitted because it asks for more events than the limit's Capacity. Such a
// request consumes nothing; callers should not retry it (HTTP 413 or 429
// without Retry-After).
const RetryNever time.Duration = -1

// Store makes decisions for keys. Implementations are safe for concurrent
// use; a rejected request never consumes quota. n may be zero to read a key's
// state (Allowed is then true and nothing is consumed); a negative n is an
// error. An invalid Limit is an error wrapping ErrInvalidLimit.
type Store interface {
	AllowN(ctx context.Context, key string, l Limit, n int) (Decision, error)
}

// ErrInvalidLimit is matched (errors.Is) by the errors that report an
// invalid Limit or a negative n, and by every error a constructor of this
// package returns for unusable options. It matches sluice.ErrInvalidOptions
// too.
var ErrInvalidLimit = invalid.Sentinel("ratelimit: invalid limit")

// maxHorizon bounds how far ahead, in nanoseconds, a limit may need to look
// (Capacity times the emission interval, or two periods), so that adding it
// to a clock reading cannot overflow int64. It is about 73 years.
const maxHorizon = math.MaxInt64 / 4

// Validate reports whether l is usable: a known Algorithm, Limit ≥ 1, Period
// > 0, Burst ≥ 0, and a horizon (Capacity × Period/Limit, or two Periods)
// below about 73 years. The error matches ErrInvalidLimit and names every
// unusable field.
func (l Limit) Validate() error {
	_, err := l.params()
	return err
}

// Capacity is the most events the limit admits at one instant from a full
// quota: Burst (or Limit when Burst is zero) for token bucket, GCRA and leaky
// bucket, Limit for the window algorithms. A request for more can never be
// admitted.
func (l Limit) Capacity() int {
	switch l.Algorithm {
	case FixedWindow, SlidingLog, SlidingWindow:
		return l.Limit
	}
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Limit
}

// algo is the compact form of an Algorithm kept in each key's state.
type algo uint8

const (
	algoGCRA algo = iota + 1
	algoTokenBucket
	algoLeakyBucket
	algoFixedWindow
	algoSlidingWindow
	algoSlidingLog
)

// params is a validated Limit in the form the algorithms use: counts and
// nanoseconds as int64.
type params struct {
	alg    algo
	limit  int64 // events per period
	period int64 // nanoseconds
	cap    int64 // Capacity
	t      int64 // GCRA emission interval: ceil(period/limit) nanoseconds
}

func (l Limit) params() (params, error) {
	var p params
	switch l.Algorithm {
	case GCRA, "":
		p.alg = algoGCRA
	case TokenBucket:
		p.alg = algoTokenBucket
	case LeakyBucket:
		p.alg = algoLeakyBucket
	case FixedWindow:
		p.alg = algoFixedWindow
	case SlidingWindow:
		p.alg = algoSlidingWindow
	case SlidingLog:
		p.alg = algoSlidingLog
	}
	if p.alg == 0 || l.Limit < 1 || l.Period <= 0 || l.Burst < 0 {
		return params{}, l.problems()
	}
	p.limit, p.period, p.cap = int64(l.Limit), int64(l.Period), int64(l.Capacity())
	p.t = p.period / p.limit
	if p.period%p.limit != 0 {
		p.t++
	}
	if p.period > maxHorizon/2 || p.t > maxHorizon/p.cap {
		ps := limitProblems()
		ps.Addf("Period %v with capacity %d reaches beyond 73 years", l.Period, p.cap)
		return params{}, ps.Err()
	}
	return p, nil
}

// limitProblems returns the Problems of a Limit.
func limitProblems() invalid.Problems {
	return invalid.Problems{Prefix: ErrInvalidLimit.Error(), Sentinel: ErrInvalidLimit}
}

// problems returns one error per unusable field among Algorithm, Limit,
// Period and Burst, joined; nil if they are all usable.
func (l Limit) problems() error {
	ps := limitProblems()
	switch l.Algorithm {
	case GCRA, "", TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog:
	default:
		ps.Addf("Algorithm %q is unknown", l.Algorithm)
	}
	if l.Limit < 1 {
		ps.Addf("Limit is %d, want at least 1", l.Limit)
	}
	if l.Period <= 0 {
		ps.Addf("Period is %v, want more than 0", l.Period)
	}
	if l.Burst < 0 {
		ps.Addf("Burst is %d, want 0 or more", l.Burst)
	}
	return ps.Err()
}

// errNegative is the error for a negative n.
func errNegative(n int) error {
	return fmt.Errorf("%w: n is %d, want 0 or more", ErrInvalidLimit, n)
}
