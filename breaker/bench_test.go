package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkSuccess is the hot path: Acquire and Done(Success) on a closed
// breaker with the default count window.
func BenchmarkSuccess(b *testing.B) {
	br, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	ok := sluice.Outcome{Class: sluice.Success, Latency: time.Millisecond}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Done(ok)
		}
	})
}

// BenchmarkMixed records one failure in ten (below the failure rate), so
// that slots and the aggregate change on every lap of the ring.
func BenchmarkMixed(b *testing.B) {
	br, err := New(Options{ConsecutiveFailures: 50, FailureRate: 0.5, SlowCallRate: 0.9, SlowCallThreshold: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p, err := br.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			o := sluice.Outcome{Class: sluice.Success}
			if i++; i%10 == 0 {
				o.Class = sluice.Failure
			}
			p.Done(o)
		}
	})
}

// BenchmarkTimeWindow is the hot path with a time window on the real clock.
func BenchmarkTimeWindow(b *testing.B) {
	br, err := New(Options{TimeWindow: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ok := sluice.Outcome{Class: sluice.Success}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Done(ok)
		}
	})
}

// BenchmarkOpen is the rejection path of an open breaker.
func BenchmarkOpen(b *testing.B) {
	br, err := New(Options{OpenDuration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	br.Open()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := br.Acquire(ctx); err == nil {
				b.Error("admitted while open")
				return
			}
		}
	})
}

// BenchmarkSetGet looks up an existing breaker of a Set.
func BenchmarkSetGet(b *testing.B) {
	s, err := NewSet(Options{})
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"infer", "embed", "rerank", "moderate"}
	for _, n := range names {
		s.Get(n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if s.Get(names[i&3]) == nil {
				b.Error("nil breaker")
				return
			}
			i++
		}
	})
}

// BenchmarkGuardDo runs a successful call through a Guard holding only the
// breaker, as sluice.Do would in production.
func BenchmarkGuardDo(b *testing.B) {
	br, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	g := sluice.New(br)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sluice.Do(ctx, g, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
