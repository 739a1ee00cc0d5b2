package prom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/prom"
)

var errDown = errors.New("down")

// TestGuardAndPolicies runs calls through a real Guard (an observer, a
// retry, a breaker, an adaptive limiter) on a fake clock and gathers a
// real registry: calls by class, their latency as the caller saw it
// (retries included), rejections by policy and reason, the breaker's state
// set and transitions, the limiter's limit, retries and give-ups.
func TestGuardAndPolicies(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	reg := prometheus.NewRegistry()
	sink, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(sink).WithClock(clk)
	br, err := breaker.New(breaker.Options{Name: "db", Clock: clk, ConsecutiveFailures: 2, OpenDuration: time.Minute,
		OnStateChange: obs.Breaker("db")})
	if err != nil {
		t.Fatal(err)
	}
	alg, err := limit.NewAIMD(limit.AIMDOptions{InitialLimit: 10, MinLimit: 1, MaxLimit: 10, BackoffRatio: 0.5, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := concurrency.NewLimiter(concurrency.LimiterOptions{Name: "db", Algorithm: alg, Clock: clk,
		OnLimitChange: obs.Limit("db", alg.Limit())})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := retry.New(retry.Options{MaxAttempts: 2, Backoff: retry.Constant(0), NoBudget: true, Clock: clk,
		OnRetry: obs.Retry("db"), OnGiveUp: obs.GiveUp("db")})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(obs.Guard("db"), rt, br, lim).WithClock(clk)

	want := `
# HELP sluice_circuit_breaker_state State of a circuit breaker as a state set: 1 for its current state, 0 for the others.
# TYPE sluice_circuit_breaker_state gauge
sluice_circuit_breaker_state{breaker="db",state="closed"} 1
sluice_circuit_breaker_state{breaker="db",state="disabled"} 0
sluice_circuit_breaker_state{breaker="db",state="forced-open"} 0
sluice_circuit_breaker_state{breaker="db",state="half-open"} 0
sluice_circuit_breaker_state{breaker="db",state="open"} 0
# HELP sluice_concurrency_limiter_limit Current limit of an adaptive concurrency limiter, by limiter.
# TYPE sluice_concurrency_limiter_limit gauge
sluice_concurrency_limiter_limit{limiter="db"} 10
# HELP sluice_guard_calls_total Calls through a guard, by guard and class (success, failure, ignored, dropped).
# TYPE sluice_guard_calls_total counter
sluice_guard_calls_total{class="dropped",guard="db"} 0
sluice_guard_calls_total{class="failure",guard="db"} 0
sluice_guard_calls_total{class="ignored",guard="db"} 0
sluice_guard_calls_total{class="success",guard="db"} 0
`
	names := []string{"sluice_circuit_breaker_state", "sluice_concurrency_limiter_limit", "sluice_guard_calls_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatalf("before any call: %v", err)
	}

	ctx := context.Background()
	call := func(d time.Duration, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			clk.Advance(d)
			return "v", err
		}
	}
	if _, err := sluice.Do(ctx, g, call(30*time.Millisecond, nil)); err != nil {
		t.Fatal(err)
	}
	// Both attempts fail, slower than the limiter's timeout: the breaker
	// opens on the second, the retry gives up; the limit halves twice (10,
	// 5, 2); the call took 2 × 200ms.
	if _, err := sluice.Do(ctx, g, call(200*time.Millisecond, errDown)); !errors.Is(err, errDown) {
		t.Fatalf("failing call: %v", err)
	}
	// The open breaker rejects the next call; its Retry-After (a minute)
	// is longer than the retry waits for.
	if _, err := sluice.Do(ctx, g, call(time.Millisecond, nil)); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("call through an open breaker: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	clk.Advance(time.Minute) // half-open: one probe, which the caller cancels
	if _, err := sluice.Do(cancelled, g, func(ctx context.Context) (string, error) { return "", ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}

	want = `
# HELP sluice_guard_calls_total Calls through a guard, by guard and class (success, failure, ignored, dropped).
# TYPE sluice_guard_calls_total counter
sluice_guard_calls_total{class="dropped",guard="db"} 1
sluice_guard_calls_total{class="failure",guard="db"} 1
sluice_guard_calls_total{class="ignored",guard="db"} 1
sluice_guard_calls_total{class="success",guard="db"} 1
# HELP sluice_guard_rejections_total Calls through a guard that a policy rejected, by guard, policy name and reason.
# TYPE sluice_guard_rejections_total counter
sluice_guard_rejections_total{guard="db",policy="db",reason="circuit_open"} 1
# HELP sluice_circuit_breaker_transitions_total State changes of a circuit breaker, by breaker and new state.
# TYPE sluice_circuit_breaker_transitions_total counter
sluice_circuit_breaker_transitions_total{breaker="db",to="half-open"} 1
sluice_circuit_breaker_transitions_total{breaker="db",to="open"} 1
# HELP sluice_circuit_breaker_state State of a circuit breaker as a state set: 1 for its current state, 0 for the others.
# TYPE sluice_circuit_breaker_state gauge
sluice_circuit_breaker_state{breaker="db",state="closed"} 0
sluice_circuit_breaker_state{breaker="db",state="disabled"} 0
sluice_circuit_breaker_state{breaker="db",state="forced-open"} 0
sluice_circuit_breaker_state{breaker="db",state="half-open"} 1
sluice_circuit_breaker_state{breaker="db",state="open"} 0
# HELP sluice_concurrency_limiter_limit Current limit of an adaptive concurrency limiter, by limiter.
# TYPE sluice_concurrency_limiter_limit gauge
sluice_concurrency_limiter_limit{limiter="db"} 2
# HELP sluice_retry_retries_total Retries a retry policy started, by policy.
# TYPE sluice_retry_retries_total counter
sluice_retry_retries_total{policy="db"} 1
# HELP sluice_retry_giveups_total Results a retry policy returned instead of retrying them, by policy and reason.
# TYPE sluice_retry_giveups_total counter
sluice_retry_giveups_total{policy="db",reason="attempts_exhausted"} 1
sluice_retry_giveups_total{policy="db",reason="retry_after_too_long"} 1
`
	names = append(names, "sluice_guard_rejections_total", "sluice_circuit_breaker_transitions_total", "sluice_retry_retries_total", "sluice_retry_giveups_total")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Latency as the caller saw it: 30ms, and 400ms for the call retried;
	// the cancelled one took no time; the dropped one is not observed.
	h := histogram(t, reg, "sluice_guard_call_duration_seconds")
	if h.GetSampleCount() != 3 || h.GetSampleSum() < 0.429 || h.GetSampleSum() > 0.431 {
		t.Errorf("duration: %d samples summing to %gs, want 3 summing to 0.43s", h.GetSampleCount(), h.GetSampleSum())
	}

	if _, err := prom.New(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
