package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// allAlgorithms lists every algorithm with the suffix of its key.
var allAlgorithms = []struct {
	alg    ratelimit.Algorithm
	suffix string
}{
	{ratelimit.TokenBucket, "tb"},
	{ratelimit.GCRA, "gcra"},
	{ratelimit.LeakyBucket, "lb"},
	{ratelimit.FixedWindow, "fw"},
	{ratelimit.SlidingLog, "log"},
	{ratelimit.SlidingWindow, "sw"},
}

// live is the Options of a test in which Redis must decide every call, on
// the real clock: with the default Timeout (50ms) a loaded machine can make
// a call run out, and the call is then decided as OnError says instead.
var live = Options{Timeout: 10 * time.Second}

// waitLimit bounds each wait of a test for an answer from another
// goroutine (a decision, an error reported to OnRedisError): one that does
// not come fails the test, saying what it waited for, instead of hanging
// it until the test binary's timeout.
const waitLimit = 10 * time.Second

// receive returns the next value sent on c, and fails the test when none
// comes within waitLimit; what says what the value is.
func receive[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, waitLimit)
		var zero T
		return zero
	}
}

// waitGroup waits for wg, and fails the test when it is not done within
// limit; what says what wg waits for.
func waitGroup(t testing.TB, wg *sync.WaitGroup, limit time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s: not done within %v", what, limit)
	}
}

// newClient returns a rueidis client for addrs, closed when the test ends.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// newStore returns a Store on addrs with its own client.
func newStore(t testing.TB, opts Options, addrs ...string) *Store {
	t.Helper()
	s, err := New(newClient(t, addrs...), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// allow calls s.AllowN and fails the test on an error.
func allow(t testing.TB, s ratelimit.Store, key string, l ratelimit.Limit, n int) ratelimit.Decision {
	t.Helper()
	d, err := s.AllowN(context.Background(), key, l, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %+v, %d): %v", key, l, n, err)
	}
	return d
}

// redisKey is the Redis key of key for an algorithm's suffix under the
// default prefix.
func redisKey(key, suffix string) string { return "{" + DefaultPrefix + ":" + key + "}:" + suffix }

// do runs a command on addr and fails the test on an error.
func do(t testing.TB, addr string, args ...string) string {
	t.Helper()
	r, err := redistest.Do(addr, args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return r
}

// redisNow returns Redis's clock on addr in microseconds.
func redisNow(t testing.TB, c rueidis.Client) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v %v", v, err)
	}
	sec, _ := strconv.ParseInt(v[0], 10, 64)
	usec, _ := strconv.ParseInt(v[1], 10, 64)
	return sec*1e6 + usec
}

// countingStore is a ratelimit.Store that admits everything and counts its
// calls: the Local fallback in tests.
// It answers Remaining 7, so that its decisions can be told apart.
type countingStore struct{ calls atomic.Int64 }

func (c *countingStore) AllowN(_ context.Context, _ string, l ratelimit.Limit, n int) (ratelimit.Decision, error) {
	c.calls.Add(1)
	return ratelimit.Decision{Allowed: true, Limit: l.Capacity(), Remaining: 7}, nil
}
