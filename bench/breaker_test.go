package bench

import (
	"context"
	"runtime"
	"testing"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency"
)

// BenchmarkBreaker measures the success path of a closed circuit breaker:
// take a permit, record a success. Each library is used through its
// permit-style API (gobreaker: TwoStepCircuitBreaker, the cheaper of its
// two forms).
func BenchmarkBreaker(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		br, err := breaker.New(breaker.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		ok := sluice.Outcome{Class: sluice.Success}
		parallel(b, func() {
			p, err := br.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(ok)
		})
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{})
		parallel(b, func() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		cb := circuitbreaker.NewWithDefaults[any]()
		parallel(b, func() {
			if !cb.TryAcquirePermit() {
				b.Fatal("rejected")
			}
			cb.RecordSuccess()
		})
	})
}

// BenchmarkBulkhead measures a bulkhead that is never full: take a slot,
// give it back.
func BenchmarkBulkhead(b *testing.B) {
	const slots = 1 << 20
	b.Run("sluice", func(b *testing.B) {
		bh, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: slots})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		ok := sluice.Outcome{Class: sluice.Success}
		parallel(b, func() {
			p, err := bh.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(ok)
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		bh := bulkhead.New[any](slots)
		parallel(b, func() {
			if !bh.TryAcquirePermit() {
				b.Fatal("rejected")
			}
			bh.ReleasePermit()
		})
	})
}

// parallel runs op from GOMAXPROCS goroutines and reports allocations.
func parallel(b *testing.B, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op()
		}
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
