package limit

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSample measures one Sample per call from parallel goroutines,
// the hot path of a Limiter's Release.
func BenchmarkSample(b *testing.B) {
	for _, tc := range algorithms {
		b.Run(tc.name, func(b *testing.B) {
			a := mustNew(b, tc.new, 0, 0)
			var clock atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					now := clock.Add(int64(50 * time.Microsecond))
					a.Sample(now, time.Duration(9+i%3)*time.Millisecond, a.Limit(), i%1000 == 0)
				}
			})
		})
	}
}

// BenchmarkLimit measures reading the limit, the hot path of Acquire.
func BenchmarkLimit(b *testing.B) {
	a := mustNew(b, algorithms[len(algorithms)-1].new, 0, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = a.Limit()
		}
	})
}
