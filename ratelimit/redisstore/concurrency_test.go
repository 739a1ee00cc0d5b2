package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestConcurrentReplicasAdmitExactlyTheLimit runs several independent
// stores, each with its own client (as separate gateway replicas would),
// with many goroutines each, all on one key. The exact algorithms must admit
// exactly the limit within the period: never one more. The period is an
// hour, so that no quota comes back during the test (97 per hour refills a
// token every 37s, and makes the emission interval a fraction of a µs).
func TestConcurrentReplicasAdmitExactlyTheLimit(t *testing.T) {
	addr := redistest.Start(t)
	const (
		replicas   = 4
		goroutines = 16 // per replica: 64 callers in all
		attempts   = 30 // per goroutine: 1920 in all
		limit      = 97
	)
	stores := make([]*Store, replicas)
	for i := range stores {
		stores[i] = newStore(t, Options{Timeout: 10 * time.Second}, addr)
	}
	probe := newClient(t, addr)
	for _, a := range allAlgorithms {
		t.Run(string(a.alg), func(t *testing.T) {
			l := ratelimit.Limit{Algorithm: a.alg, Limit: limit, Period: time.Hour}
			key := "race-" + string(a.alg)
			before := redisNow(t, probe)
			var admitted, errs atomic.Int64
			var wg sync.WaitGroup
			for _, s := range stores {
				for range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range attempts {
							d, err := s.AllowN(context.Background(), key, l, 1)
							if err != nil {
								errs.Add(1)
								continue
							}
							if d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
			}
			waitGroup(t, &wg, time.Minute, "the callers")
			after := redisNow(t, probe)
			if n := errs.Load(); n > 0 {
				t.Fatalf("%d errors", n)
			}
			for _, s := range stores {
				if s.CircuitOpen() {
					t.Fatal("circuit opened")
				}
			}
			want := int64(limit)
			if crossed := before/int64(time.Hour/time.Microsecond) != after/int64(time.Hour/time.Microsecond); crossed &&
				(a.alg == ratelimit.FixedWindow || a.alg == ratelimit.SlidingWindow) {
				t.Skipf("the test crossed an hour boundary; %d admitted", admitted.Load())
			}
			if got := admitted.Load(); got != want {
				t.Errorf("admitted %d of %d attempts, want exactly %d", got, replicas*goroutines*attempts, want)
			}
		})
	}
}
