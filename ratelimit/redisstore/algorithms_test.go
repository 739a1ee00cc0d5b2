package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// Real time passes on Redis's clock while these tests run (milliseconds);
// periods of an hour make that negligible, and the bounds below allow a
// minute for it. Time-based behaviour is tested by moving a key's state
// into the past (age), never by waiting.

// age moves the state of key d into the past, as if it had been written d
// earlier. For the window algorithms d must be a whole number of periods.
func age(t *testing.T, c rueidis.Client, alg ratelimit.Algorithm, key string, l ratelimit.Limit, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	us := float64(d) / float64(time.Microsecond)
	var err error
	switch alg {
	case ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.LeakyBucket:
		err = c.Do(ctx, c.B().Hincrbyfloat().Key(key).Field("ts").Increment(-us).Build()).Error()
	case ratelimit.FixedWindow, ratelimit.SlidingWindow:
		if d%l.Period != 0 {
			t.Fatalf("age %v: not a whole number of periods of %v", d, l.Period)
		}
		err = c.Do(ctx, c.B().Hincrby().Key(key).Field("w").Increment(-int64(d/l.Period)).Build()).Error()
	case ratelimit.SlidingLog:
		var members []string
		members, err = c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
		for _, m := range members {
			if err == nil {
				err = c.Do(ctx, c.B().Zincrby().Key(key).Increment(-us).Member(m).Build()).Error()
			}
		}
	}
	if err != nil {
		t.Fatalf("age %s %v: %v", key, d, err)
	}
}

// span is an inclusive range of durations.
type span struct{ lo, hi time.Duration }

func (s span) has(d time.Duration) bool { return s.lo <= d && d <= s.hi }

func TestDecisions(t *testing.T) {
	addr := redistest.Start(t)
	c := newClient(t, addr)
	s, err := New(c, live)
	if err != nil {
		t.Fatal(err)
	}
	const P = time.Hour
	slack := time.Minute
	// After 3 events of a limit of 3 per hour at one instant: how long until
	// one more is admitted (retry), and until the quota is full (reset).
	tests := []struct {
		alg          ratelimit.Algorithm
		suffix       string
		retry, reset span
	}{
		{ratelimit.TokenBucket, "tb", span{P/3 - slack, P / 3}, span{P - slack, P}},
		{ratelimit.GCRA, "gcra", span{P/3 - slack, P / 3}, span{P - slack, P}},
		{ratelimit.LeakyBucket, "lb", span{P/3 - slack, P / 3}, span{P - slack, P}},
		{ratelimit.FixedWindow, "fw", span{1, P}, span{1, P}},
		{ratelimit.SlidingLog, "log", span{P - slack, P}, span{P - slack, P}},
		// c=3, p=0 at elapsed e into the window: retry (2 − 2/3)·P − e,
		// reset 2P − e.
		{ratelimit.SlidingWindow, "sw", span{P / 3, 4 * P / 3}, span{P, 2 * P}},
	}
	for _, tc := range tests {
		t.Run(string(tc.alg), func(t *testing.T) {
			l := ratelimit.Limit{Algorithm: tc.alg, Limit: 3, Period: P}
			key := "decisions-" + string(tc.alg)
			rkey := redisKey(key, tc.suffix)

			steps := []struct {
				n         int
				allowed   bool
				remaining int
			}{
				{1, true, 2},
				{0, true, 2}, // a read consumes nothing
				{2, true, 0},
				{1, false, 0},
				{0, true, 0},
				{4, false, 0}, // more than the capacity: never
			}
			for i, st := range steps {
				d := allow(t, s, key, l, st.n)
				if d.Allowed != st.allowed || d.Remaining != st.remaining || d.Limit != 3 {
					t.Fatalf("step %d (n=%d): got %+v, want allowed=%v remaining=%d limit=3", i, st.n, d, st.allowed, st.remaining)
				}
				switch {
				case st.n == 4:
					if d.RetryAfter != ratelimit.RetryNever {
						t.Errorf("step %d: RetryAfter %v, want RetryNever", i, d.RetryAfter)
					}
				case !st.allowed:
					if !tc.retry.has(d.RetryAfter) {
						t.Errorf("step %d: RetryAfter %v, want in %v", i, d.RetryAfter, tc.retry)
					}
				case d.RetryAfter != 0:
					t.Errorf("step %d: allowed with RetryAfter %v", i, d.RetryAfter)
				}
				if i >= 2 && !tc.reset.has(d.ResetAfter) {
					t.Errorf("step %d: ResetAfter %v, want in %v", i, d.ResetAfter, tc.reset)
				}
			}

			// The key expires when the quota is full again.
			pttl, _ := strconv.Atoi(do(t, addr, "PTTL", rkey))
			if ttl := time.Duration(pttl) * time.Millisecond; !(span{tc.reset.lo - time.Millisecond, tc.reset.hi + time.Millisecond}).has(ttl) {
				t.Errorf("PTTL %v, want in %v", ttl, tc.reset)
			}

			// Two periods later the quota is full.
			age(t, c, tc.alg, rkey, l, 2*P)
			if d := allow(t, s, key, l, 3); !d.Allowed || d.Remaining != 0 {
				t.Errorf("after 2 periods: %+v, want all 3 allowed", d)
			}
		})
	}
}

