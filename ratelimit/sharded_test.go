package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// shardedCases are limits and options whose shards hold from nothing (every
// call goes to the shared state) to 63 permits each.
var shardedCases = []shardedCase{
	{Limit{Limit: 5, Period: 1000, Burst: 7}, ShardedOptions{Shards: 4}, 0},
	{Limit{Limit: 3, Period: 1000, Burst: 40}, ShardedOptions{Shards: 4}, 5},
	{Limit{Limit: 7, Period: 1_000_003, Burst: 9}, ShardedOptions{Shards: 2}, 2},
	{Limit{Limit: 100, Period: time.Second, Burst: 150}, ShardedOptions{Shards: 3, MaxBatch: 4}, 3},
	{Limit{Limit: 1000, Period: time.Second}, ShardedOptions{Shards: 4}, 63},
	{Limit{Limit: 1000, Period: time.Second}, ShardedOptions{Shards: 1, MaxBatch: 1}, 0},
}

type shardedCase struct {
	l    Limit
	opts ShardedOptions
	hold int64 // the H the options give
}

func (tc shardedCase) name() string {
	return fmt.Sprintf("%d per %v burst %d/shards %d batch %d", tc.l.Limit, tc.l.Period, tc.l.Burst, tc.opts.Shards, tc.opts.MaxBatch)
}

func newTestSharded(t *testing.T, l Limit, opts ShardedOptions) (*Sharded, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	opts.Clock = fc
	x, err := NewSharded(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	return x, fc
}

// setAside is S·H, the part of the burst the shards hold when full.
func (x *Sharded) setAside() int64 { return int64(len(x.shards)) * x.p.Load().hold }

// drain calls Allow from g goroutines until each is rejected once, then from
// this goroutine until it is rejected, and returns both counts.
func drain(x *Sharded, g int) (concurrent, total int64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			n := int64(0)
			for x.Allow() {
				n++
			}
			mu.Lock()
			concurrent += n
			mu.Unlock()
		})
	}
	wg.Wait()
	total = concurrent
	for x.Allow() {
		total++
	}
	return concurrent, total
}

// TestShardedFrozenInstant checks what is exact at one instant: a new
// limiter admits exactly Burst, however many goroutines race for it, and
// after a drain and an idle period long enough to refill the shared state,
// exactly Burst − S·H. While goroutines race, the permits left behind are
// at most S·H, those the shards may hold.
func TestShardedFrozenInstant(t *testing.T) {
	for _, tc := range shardedCases {
		t.Run(tc.name(), func(t *testing.T) {
			x, fc := newTestSharded(t, tc.l, tc.opts)
			if h := x.p.Load().hold; h != tc.hold {
				t.Fatalf("shards hold %d, want %d", h, tc.hold)
			}
			burst := int64(tc.l.Capacity())
			for round, want := range []int64{burst, burst - x.setAside()} {
				concurrent, total := drain(x, 8)
				if total != want || concurrent < want-x.setAside() {
					t.Fatalf("round %d: admitted %d by 8 goroutines, %d in all; want %d in all and at least %d by the goroutines",
						round, concurrent, total, want, want-x.setAside())
				}
				// The reset time: the whole burst's worth of emission intervals.
				fc.Advance(time.Duration(burst * x.p.Load().t))
			}
		})
	}
}

// window checks the guarantee on a run's admitted events, counts per
// instant in increasing order: no interval [s, e] holds more than
// Capacity + floor((e−s)/T) of them, T = ceil(Period/Limit), which is at
// most Burst + Limit·(e−s)/Period.
func window(t *testing.T, l Limit, at []int64, counts []int64) {
	t.Helper()
	p, _ := l.params()
	for i := range at {
		sum := int64(0)
		for j := i; j < len(at); j++ {
			sum += counts[j]
			if bound := p.cap + (at[j]-at[i])/p.t; sum > bound {
				t.Fatalf("admitted %d in [%d, %d], bound %d", sum, at[i], at[j], bound)
			}
		}
	}
}

// randomStep returns how far to move the clock: often not at all, often a
// fraction of an emission interval, sometimes a long idle period.
func randomStep(rng *rand.Rand, p params) time.Duration {
	switch r := rng.IntN(10); {
	case r < 3:
		return 0
	case r < 8:
		return time.Duration(rng.Int64N(3*p.t + 1))
	case r < 9:
		return time.Duration(rng.Int64N(p.cap*p.t/4 + 1))
	default:
		return time.Duration(rng.Int64N(3*p.cap*p.t + 1))
	}
}

