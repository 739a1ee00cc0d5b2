package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// A Limiter in a Guard limits each client separately: the key comes from the
// request's context.
func ExampleLimiter() {
	fc := clock.NewFake(time.Time{})
	limiter, err := ratelimit.New(ratelimit.Options{
		Name:  "per-client",
		Limit: ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 2, Period: time.Second},
		Clock: fc,
	})
	if err != nil {
		panic(err)
	}
	g := sluice.New(limiter)
	ctx := ratelimit.WithKey(context.Background(), "203.0.113.7")
	for range 3 {
		_, err := sluice.Do(ctx, g, func(context.Context) (string, error) { return "ok", nil })
		var le *ratelimit.LimitError
		if errors.As(err, &le) {
			fmt.Printf("rejected: retry after %v, %d of %d left\n", le.RetryAfter, le.Decision.Remaining, le.Decision.Limit)
			continue
		}
		fmt.Println("admitted")
	}
	// Output:
	// admitted
	// admitted
	// rejected: retry after 500ms, 0 of 2 left
}

// The Memory store's AllowNAt takes the instant, which makes the algorithms
// easy to study: here the sliding log counts two events in the same
// nanosecond twice.
func ExampleMemory_AllowNAt() {
	m := ratelimit.NewMemory(ratelimit.MemoryOptions{})
	l := ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Limit: 2, Period: time.Second}
	for _, at := range []time.Duration{0, 0, 999 * time.Millisecond, time.Second} {
		d, _ := m.AllowNAt("key", l, 1, int64(at))
		fmt.Printf("%v: allowed %v, remaining %d, retry after %v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := m.AllowNAt("key", l, 3, int64(time.Second))
	fmt.Println("3 events:", d.RetryAfter == ratelimit.RetryNever)
	// Output:
	// 0s: allowed true, remaining 1, retry after 0s
	// 0s: allowed true, remaining 0, retry after 0s
	// 999ms: allowed false, remaining 0, retry after 1ms
	// 1s: allowed true, remaining 1, retry after 0s
	// 3 events: true
}

// Local is the single-key limiter for hot paths: one atomic word, no lock.
func ExampleLocal() {
	fc := clock.NewFake(time.Time{})
	x, err := ratelimit.NewLocal(ratelimit.Limit{Limit: 10, Period: time.Second, Burst: 2}, ratelimit.LocalOptions{Clock: fc})
	if err != nil {
		panic(err)
	}
	fmt.Println(x.Allow(), x.Allow(), x.Allow())
	fc.Advance(100 * time.Millisecond)
	fmt.Println(x.Allow())
	// Output:
	// true true false
	// true
}

// A Shaper spaces callers out instead of rejecting them: the first goes at
// once, the next waits its turn.
func ExampleShaper() {
	fc := clock.NewFake(time.Time{})
	s, err := ratelimit.NewShaper(ratelimit.ShaperOptions{
		Limit:    ratelimit.Limit{Limit: 5, Period: time.Second},
		MaxDelay: time.Second,
		Clock:    fc,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	fmt.Println(s.Wait(ctx))
	done := make(chan error)
	go func() { done <- s.Wait(ctx) }()
	_ = fc.BlockUntil(ctx, 1) // the second caller is queued
	fc.Advance(200 * time.Millisecond)
	fmt.Println(<-done, time.Duration(fc.Nanotime()))
	// Output:
	// <nil>
	// <nil> 200ms
}

// Sharded spreads a hot key over shards, so that most calls touch only
// their own shard's counter. A new limiter admits its whole burst at one
// instant; once the shards have run dry, a burst can be short by what they
// would hold (here 4 shards × 63 permits), never over the limit.
func ExampleSharded() {
	fc := clock.NewFake(time.Time{})
	x, err := ratelimit.NewSharded(ratelimit.Limit{Limit: 1000, Period: time.Second},
		ratelimit.ShardedOptions{Shards: 4, Clock: fc})
	if err != nil {
		panic(err)
	}
	burst := func() (n int) {
		for x.Allow() {
			n++
		}
		return n
	}
	fmt.Println(burst())
	fc.Advance(time.Second)
	fmt.Println(burst())
	fc.Advance(time.Millisecond)
	fmt.Println(burst())
	// Output:
	// 1000
	// 748
	// 1
}
