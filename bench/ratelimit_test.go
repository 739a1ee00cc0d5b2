package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkRateLimitAllow measures one local decision on one key that is
// always admitted (the rate is far above what the benchmark reaches), from
// every goroutine at once.
func BenchmarkRateLimitAllow(b *testing.B) {
	const perSecond = 1_000_000_000
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		b.Run("sluice-"+string(alg), func(b *testing.B) {
			l, err := ratelimit.NewLocal(ratelimit.Limit{Algorithm: alg, Limit: perSecond, Period: time.Second}, ratelimit.LocalOptions{})
			if err != nil {
				b.Fatal(err)
			}
			parallel(b, func() {
				if !l.Allow() {
					b.Fatal("rejected")
				}
			})
		})
	}
	b.Run("sluice-sharded", func(b *testing.B) {
		l, err := ratelimit.NewSharded(ratelimit.Limit{Limit: perSecond, Period: time.Second}, ratelimit.ShardedOptions{})
		if err != nil {
			b.Fatal(err)
		}
		parallel(b, func() {
			if !l.Allow() {
				b.Fatal("rejected")
			}
		})
	})
	b.Run("sluice-memory-store", func(b *testing.B) {
		m := ratelimit.NewMemory(ratelimit.MemoryOptions{})
		l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: perSecond, Period: time.Second}
		ctx := context.Background()
		parallel(b, func() {
			if d, err := m.AllowN(ctx, "key", l, 1); err != nil || !d.Allowed {
				b.Fatal("rejected", err)
			}
		})
	})
	b.Run("x-time-rate", func(b *testing.B) {
		l := rate.NewLimiter(perSecond, perSecond)
		parallel(b, func() {
			if !l.Allow() {
				b.Fatal("rejected")
			}
		})
	})
	b.Run("failsafe-go-bursty", func(b *testing.B) {
		l := ratelimiter.NewBursty[any](perSecond, time.Second)
		parallel(b, func() {
			if !l.TryAcquirePermit() {
				b.Fatal("rejected")
			}
		})
	})
	b.Run("failsafe-go-smooth", func(b *testing.B) {
		l := ratelimiter.NewSmooth[any](perSecond, time.Second)
		parallel(b, func() {
			if !l.TryAcquirePermit() {
				b.Fatal("rejected")
			}
		})
	})
	b.Run("uber", func(b *testing.B) {
		l := uber.New(perSecond, uber.WithoutSlack)
		parallel(b, func() { l.Take() })
	})
}

// BenchmarkRateLimitKeyed measures decisions spread at random over a million
// keys held in memory, and reports the memory each key costs.
func BenchmarkRateLimitKeyed(b *testing.B) {
	const numKeys = 1_000_000
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("user:", i)
	}
	b.Run("sluice", func(b *testing.B) {
		l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 1 << 30, Period: time.Hour}
		m := ratelimit.NewMemory(ratelimit.MemoryOptions{MaxKeys: -1})
		ctx := context.Background()
		before := heapInUse()
		for _, k := range keys {
			if _, err := m.AllowN(ctx, k, l, 1); err != nil {
				b.Fatal(err)
			}
		}
		perKey := float64(heapInUse()-before) / numKeys
		var seed atomic.Uint64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(seed.Add(1), 2))
			for pb.Next() {
				if _, err := m.AllowN(ctx, keys[rng.IntN(numKeys)], l, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(perKey, "bytes/key")
		runtime.KeepAlive(m)
	})
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