// TestShardedRandomRun checks, on long random runs from one goroutine, the
// window bound and the under-admission bound: a call is rejected only where
// a GCRA of capacity Burst − S·H, charged with every event the limiter
// admitted, would have no room either.
func TestShardedRandomRun(t *testing.T) {
	for _, tc := range shardedCases {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/seed %d", tc.name(), seed), func(t *testing.T) {
				x, fc := newTestSharded(t, tc.l, tc.opts)
				p := x.p.Load()
				rng := rand.New(rand.NewPCG(seed, 11))
				ref := fc.Nanotime() // the reference GCRA's arrival time
				var at, counts []int64
				// About 300k calls per run.
				for range min(1000, 300_000/tc.l.Capacity()) {
					fc.Advance(randomStep(rng, p.params))
					now := fc.Nanotime()
					n := int64(0)
					for range rng.IntN(2*tc.l.Capacity() + 2) {
						if x.Allow() {
							n++
							ref = max(ref, now) + p.t
						} else if max(ref, now)+p.t-now <= p.tau {
							t.Fatalf("rejected at %d with room for one in a GCRA of capacity %d charged with the admitted events",
								now, p.cap)
						}
					}
					at, counts = append(at, now), append(counts, n)
				}
				window(t, tc.l, at, counts)
			})
		}
	}
}

// TestShardedConcurrentRun checks the window bound when goroutines race:
// at each of many instants, several goroutines make random numbers of calls
// at once.
func TestShardedConcurrentRun(t *testing.T) {
	const goroutines = 4
	for _, tc := range shardedCases {
		t.Run(tc.name(), func(t *testing.T) {
			x, fc := newTestSharded(t, tc.l, tc.opts)
			p := x.p.Load()
			rng := rand.New(rand.NewPCG(5, 13))
			var at, counts []int64
			for range 300 {
				fc.Advance(randomStep(rng, p.params))
				calls := make([]int, goroutines)
				for i := range calls {
					calls[i] = rng.IntN(tc.l.Capacity() + 2)
				}
				admitted := make([]int64, goroutines)
				var wg sync.WaitGroup
				for i := range goroutines {
					wg.Go(func() {
						for range calls[i] {
							if x.Allow() {
								admitted[i]++
							}
						}
					})
				}
				wg.Wait()
				n := int64(0)
				for _, a := range admitted {
					n += a
				}
				at, counts = append(at, fc.Nanotime()), append(counts, n)
			}
			window(t, tc.l, at, counts)
		})
	}
}

