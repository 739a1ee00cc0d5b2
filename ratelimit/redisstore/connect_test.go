package redisstore

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestDialWhileRedisDown: Dial to a Redis that is down returns a Store that
// decides as OnError says, opens its circuit as for any outage, connects
// by itself once Redis is up (probed after OpenDuration), then lets Redis
// decide; Close closes the connection it made.
func TestDialWhileRedisDown(t *testing.T) {
	const openFor = time.Second
	srv := redistest.StartServer(t)
	srv.Stop()
	fake := clock.NewFake(time.Time{})
	var mu sync.Mutex
	var redisErrs []error
	s, err := Dial([]string{srv.Addr}, Options{
		OnError:          FailClosed,
		Clock:            fake,
		FailureThreshold: 2,
		OpenDuration:     openFor,
		OnRedisError: func(err error) {
			mu.Lock()
			redisErrs = append(redisErrs, err)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("Dial with Redis down: %v", err)
	}
	defer s.Close()
	l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 3, Period: time.Hour}
	for i := range 3 {
		if d := allow(t, s, "k", l, 1); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > openFor {
			t.Fatalf("decision %d with Redis down: %+v, want rejected (fail closed)", i, d)
		}
	}
	if !s.CircuitOpen() {
		t.Error("circuit not open after FailureThreshold calls to an unreachable Redis")
	}
	mu.Lock()
	if len(redisErrs) != 2 || !strings.Contains(redisErrs[0].Error(), "not connected") {
		t.Errorf("OnRedisError got %v, want 2 errors saying the store is not connected", redisErrs)
	}
	mu.Unlock()

	srv.Restart()
	// Each probe starts a connection attempt if none is under way, and
	// fails at once until one has succeeded.
	deadline := time.Now().Add(10 * time.Second)
	for s.CircuitOpen() {
		if time.Now().After(deadline) {
			t.Fatal("the store did not connect to Redis within 10s of its restart")
		}
		fake.Advance(openFor)
		allow(t, s, "probe", l, 1)
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 4 {
		d := allow(t, s, "k", l, 1)
		if d.Allowed != (i < 3) || !d.Allowed && d.RetryAfter <= openFor {
			t.Errorf("decision %d after connecting: %+v, want Redis's (3 allowed, then a retry after about 20 minutes)", i, d)
		}
	}

	s.Close()
	for i := 0; connectedClients(t, srv) > 1; i++ {
		if i == 500 {
			t.Fatalf("%d connections to Redis after Close", connectedClients(t, srv)-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDialRefusedByRedis: a Redis that answers but refuses the connection
// (a wrong password) is a configuration error, not an outage: DialClient
// fails.
func TestDialRefusedByRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	do(t, srv.Addr, "CONFIG", "SET", "requirepass", "secret")
	s, err := DialClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, Password: "wrong"}, Options{})
	if err == nil {
		s.Close()
		t.Fatal("DialClient with a wrong password succeeded")
	}
}
