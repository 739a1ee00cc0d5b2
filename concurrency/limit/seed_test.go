package limit_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/concurrency/limit"
)

// seedScenario runs the third seed design's scenario, literally, through a
// Guard of one concurrency.Limiter on a fake clock: a limit of 10 (min 2, max 100); five
// concurrent calls, four answering in 50 ms and the fifth in 500 ms; then
// six concurrent calls of 500 ms. It returns the limit after each call.
func seedScenario(t *testing.T, alg limit.Algorithm) []int {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	l, err := concurrency.NewLimiter(concurrency.LimiterOptions{Algorithm: alg, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(l).WithClock(fc)
	ctx := context.Background()
	begin := func(n int) []sluice.Admission {
		as := make([]sluice.Admission, n)
		for i := range as {
			if as[i], err = g.Begin(ctx); err != nil {
				t.Fatalf("call %d of %d: %v", i+1, n, err)
			}
		}
		return as
	}
	var limits []int
	end := func(as []sluice.Admission) {
		for i := range as {
			as[i].End(ctx, nil)
			limits = append(limits, l.Limit())
		}
	}
	first := begin(5)
	fc.Advance(50 * time.Millisecond)
	end(first[:4])
	fc.Advance(450 * time.Millisecond)
	end(first[4:])
	second := begin(6)
	fc.Advance(500 * time.Millisecond)
	end(second)
	return limits
}

// TestLatencyGradient_SeedScenarioLiterally is the seed's own scenario: the
// latency rises tenfold within a dozen calls, and the limit must fall below
// 10 within them. (The no-load latency's warm-up, a plain mean, used to
// absorb the step, and the limit stayed at 10.)
func TestLatencyGradient_SeedScenarioLiterally(t *testing.T) {
	g, err := limit.NewLatencyGradient(limit.LatencyGradientOptions{InitialLimit: 10, MinLimit: 2, MaxLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	limits := seedScenario(t, g)
	t.Logf("limit after each call: %v", limits)
	if got := limits[len(limits)-1]; got >= 10 {
		t.Fatalf("limit %d after the seed's calls, want below 10 (after each call: %v)", got, limits)
	}
}
