package redisstore

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// callers is how many goroutines call AllowN at once in the benchmarks.
const callers = 64

// benchAddr is REDIS_ADDR from the environment, or a server started for b.
func benchAddr(b *testing.B) string {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	return redistest.Start(b)
}

// BenchmarkAllowN measures decisions in Redis with 64 concurrent callers
// spread over 1024 keys, for each algorithm (run with -cpu 2).
func BenchmarkAllowN(b *testing.B) {
	addr := benchAddr(b)
	s := newStore(b, Options{Prefix: "sluice-bench"}, addr)
	for _, a := range allAlgorithms {
		b.Run(string(a.alg), func(b *testing.B) {
			l := ratelimit.Limit{Algorithm: a.alg, Limit: 1000, Period: time.Second}
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = "bench-" + strconv.Itoa(i)
			}
			var next atomic.Uint64
			var errs atomic.Int64
			b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := s.AllowN(ctx, keys[next.Add(1)%uint64(len(keys))], l, 1); err != nil {
						errs.Add(1)
					}
				}
			})
			if n := errs.Load(); n > 0 {
				b.Fatalf("%d errors", n)
			}
		})
	}
}

// BenchmarkAllowNCircuitOpen measures a decision while Redis is down and
// the circuit is open (FailOpen): what an outage costs per request.
func BenchmarkAllowNCircuitOpen(b *testing.B) {
	srv := redistest.StartServer(b)
	s := newStore(b, Options{Clock: clock.NewFake(time.Time{}), FailureThreshold: 1}, srv.Addr)
	srv.Stop()
	l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 10, Period: time.Second}
	for !s.CircuitOpen() {
		if _, err := s.AllowN(context.Background(), "k", l, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if d, _ := s.AllowN(ctx, "k", l, 1); !d.Allowed {
				b.Error("fail open rejected")
				return
			}
		}
	})
}
