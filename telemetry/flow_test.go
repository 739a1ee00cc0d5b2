package telemetry_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/telemetry"
)

// TestLiveFlowState checks that a gather exports the state of a route's
// flow policies as Watch reads it: hedging, last good answers, priority
// classes and coalescing, each only for the routes that have it.
func TestLiveFlowState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(func() telemetry.Live {
		return telemetry.Live{Routes: []telemetry.RouteState{{Name: "plain"}, everyState.Routes[0]}}
	})
	want := `
# HELP sluice_coalesced_requests_total Requests a route's coalescing group saw, by route and role: leader (made the upstream call) or follower (joined one under way).
# TYPE sluice_coalesced_requests_total counter
sluice_coalesced_requests_total{role="follower",route="infer"} 30
sluice_coalesced_requests_total{role="leader",route="infer"} 10
# HELP sluice_hedge_budget_exhausted_total Hedges a route's hedge budget refused, by route.
# TYPE sluice_hedge_budget_exhausted_total counter
sluice_hedge_budget_exhausted_total{route="infer"} 2
# HELP sluice_hedge_wins_total Hedged requests that a hedge answered first, by route.
# TYPE sluice_hedge_wins_total counter
sluice_hedge_wins_total{route="infer"} 4
# HELP sluice_hedged_requests_total Requests a route ran hedged (those that may be sent twice), by route.
# TYPE sluice_hedged_requests_total counter
sluice_hedged_requests_total{route="infer"} 40
# HELP sluice_hedges_total Hedges a route sent: second attempts started because the first had not answered after the hedge delay, counted when they end, by route; a hedge due but not sent (its request cannot be sent twice, or the route's policies refused it) is not counted.
# TYPE sluice_hedges_total counter
sluice_hedges_total{route="infer"} 6
# HELP sluice_last_good_bytes Size in bytes of the answers a route's last-good fallback keeps now, as counted against its max_bytes.
# TYPE sluice_last_good_bytes gauge
sluice_last_good_bytes{route="infer"} 2048
# HELP sluice_last_good_entries Answers a route's last-good fallback keeps now.
# TYPE sluice_last_good_entries gauge
sluice_last_good_entries{route="infer"} 3
# HELP sluice_last_good_evictions_total Answers a route's last-good fallback dropped to make room for newer ones, by route.
# TYPE sluice_last_good_evictions_total counter
sluice_last_good_evictions_total{route="infer"} 7
# HELP sluice_priority_in_flight_requests Requests of a priority class that a route's adaptive concurrency limit admitted and that have not ended.
# TYPE sluice_priority_in_flight_requests gauge
sluice_priority_in_flight_requests{priority="best_effort",route="infer"} 0
sluice_priority_in_flight_requests{priority="critical",route="infer"} 2
# HELP sluice_priority_rejected_total Requests of a priority class that a route's adaptive concurrency limit shed, by route and class.
# TYPE sluice_priority_rejected_total counter
sluice_priority_rejected_total{priority="best_effort",route="infer"} 9
sluice_priority_rejected_total{priority="critical",route="infer"} 0
`
	names := []string{"sluice_coalesced_requests_total", "sluice_hedge_budget_exhausted_total", "sluice_hedge_wins_total",
		"sluice_hedged_requests_total", "sluice_hedges_total", "sluice_last_good_bytes", "sluice_last_good_entries",
		"sluice_last_good_evictions_total", "sluice_priority_in_flight_requests", "sluice_priority_rejected_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

// TestFallbackAnswers checks that a route's fallback answers are counted
// by level, a level's series made when it first answers, and that
// counting allocates nothing once it exists.
func TestFallbackAnswers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Route("infer")
	if n := testutil.CollectAndCount(reg, "sluice_fallback_answers_total"); n != 0 {
		t.Fatalf("%d series before any fallback, want none", n)
	}
	r.Fallback(telemetry.FallbackUpstream)
	r.Fallback(telemetry.FallbackStatic)
	r.Fallback(telemetry.FallbackStatic)
	if allocs := testing.AllocsPerRun(100, func() { r.Fallback(telemetry.FallbackLastGood) }); allocs != 0 {
		t.Errorf("Fallback allocates %v times a call", allocs)
	}
	want := `
# HELP sluice_fallback_answers_total Requests a route's fallback answered, by route and level (upstream, last_good, static).
# TYPE sluice_fallback_answers_total counter
sluice_fallback_answers_total{level="last_good",route="infer"} 101
sluice_fallback_answers_total{level="static",route="infer"} 2
sluice_fallback_answers_total{level="upstream",route="infer"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_fallback_answers_total"); err != nil {
		t.Fatal(err)
	}
}
