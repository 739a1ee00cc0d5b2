package concurrency

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
)

// The benchmarks measure the hot path, a call admitted below the limit and
// released with no one waiting, with b.RunParallel; run them with -cpu 1,2.
// On the project's machines failsafe-go's bulkhead takes 78 ns/op at -cpu 2.

func BenchmarkBulkhead(b *testing.B) {
	bh, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1 << 20, MaxQueue: 8})
	benchmarkAdmitter(b, context.Background(), bh)
}

// BenchmarkLimiter uses a fixed algorithm, so that it measures the limiter
// and not the algorithm.
func BenchmarkLimiter(b *testing.B) {
	l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(1 << 19), MaxQueue: 8})
	benchmarkAdmitter(b, context.Background(), l)
}

func BenchmarkLimiterPriorities(b *testing.B) {
	l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(1 << 19), Priorities: shares})
	benchmarkAdmitter(b, WithPriority(context.Background(), Normal), l)
}

// BenchmarkGuardBulkheadLimiter runs sluice.Do through a Guard of both.
func BenchmarkGuardBulkheadLimiter(b *testing.B) {
	bh, _ := NewBulkhead(BulkheadOptions{MaxConcurrent: 1 << 20})
	l, _ := NewLimiter(LimiterOptions{Algorithm: fixedLimit(1 << 19)})
	g := sluice.New(l, bh)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sluice.Do(ctx, g, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchmarkAdmitter(b *testing.B, ctx context.Context, a sluice.Admitter) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := a.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Done(success)
		}
	})
}
