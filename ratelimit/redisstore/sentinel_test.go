package redisstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// recoverLimit bounds the wait for the store to decide by Redis again after
// a failover: a safety net, never a measured delay.
const recoverLimit = 15 * time.Second

// dialSentinel returns a Store that reaches the master through the
// sentinels at addrs, fails closed (so that an admission can only come
// from Redis) and is closed when the test ends. The generous Timeout keeps
// a slow machine from turning an answer into a failure.
func dialSentinel(t *testing.T, addrs []string, onRedisError func(error)) *Store {
	t.Helper()
	s, err := DialClient(rueidis.ClientOption{
		InitAddress: addrs,
		Sentinel:    rueidis.SentinelOption{MasterSet: redistest.MasterName},
	}, Options{OnError: FailClosed, Timeout: 5 * time.Second, OnRedisError: onRedisError})
	if err != nil {
		t.Fatalf("DialClient through sentinels %v: %v", addrs, err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestSentinel reaches the master through three sentinels and checks that
// every algorithm admits exactly 10 of 30 requests under a limit of 10 per
// hour, with no call to Redis failing, and that the state is in the master
// Sentinel names.
func TestSentinel(t *testing.T) {
	d := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 3})
	s := dialSentinel(t, d.Addrs(), func(err error) { t.Errorf("Redis error: %v", err) })
	l := ratelimit.Limit{Limit: 10, Period: time.Hour}
	for _, a := range allAlgorithms {
		l.Algorithm = a.alg
		admitted := 0
		for i := range 30 {
			dec := allow(t, s, "user", l, 1)
			if dec.Allowed {
				admitted++
			}
			if want := i < 10; dec.Allowed != want {
				t.Errorf("%s request %d: %+v, want allowed=%v", a.alg, i, dec, want)
			}
		}
		if admitted != 10 {
			t.Errorf("%s admitted %d of 30, want 10", a.alg, admitted)
		}
		if got := do(t, d.Master().Addr, "EXISTS", redisKey("user", a.suffix)); got != "1" {
			t.Errorf("%s: key %s not in the master %s", a.alg, redisKey("user", a.suffix), d.Master().Addr)
		}
	}
}

// TestSentinelFailover fails the master over to its replica while a worker
// keeps making decisions, and checks that the store decides by Redis again
// within recoverLimit, on the new master, with the state the old one had:
// keys half used before the failover admit exactly their other half after.
//
// The client's sentinel is not the one that runs the failover: it learns
// of the new master from the others (hello messages) and tells the client
// (+switch-master). The decisions made during the switch may fail (and are
// then rejected, the store failing closed) or be lost: the old master keeps
// answering as a master until Sentinel turns it into a replica. So the
// exact checks use keys untouched during the switch.
func TestSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t, redistest.SentinelOptions{Sentinels: 3, Replicas: 1})
	addrs := d.Addrs()
	// The client asks the sentinels in order; the first fails over.
	clientAddrs := append(slices.Clone(addrs[1:]), addrs[0])
	var redisErrors atomic.Int64
	s := dialSentinel(t, clientAddrs, func(error) { redisErrors.Add(1) })
	l := ratelimit.Limit{Limit: 10, Period: time.Hour}
	for _, a := range allAlgorithms {
		l.Algorithm = a.alg
		for i := range 5 {
			if dec := allow(t, s, "before", l, 1); !dec.Allowed || dec.Remaining != 9-i {
				t.Fatalf("%s request %d before the failover: %+v", a.alg, i, dec)
			}
		}
	}
	if n := redisErrors.Load(); n != 0 {
		t.Fatalf("%d Redis errors before the failover", n)
	}

	// A worker makes decisions on its own key throughout the failover.
	stop := make(chan struct{})
	var (
		wg              sync.WaitGroup
		during, allowed atomic.Int64
		workerErr       atomic.Value
	)
	wg.Go(func() {
		big := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 1 << 30, Period: time.Hour}
		for {
			select {
			case <-stop:
				return
			default:
			}
			dec, err := s.AllowN(context.Background(), "during", big, 1)
			if err != nil {
				workerErr.Store(err)
				return
			}
			during.Add(1)
			if dec.Allowed {
				allowed.Add(1)
			}
		}
	})
	old := d.Master()
	promoted := d.Failover()
	close(stop)
	waitGroup(t, &wg, waitLimit, "the worker's last decision") // one call, bounded by Timeout
	if err := workerErr.Load(); err != nil {
		t.Fatalf("AllowN during the failover: %v", err)
	}
	t.Logf("failover %s -> %s: %d decisions during it, %d admitted; %d Redis errors",
		old.Addr, promoted.Addr, during.Load(), allowed.Load(), redisErrors.Load())

	// Recovered: an admission (which only Redis gives) on a fresh key, and
	// it is in the new master.
	probe := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: 1 << 30, Period: time.Hour}
	deadline := time.Now().Add(recoverLimit)
	for !allow(t, s, "probe", probe, 1).Allowed {
		if time.Now().After(deadline) {
			t.Fatalf("no decision by Redis %v after the failover (%d Redis errors, circuit open: %v)",
				recoverLimit, redisErrors.Load(), s.CircuitOpen())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := do(t, promoted.Addr, "EXISTS", redisKey("probe", "fw")); got != "1" {
		t.Errorf("the probe's key is not in the new master %s", promoted.Addr)
	}

	// The keys half used before the failover admit exactly their other half.
	failed := redisErrors.Load()
	for _, a := range allAlgorithms {
		l.Algorithm = a.alg
		for i := range 10 {
			dec := allow(t, s, "before", l, 1)
			if want := i < 5; dec.Allowed != want {
				t.Errorf("%s request %d after the failover: %+v, want allowed=%v", a.alg, i, dec, want)
			}
		}
	}
	if n := redisErrors.Load() - failed; n != 0 {
		t.Errorf("%d Redis errors after the store recovered", n)
	}
}
