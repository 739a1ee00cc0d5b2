package bench

import (
	"context"
	"testing"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	gclcore "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gcllimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/concurrency/limit"
)

// BenchmarkAdaptive measures an adaptive concurrency limit's hot path:
// acquire a permit, record a successful call. The calls take no time and
// the limit is never reached, so what is measured is the bookkeeping,
// including each library's latency measurement and its algorithm's update.
func BenchmarkAdaptive(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		alg, err := limit.NewDefault(limit.DefaultOptions{InitialLimit: 1000, MinLimit: 1000, MaxLimit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		l, err := concurrency.NewLimiter(concurrency.LimiterOptions{Algorithm: alg})
		if err != nil {
			b.Fatal(err)
		}
		g := sluice.New(l)
		ctx := context.Background()
		call := func(context.Context) (struct{}, error) { return struct{}{}, nil }
		parallel(b, func() {
			if _, err := sluice.Do(ctx, g, call); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		l := adaptivelimiter.NewBuilder[any]().WithLimits(1000, 1000, 1000).Build()
		parallel(b, func() {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Fatal("rejected")
			}
			p.Record()
		})
	})
	b.Run("go-concurrency-limits", func(b *testing.B) {
		// Gradient2, its best algorithm, with the library's default window
		// settings (1 s windows, 100 samples, 100 µs minimum RTT).
		lim := gcllimit.NewDefaultGradient2Limit("bench", gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
		l, err := gcllimiter.NewDefaultLimiter(lim, 1e9, 1e9, 1e5, 100, gclstrategy.NewSimpleStrategy(1000), gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		parallel(b, func() {
			t, ok := l.Acquire(ctx)
			if !ok {
				b.Fatal("rejected")
			}
			t.OnSuccess()
		})
	})
}