// TestRejectedRequestsAreNotRecorded checks that a rejection writes no
// quota: the sliding log's set and the counters are unchanged by it.
func TestRejectedRequestsAreNotRecorded(t *testing.T) {
	addr := redistest.Start(t)
	s := newStore(t, live, addr)
	for _, a := range allAlgorithms {
		t.Run(string(a.alg), func(t *testing.T) {
			l := ratelimit.Limit{Algorithm: a.alg, Limit: 2, Period: time.Hour}
			key := "rejected-" + string(a.alg)
			allow(t, s, key, l, 2)
			before := do(t, addr, "DUMP", redisKey(key, a.suffix))
			for range 5 {
				if d := allow(t, s, key, l, 1); d.Allowed {
					t.Fatalf("over the limit: %+v", d)
				}
			}
			if after := do(t, addr, "DUMP", redisKey(key, a.suffix)); after != before {
				t.Errorf("rejections changed the key")
			}
		})
	}
}

func TestSlidingLogCountsEveryEvent(t *testing.T) {
	addr := redistest.Start(t)
	s := newStore(t, live, addr)
	l := ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Limit: 10, Period: time.Hour}
	allow(t, s, "log", l, 3) // three events in one call, one microsecond
	allow(t, s, "log", l, 1)
	if got := do(t, addr, "ZCARD", redisKey("log", "log")); got != "4" {
		t.Errorf("ZCARD = %s, want 4", got)
	}
}

// TestBucketsKeepFractions checks refill by fractions of a token, and that
// the token bucket stores the fraction.
func TestBucketsKeepFractions(t *testing.T) {
	addr := redistest.Start(t)
	c := newClient(t, addr)
	s, err := New(c, live)
	if err != nil {
		t.Fatal(err)
	}
	const T = 20 * time.Minute // Period/Limit
	for _, a := range allAlgorithms[:3] {
		t.Run(string(a.alg), func(t *testing.T) {
			l := ratelimit.Limit{Algorithm: a.alg, Limit: 3, Period: time.Hour}
			key := "fraction-" + string(a.alg)
			rkey := redisKey(key, a.suffix)
			allow(t, s, key, l, 3)
			age(t, c, a.alg, rkey, l, T/2)
			if d := allow(t, s, key, l, 1); d.Allowed || d.RetryAfter > T/2 || d.RetryAfter < T/2-time.Minute {
				t.Fatalf("after half an interval: %+v, want rejected, retry in about %v", d, T/2)
			}
			age(t, c, a.alg, rkey, l, T)
			if d := allow(t, s, key, l, 1); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("after 1.5 intervals: %+v, want allowed, 0 remaining", d)
			}
			if a.alg == ratelimit.TokenBucket {
				tk, err := strconv.ParseFloat(do(t, addr, "HGET", rkey, "tk"), 64)
				if err != nil || tk < 0.49 || tk > 0.51 {
					t.Errorf("stored tokens %v (%v), want about 0.5", tk, err)
				}
			}
		})
	}
}

// TestSameAsMemory makes the same requests of this store and of the
// in-memory store (whose clock stands still) and compares the decisions.
func TestSameAsMemory(t *testing.T) {
	addr := redistest.Start(t)
	s := newStore(t, live, addr)
	mem := ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: clock.NewFake(time.Time{})})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, a := range allAlgorithms {
		for _, burst := range []int{0, 8} {
			t.Run(fmt.Sprintf("%s/burst=%d", a.alg, burst), func(t *testing.T) {
				l := ratelimit.Limit{Algorithm: a.alg, Limit: 5, Period: time.Hour, Burst: burst}
				key := fmt.Sprintf("same-%s-%d", a.alg, burst)
				for i := range 30 {
					n := rng.IntN(5)
					got := allow(t, s, key, l, n)
					want := allow(t, mem, key, l, n)
					if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Limit != want.Limit ||
						(got.RetryAfter == ratelimit.RetryNever) != (want.RetryAfter == ratelimit.RetryNever) {
						t.Fatalf("request %d (n=%d): redis %+v, memory %+v", i, n, got, want)
					}
				}
			})
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	addr := redistest.Start(t)
	s := newStore(t, live, addr)
	ok := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 1, Period: time.Second}
	tests := []struct {
		name string
		l    ratelimit.Limit
		n    int
	}{
		{"unknown algorithm", ratelimit.Limit{Algorithm: "nope", Limit: 1, Period: time.Second}, 1},
		{"zero limit", ratelimit.Limit{Algorithm: ratelimit.GCRA, Period: time.Second}, 1},
		{"zero period", ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 1}, 1},
		{"negative burst", ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 1, Period: time.Second, Burst: -1}, 1},
		{"negative n", ok, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AllowN(context.Background(), "k", tc.l, tc.n)
			if !errors.Is(err, ratelimit.ErrInvalidLimit) {
				t.Errorf("err = %v, want ErrInvalidLimit", err)
			}
		})
	}
	if s.CircuitOpen() {
		t.Error("invalid requests opened the circuit")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	addr := redistest.Start(t)
	c := newClient(t, addr)
	tests := []struct {
		name   string
		client rueidis.Client
		opts   Options
	}{
		{"nil client", nil, Options{}},
		{"negative timeout", c, Options{Timeout: -1}},
		{"negative threshold", c, Options{FailureThreshold: -1}},
		{"negative open duration", c, Options{OpenDuration: -1}},
		{"local without fallback", c, Options{OnError: Local}},
		{"unknown mode", c, Options{OnError: 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.client, tc.opts); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("err = %v, want ErrInvalidOptions", err)
			}
		})
	}
	if _, err := Dial(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Dial(nil): err = %v, want ErrInvalidOptions", err)
	}
}

