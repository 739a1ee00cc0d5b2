package telemetry_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/telemetry"
)

// TestLiveState checks that a gather exports the state Watch reads, as it
// is at that gather: breaker states as state sets (route and target
// breakers under their own names and labels), gauges of requests in flight,
// queues, limits and health, and the retry policy's own counters; and that
// a route or target gone from the state has no series at the next gather.
func TestLiveState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"sluice_route_in_flight_requests", "sluice_breaker_state", "sluice_concurrency_limit",
		"sluice_concurrency_queued_requests", "sluice_retries_total", "sluice_retry_budget_exhausted_total",
		"sluice_target_healthy", "sluice_target_breaker_state", "sluice_target_in_flight_requests"}
	if n := testutil.CollectAndCount(reg, names...); n != 0 {
		t.Fatalf("%d series before Watch, want none", n)
	}
	var state atomic.Pointer[telemetry.Live]
	state.Store(&everyState)
	m.Watch(func() telemetry.Live { return *state.Load() })
	want := `
# HELP sluice_breaker_state State of a route's circuit breaker as a state set: 1 for its current state, 0 for the others.
# TYPE sluice_breaker_state gauge
sluice_breaker_state{route="infer",state="closed"} 0
sluice_breaker_state{route="infer",state="disabled"} 0
sluice_breaker_state{route="infer",state="forced-open"} 0
sluice_breaker_state{route="infer",state="half-open"} 1
sluice_breaker_state{route="infer",state="open"} 0
# HELP sluice_concurrency_limit Current limit of a route's concurrency policy: its max, or where its adaptive algorithm has moved it.
# TYPE sluice_concurrency_limit gauge
sluice_concurrency_limit{route="infer"} 8
# HELP sluice_concurrency_queued_requests Requests waiting in a route's concurrency queue now.
# TYPE sluice_concurrency_queued_requests gauge
sluice_concurrency_queued_requests{route="infer"} 2
# HELP sluice_retries_total Retries a route's retry policy started (attempts after the first), by route.
# TYPE sluice_retries_total counter
sluice_retries_total{route="infer"} 5
# HELP sluice_retry_budget_exhausted_total Retries a route's retry budget refused, by route.
# TYPE sluice_retry_budget_exhausted_total counter
sluice_retry_budget_exhausted_total{route="infer"} 1
# HELP sluice_route_in_flight_requests Requests a route is serving now, queued ones included, until their response has been sent (a body streaming from a target included).
# TYPE sluice_route_in_flight_requests gauge
sluice_route_in_flight_requests{route="infer"} 3
# HELP sluice_target_breaker_state State of an upstream target's passive-health breaker as a state set: 1 for its current state, 0 for the others.
# TYPE sluice_target_breaker_state gauge
sluice_target_breaker_state{state="closed",target="http://127.0.0.1:8080",upstream="models"} 0
sluice_target_breaker_state{state="disabled",target="http://127.0.0.1:8080",upstream="models"} 0
sluice_target_breaker_state{state="forced-open",target="http://127.0.0.1:8080",upstream="models"} 0
sluice_target_breaker_state{state="half-open",target="http://127.0.0.1:8080",upstream="models"} 0
sluice_target_breaker_state{state="open",target="http://127.0.0.1:8080",upstream="models"} 1
# HELP sluice_target_healthy 1 when an upstream target passes its active health check (or has none), else 0.
# TYPE sluice_target_healthy gauge
sluice_target_healthy{target="http://127.0.0.1:8080",upstream="models"} 1
# HELP sluice_target_in_flight_requests Attempts being sent to an upstream target now, and answers whose body streams from it now.
# TYPE sluice_target_in_flight_requests gauge
sluice_target_in_flight_requests{target="http://127.0.0.1:8080",upstream="models"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// The route loses its policies and gains a second; the target goes.
	state.Store(&telemetry.Live{Routes: []telemetry.RouteState{{Name: "infer"}, {Name: "chat", HasBreaker: true}}})
	want = `
# HELP sluice_breaker_state State of a route's circuit breaker as a state set: 1 for its current state, 0 for the others.
# TYPE sluice_breaker_state gauge
sluice_breaker_state{route="chat",state="closed"} 1
sluice_breaker_state{route="chat",state="disabled"} 0
sluice_breaker_state{route="chat",state="forced-open"} 0
sluice_breaker_state{route="chat",state="half-open"} 0
sluice_breaker_state{route="chat",state="open"} 0
# HELP sluice_route_in_flight_requests Requests a route is serving now, queued ones included, until their response has been sent (a body streaming from a target included).
# TYPE sluice_route_in_flight_requests gauge
sluice_route_in_flight_requests{route="chat"} 0
sluice_route_in_flight_requests{route="infer"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

// TestBreakerStateSetsCoverEveryState checks that the state sets have one
// series per breaker state, so that a new state cannot be left out.
func TestBreakerStateSetsCoverEveryState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(func() telemetry.Live { return everyState })
	seen := map[string]bool{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sluice_breaker_state" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "state" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	for s := breaker.Closed; s <= breaker.Disabled; s++ {
		if !seen[s.String()] {
			t.Errorf("no series for state %s", s)
		}
	}
	if len(seen) != int(breaker.Disabled)+1 {
		t.Errorf("states %v, want one per breaker state", seen)
	}
}