// TestShardedSetLimit checks that a new limit keeps the shared arrival time,
// takes from the shards what they may no longer hold, and rejects invalid
// limits without changing anything.
func TestShardedSetLimit(t *testing.T) {
	x, fc := newTestSharded(t, Limit{Limit: 1000, Period: time.Second}, ShardedOptions{Shards: 4})
	// Shards hold 63 each (min(64, 1+1000/8) − 1); the shared state 748.
	for range 10 {
		if !x.Allow() {
			t.Fatal("rejected from a full limiter")
		}
	}
	// 100 per second, burst 100: shards hold at most 12 (min(64, 1+100/8)
	// − 1), 48 in all, and the shared state 52. The 10 events came from
	// shards, so the shared state is untouched: 48 + 52 at this instant.
	if err := x.SetLimit(Limit{Limit: 100, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	if x.Limit().Limit != 100 || x.p.Load().hold != 12 {
		t.Fatalf("after SetLimit: %+v, hold %d", x.Limit(), x.p.Load().hold)
	}
	if _, total := drain(x, 4); total != 100 {
		t.Fatalf("admitted %d after lowering the limit, want 100", total)
	}
	// The arrival time carries over to a higher limit: 52 events at 10ms
	// leave 520ms of debt; at 1000 per second with a burst of 2000 (shards
	// hold 63 each, the shared state 1748 = 1748ms), 1228 events fit, and
	// none from the shards, which ran dry.
	if err := x.SetLimit(Limit{Limit: 1000, Period: time.Second, Burst: 2000}); err != nil {
		t.Fatal(err)
	}
	if _, total := drain(x, 4); total != 1228 {
		t.Fatalf("admitted %d after raising the limit, want 1228", total)
	}
	fc.Advance(time.Millisecond)
	if !x.Allow() || x.Allow() {
		t.Fatal("want exactly one event 1ms later")
	}
	for _, bad := range []Limit{{}, {Algorithm: SlidingLog, Limit: 1, Period: time.Second}} {
		if err := x.SetLimit(bad); !errors.Is(err, ErrInvalidLimit) || x.Limit().Burst != 2000 {
			t.Fatalf("SetLimit(%+v): %v, limit now %+v", bad, err, x.Limit())
		}
	}
}

// TestShardedSetLimitRacing changes the limit while goroutines refill:
// afterwards no shard holds more than the new limit lets it.
func TestShardedSetLimitRacing(t *testing.T) {
	x, fc := newTestSharded(t, Limit{Limit: 1 << 20, Period: time.Second}, ShardedOptions{Shards: 4})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				x.Allow()
			}
		})
	}
	for i := range 50 {
		fc.Advance(time.Millisecond)
		if err := x.SetLimit(Limit{Limit: 1<<20 - i, Period: time.Second, Burst: 2000 - 40*i}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	hold := x.p.Load().hold
	for i := range x.shards {
		if n := x.shards[i].n.Load(); n > hold {
			t.Fatalf("shard %d holds %d, more than %d", i, n, hold)
		}
	}
}

func TestShardedAcquire(t *testing.T) {
	x, fc := newTestSharded(t, Limit{Limit: 10, Period: time.Second, Burst: 5}, ShardedOptions{Name: "hot", Shards: 2})
	g := sluice.New(x)
	ok := func(context.Context) (int, error) { return 1, nil }
	for i := range 5 {
		if _, err := sluice.Do(context.Background(), g, ok); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := sluice.Do(context.Background(), g, ok)
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, sluice.ErrRejected) || le.Policy != "hot" {
		t.Fatalf("sixth call: %v", err)
	}
	// Burst 5 on 2 shards holds 1 per shard and 3 in the shared state,
	// now 300ms ahead: room for one in 100ms.
	if le.RetryAfter != 100*time.Millisecond || le.Decision.Limit != 5 || le.Decision.Remaining != 0 {
		t.Fatalf("rejection: %+v, %+v", le.Rejection, le.Decision)
	}
	fc.Advance(100 * time.Millisecond)
	if _, err := x.Acquire(context.Background()); err != nil {
		t.Fatalf("100ms later: %v", err)
	}
	if !x.IgnoresLatency() {
		t.Fatal("IgnoresLatency is false")
	}
}

func TestNewShardedErrors(t *testing.T) {
	ok := Limit{Limit: 1, Period: time.Second}
	for _, tc := range []struct {
		l    Limit
		opts ShardedOptions
	}{
		{Limit{}, ShardedOptions{}},
		{Limit{Algorithm: FixedWindow, Limit: 1, Period: time.Second}, ShardedOptions{}},
		{ok, ShardedOptions{Shards: -1}},
		{ok, ShardedOptions{Shards: maxShards + 1}},
		{ok, ShardedOptions{MaxBatch: -1}},
	} {
		if x, err := NewSharded(tc.l, tc.opts); err == nil {
			t.Errorf("NewSharded(%+v, %+v) = %v, want an error", tc.l, tc.opts, x)
		}
	}
	x, err := NewSharded(ok, ShardedOptions{Shards: 5})
	if err != nil || len(x.shards) != 8 {
		t.Fatalf("Shards 5: %v, %d shards, want 8", err, len(x.shards))
	}
}

func TestShardedAllocs(t *testing.T) {
	x, fc := newTestSharded(t, Limit{Limit: 100, Period: time.Second}, ShardedOptions{Shards: 2})
	// Enough calls to go through shards, refills, the shared state and
	// rejections.
	if a := testing.AllocsPerRun(100, func() { x.Allow() }); a != 0 {
		t.Fatalf("Allow allocates %v times per call", a)
	}
	fc.Advance(time.Second)
	if a := testing.AllocsPerRun(100, func() { x.Allow() }); a != 0 {
		t.Fatalf("Allow allocates %v times per call", a)
	}
}