// TestSlidingWindowWeighsThePreviousWindow moves 8 events of the current
// window into the previous one and checks the estimate, 8·(1 − e/Period) for
// e into the current window, against Redis's clock read before and after.
func TestSlidingWindowWeighsThePreviousWindow(t *testing.T) {
	addr := redistest.Start(t)
	c := newClient(t, addr)
	s, err := New(c, live)
	if err != nil {
		t.Fatal(err)
	}
	const P = time.Hour
	const pus = int64(P / time.Microsecond)
	l := ratelimit.Limit{Algorithm: ratelimit.SlidingWindow, Limit: 10, Period: P}
	allow(t, s, "weighted", l, 8)
	age(t, c, l.Algorithm, redisKey("weighted", "sw"), l, P)

	// remaining(now) = 10 − ceil(8·(P − e)/P); it grows with now.
	remaining := func(now int64) int {
		e := now % pus
		return 10 - int((8*(pus-e)+pus-1)/pus)
	}
	// retry(now, n) = (1 − (10 − n)/8)·P − e, for n above the remaining.
	retry := func(now int64, n int) time.Duration {
		e := now % pus
		return time.Duration(float64(pus)*(1-float64(10-n)/8)-float64(e)) * time.Microsecond
	}
	before := redisNow(t, c)
	d := allow(t, s, "weighted", l, 0)
	after := redisNow(t, c)
	if d.Remaining < remaining(before) || d.Remaining > remaining(after) {
		t.Fatalf("remaining %d, want in [%d, %d]", d.Remaining, remaining(before), remaining(after))
	}
	if n := d.Remaining + 1; n <= 10 {
		before = redisNow(t, c)
		d = allow(t, s, "weighted", l, n)
		after = redisNow(t, c)
		if lo, hi := retry(after, n)-time.Microsecond, retry(before, n)+time.Microsecond; d.Allowed || d.RetryAfter < lo || d.RetryAfter > hi {
			t.Errorf("n=%d: %+v, want rejected with RetryAfter in [%v, %v]", n, d, lo, hi)
		}
	}
}

// TestConstructorsNameEveryBadOption needs no Redis: options are checked
// before any connection is made.
func TestConstructorsNameEveryBadOption(t *testing.T) {
	tests := []struct {
		name  string
		new   func() error
		names []string
	}{
		{"New", func() error {
			_, err := New(nil, Options{Timeout: -1, OnError: 9})
			return err
		}, []string{"client is nil", "Timeout is -1ns", "OnError ErrorPolicy(9)"}},
		{"Dial", func() error {
			_, err := Dial(nil, Options{FailureThreshold: -1, OnError: Local})
			return err
		}, []string{"no Redis address", "FailureThreshold is -1", "Fallback is nil"}},
		{"DialClient", func() error {
			_, err := DialClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}}, Options{OpenDuration: -1, Timeout: -1})
			return err
		}, []string{"OpenDuration is -1ns", "Timeout is -1ns"}},
		// A prefix with ':' would share keys with another prefix ("a"
		// with key "b:k" and "a:b" with key "k" are both {a:b:k}); one
		// with a brace would move the Cluster hash tag.
		{"Prefix", func() error {
			_, err := New(nil, Options{Prefix: "a:b"})
			return err
		}, []string{"client is nil", `Prefix "a:b" has ':', '{' or '}'`}},
		{"Prefix with braces", func() error {
			_, err := Dial(nil, Options{Prefix: "a}{"})
			return err
		}, []string{"no Redis address", `Prefix "a}{" has ':', '{' or '}'`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			invalidtest.Check(t, tt.new(), ErrInvalidOptions, tt.names...)
		})
	}
}
