package ratelimit

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid"
)

// ShardedOptions configures a Sharded limiter. The zero value is usable.
type ShardedOptions struct {
	// Name names the limiter in its rejections (sluice.Rejection.Policy).
	Name string
	// Clock is the clock read when a shard refills; nil means clock.Real.
	Clock clock.Clock
	// Shards is the number of shards, rounded up to a power of two. Zero
	// means 2×GOMAXPROCS (at construction), rounded up; at most 65536.
	Shards int
	// MaxBatch is the most permits one refill takes from the shared state:
	// one for the call that refills, the rest for its shard. Zero means 64.
	// The batch is also at most 1 + Capacity/(2×Shards), so that the shards
	// never hold more than half the burst.
	MaxBatch int
}

// Defaults of ShardedOptions.
const (
	defaultMaxBatch = 64
	maxShards       = 1 << 16
)

// Sharded is a rate limit on one key in this process for keys too hot for
// Local: most calls decrement the counter of one shard, on a cache line of
// its own, and read no clock. Calls on one P (see runtime.GOMAXPROCS) mostly
// use the same shard, so that its line stays in one core's cache.
//
// The quota is GCRA's, as in Local, split in two. A shared arrival time
// holds Capacity − S·H of it, and each of the S shards may hold up to H
// permits, H = min(MaxBatch, 1 + Capacity/(2S)) − 1. A call takes a permit
// from the shard its P used last; when the shard is empty, the call reads
// the clock and reserves a batch of up to H+1 permits from the shared state
// with one compare-and-swap, keeps one and leaves the rest in the shard. If
// the shared state has no room, the call takes a permit from any other shard
// that holds one, or is rejected. When H is zero (Capacity below 2S) every
// call goes to the shared state, as Local does.
//
// Guarantee: over any interval of length t, Sharded admits at most
// Burst + Limit·t/Period events, the same bound as Local, whatever the
// interleaving of calls, and it can fall short of Local only by the permits
// its shards hold, at most S·H at any instant. The events of an interval are
// those reserved from the shared state during it, at most
// Capacity − S·H + Limit·t/Period by GCRA's own bound, and those the shards
// held when it began, at most S·H. A call is rejected only when the shared
// state has no room and it found no shard holding a permit; for calls made
// one at a time, that is exactly where a GCRA of capacity Capacity − S·H
// charged with the same admitted events would reject. A new limiter starts
// with full shards and admits Burst at one instant; a burst that comes after
// the shards ran dry may be up to S·H short of it. Permits held by a shard
// do not expire (an expiry would need a clock reading on every call); they
// are part of the burst, so holding them through an idle period admits
// nothing beyond the bound.
//
// Sharded implements sluice.Admitter and sluice.Policy, rejecting with a
// *LimitError. It is safe for concurrent use; Allow allocates nothing.
type Sharded struct {
	_      [cacheLine]byte
	tat    atomic.Int64 // the shared state's theoretical arrival time, a clock.Nanotime reading
	_      [cacheLine - 8]byte
	p      atomic.Pointer[shardedParams]
	shards []pocket      // len a power of two; read-only after NewSharded
	mask   uint32        // len(shards) − 1
	hints  sync.Pool     // of *pocket, into shards: the shard each P uses
	next   atomic.Uint32 // the shard the next new hint points at, mod len(shards)
	batch  int64         // ShardedOptions.MaxBatch or its default
	clock  clock.Clock
	name   string
}

// cacheLine is the padding between words written by different cores: two
// 64-byte lines, because adjacent-line prefetchers fetch lines in pairs.
const cacheLine = 128

// pocket is one shard, the permits it holds on a cache line of its own. n
// is the number of permits when positive; zero or negative means empty (a
// failed decrement leaves it negative). Below refilling/2, one call is
// reserving a batch for it and will store the new count.
type pocket struct {
	n atomic.Int64
	_ [cacheLine - 8]byte
}

// refilling marks a shard whose refill is under way. Calls decrement a
// shard only after seeing a positive count, so a count goes below zero, or
// further below refilling, only by calls that raced for its last permits,
// one each: a marked count would need 2^62 of them during one refill to
// wrap around.
const refilling = math.MinInt64 / 2

// shardedParams is a validated Limit in the form Sharded uses. Its params
// describe the shared state alone: cap is Capacity − S·H.
type shardedParams struct {
	params
	tau   int64 // shared capacity × T
	hold  int64 // H, the most permits a shard holds
	limit Limit
}

var (
	_ sluice.Admitter = (*Sharded)(nil)
	_ sluice.Policy   = (*Sharded)(nil)
)

// NewSharded returns a Sharded limiter with a full quota (its shards full).
// For an unusable l (an invalid Limit, or one with a window algorithm) or
// opts (Shards outside [0, 65536], a negative MaxBatch) it returns an error
// matching sluice.ErrInvalidOptions and ErrInvalidLimit (errors.Is) that
// names every problem.
func NewSharded(l Limit, opts ShardedOptions) (*Sharded, error) {
	ps := invalid.Problems{Prefix: "ratelimit: invalid sharded options", Sentinel: ErrInvalidLimit}
	if opts.Shards < 0 || opts.Shards > maxShards {
		ps.Addf("Shards is %d, want 0 to %d", opts.Shards, maxShards)
	}
	if opts.MaxBatch < 0 {
		ps.Addf("MaxBatch is %d, want 0 or more", opts.MaxBatch)
	}
	p, err := gcraParams(l)
	ps.Add(err)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	n := opts.Shards
	if n == 0 {
		n = min(2*runtime.GOMAXPROCS(0), maxShards)
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	x := &Sharded{
		shards: make([]pocket, n),
		mask:   uint32(n - 1),
		batch:  int64(opts.MaxBatch),
		clock:  clock.Or(opts.Clock),
		name:   opts.Name,
	}
	if x.batch == 0 {
		x.batch = defaultMaxBatch
	}
	x.hints.New = func() any { return &x.shards[x.next.Add(1)&x.mask] }
	x.set(p, l)
	x.tat.Store(x.clock.Nanotime())
	hold := x.p.Load().hold
	for i := range x.shards {
		x.shards[i].n.Store(hold)
	}
	return x, nil
}

// SetLimit replaces the limit, keeping the state as Local does: the shared
// arrival time carries over, and shards holding more permits than the new
// H lets them keep lose the excess (a shard that holds fewer is not topped
// up). Calls deciding while SetLimit runs may use either limit. It returns
// an error, and changes nothing, if l is invalid or uses a window algorithm.
func (x *Sharded) SetLimit(l Limit) error {
	p, err := gcraParams(l)
	if err != nil {
		return fmt.Errorf("ratelimit: setting sharded limit %q: %w", x.name, err)
	}
	x.set(p, l)
	return nil
}

// set makes p, the params of l, the limit.
func (x *Sharded) set(p params, l Limit) {
	s := int64(len(x.shards))
	hold := min(x.batch, 1+p.cap/(2*s)) - 1
	p.cap -= s * hold
	np := &shardedParams{params: p, tau: p.cap * p.t, hold: hold, limit: l}
	x.p.Store(np)
	// A refill that read the old limit and stores its count after this
	// trim then sees the new limit and trims its own shard (see refill).
	for i := range x.shards {
		x.shards[i].trim(hold)
	}
}

// Limit returns the current limit.
func (x *Sharded) Limit() Limit { return x.p.Load().limit }

// Allow reports whether one event may happen now, and consumes it if so.
func (x *Sharded) Allow() bool {
	// The pool keeps one hint per P, so calls on one P use one shard and
	// its cache line does not bounce between cores as it does when shards
	// are picked at random. A hint the pool drops (at a GC, say) is
	// replaced by one for the next shard in turn; hints only choose among
	// the fixed shards, so the bounds above do not depend on them.
	s := x.hints.Get().(*pocket)
	// Reading first leaves an empty shard's cache line shared between
	// cores, so that calls rejected while the limit is exhausted write
	// nothing.
	ok := s.n.Load() > 0 && s.n.Add(-1) >= 0 || x.allowSlow(s)
	x.hints.Put(s)
	return ok
}

// allowSlow decides an event whose shard s was found empty: refill s, or
// take one permit from the shared state, or one held by another shard.
func (x *Sharded) allowSlow(s *pocket) bool {
	p := x.p.Load()
	now := x.clock.Nanotime()
	// While the limit is exhausted, a look at the shared state spares
	// rejected calls the writes of a refill.
	if tat := x.tat.Load(); now+p.tau-max(tat, now) >= p.t {
		if got, tried := x.refill(s, p, now); got {
			return true
		} else if !tried && x.reserve(p, now, 1) == 1 {
			return true
		}
	}
	for i := range x.shards {
		if o := &x.shards[i]; o.n.Load() > 0 && o.n.Add(-1) >= 0 {
			return true
		}
	}
	return false
}

// refill reserves a batch for the empty shard s at now and keeps one permit
// of it. It reports whether it admitted the call, and whether it asked the
// shared state (false when another call is refilling s, or shards hold
// nothing under p).
func (x *Sharded) refill(s *pocket, p *shardedParams, now int64) (admitted, tried bool) {
	for p.hold > 0 {
		v := s.n.Load()
		switch {
		case v > 0: // refilled since the caller found it empty
			if s.n.Add(-1) >= 0 {
				return true, false
			}
		case v < refilling/2:
			return false, false
		case s.n.CompareAndSwap(v, refilling):
			g := x.reserve(p, now, p.hold+1)
			s.n.Store(max(g-1, 0)) // drops the failed decrements made meanwhile
			if q := x.p.Load(); q != p {
				s.trim(q.hold) // the limit changed during the refill
			}
			return g > 0, true
		}
	}
	return false, false
}

// reserve takes up to want permits from the shared state at now, at most as
// many as fit, with one compare-and-swap, and returns how many it took.
func (x *Sharded) reserve(p *shardedParams, now, want int64) int64 {
	for {
		tat := x.tat.Load()
		base := max(tat, now)
		g := min(want, (now+p.tau-base)/p.t)
		if g <= 0 {
			return 0
		}
		if x.tat.CompareAndSwap(tat, base+g*p.t) {
			return g
		}
	}
}

// trim lowers the shard's count to at most hold.
func (s *pocket) trim(hold int64) {
	for {
		v := s.n.Load()
		if v <= hold || s.n.CompareAndSwap(v, hold) {
			return
		}
	}
}

// Acquire consumes one event. It returns a zero Permit (Done does nothing)
// when the event is admitted, and a *LimitError when it is not; its Decision
// describes the shared state (Remaining is then 0 and RetryAfter how long
// until the shared state has room for one permit).
func (x *Sharded) Acquire(context.Context) (sluice.Permit, error) {
	if x.Allow() {
		return sluice.Permit{}, nil
	}
	p := x.p.Load()
	s := state{a: x.tat.Load()}
	d := s.gcra(p.params, 1, x.clock.Nanotime())
	d.Allowed, d.Limit = false, p.limit.Capacity()
	return sluice.Permit{}, newLimitError(x.name, p.limit.Period, d, nil)
}

// Run runs next if Acquire admits the call; see sluice.RunAdmitted.
func (x *Sharded) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, x, next)
}

// IgnoresLatency reports true: a rate limit never reads a call's latency
// (sluice.LatencyIgnorer).
func (x *Sharded) IgnoresLatency() bool { return true }
