package telemetry_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/telemetry"
)

// series returns the exposition lines of reg's sluice_ series (no
// comments), for tests that check which series exist.
func series(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		for _, m := range f.GetMetric() {
			b.WriteString(f.GetName())
			for _, l := range m.GetLabel() {
				b.WriteString(" " + l.GetName() + "=" + l.GetValue())
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestForgetRoute checks that a forgotten route loses every series of its
// events while another route keeps its own, that a request still in flight
// on the forgotten Route does not bring a series back, and that a Route
// made again for the name starts from zero.
func TestForgetRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	gone, kept := m.Route("gone"), m.Route("kept")
	for _, r := range []*telemetry.Route{gone, kept} {
		r.Request(200, "", time.Millisecond)
		r.Request(503, "circuit_open", time.Millisecond)
		r.RateLimit(true)
	}
	m.Request("gone", 404, "", time.Millisecond)
	m.BreakerTransition("gone", breaker.Open)
	m.BreakerTransition("kept", breaker.Open)

	gone.Forget()
	if s := series(t, reg); strings.Contains(s, "route=gone") || !strings.Contains(s, "route=kept") {
		t.Fatalf("after Forget:\n%s", s)
	}
	gone.Request(200, "", time.Millisecond) // in flight when the route went
	gone.Request(502, "upstream_error", time.Millisecond)
	if s := series(t, reg); strings.Contains(s, "route=gone") {
		t.Fatalf("a forgotten Route recorded again:\n%s", s)
	}

	again := m.Route("gone")
	again.Request(200, "", time.Millisecond)
	want := `
# HELP sluice_requests_total Requests served, by route, status code and outcome (ok, or the reason the request was not served by the upstream).
# TYPE sluice_requests_total counter
sluice_requests_total{code="200",outcome="ok",route="gone"} 1
sluice_requests_total{code="200",outcome="ok",route="kept"} 1
sluice_requests_total{code="503",outcome="circuit_open",route="kept"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_requests_total"); err != nil {
		t.Fatal(err)
	}
	// The uncached path of Metrics.Request starts afresh too.
	m.Request("gone", 404, "", time.Millisecond)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want+`sluice_requests_total{code="404",outcome="ok",route="gone"} 1
`), "sluice_requests_total"); err != nil {
		t.Fatal(err)
	}
}

// TestTargetSeries checks that a target's attempt series exist, at zero,
// as soon as its Target is made; that attempts are counted by class and
// timed; and that Forget deletes its series (transitions included) and
// stops it recording, while another target of the upstream keeps its own.
func TestTargetSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Target("models", "http://127.0.0.1:8001"), m.Target("models", "http://127.0.0.1:8002")
	want := `
# HELP sluice_target_requests_total Attempts sent to an upstream target, by upstream, target and class (success, failure, ignored).
# TYPE sluice_target_requests_total counter
sluice_target_requests_total{class="failure",target="http://127.0.0.1:8001",upstream="models"} 0
sluice_target_requests_total{class="failure",target="http://127.0.0.1:8002",upstream="models"} 0
sluice_target_requests_total{class="ignored",target="http://127.0.0.1:8001",upstream="models"} 0
sluice_target_requests_total{class="ignored",target="http://127.0.0.1:8002",upstream="models"} 0
sluice_target_requests_total{class="success",target="http://127.0.0.1:8001",upstream="models"} 0
sluice_target_requests_total{class="success",target="http://127.0.0.1:8002",upstream="models"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_target_requests_total"); err != nil {
		t.Fatal(err)
	}
	a.Attempt(sluice.Success, 20*time.Millisecond)
	a.Attempt(sluice.Failure, 2*time.Second)
	a.Attempt(sluice.Dropped, 0) // never reached the target
	b.Attempt(sluice.Ignored, time.Millisecond)
	a.BreakerTransition(breaker.Open)
	b.BreakerTransition(breaker.HalfOpen)
	want = `
# HELP sluice_target_requests_total Attempts sent to an upstream target, by upstream, target and class (success, failure, ignored).
# TYPE sluice_target_requests_total counter
sluice_target_requests_total{class="failure",target="http://127.0.0.1:8001",upstream="models"} 1
sluice_target_requests_total{class="failure",target="http://127.0.0.1:8002",upstream="models"} 0
sluice_target_requests_total{class="ignored",target="http://127.0.0.1:8001",upstream="models"} 0
sluice_target_requests_total{class="ignored",target="http://127.0.0.1:8002",upstream="models"} 1
sluice_target_requests_total{class="success",target="http://127.0.0.1:8001",upstream="models"} 1
sluice_target_requests_total{class="success",target="http://127.0.0.1:8002",upstream="models"} 0
# HELP sluice_target_breaker_transitions_total State changes of an upstream target's passive-health breaker, by upstream, target and new state.
# TYPE sluice_target_breaker_transitions_total counter
sluice_target_breaker_transitions_total{target="http://127.0.0.1:8001",to="open",upstream="models"} 1
sluice_target_breaker_transitions_total{target="http://127.0.0.1:8002",to="half-open",upstream="models"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_target_requests_total", "sluice_target_breaker_transitions_total"); err != nil {
		t.Fatal(err)
	}
	if s := series(t, reg); !strings.Contains(s, "sluice_target_request_duration_seconds target=http://127.0.0.1:8001 upstream=models") {
		t.Fatalf("no duration series:\n%s", s)
	}
	if got := testutil.CollectAndCount(reg, "sluice_target_request_duration_seconds"); got != 2 {
		t.Fatalf("%d duration series, want 2", got)
	}

	a.Forget()
	a.Attempt(sluice.Success, time.Millisecond)
	a.BreakerTransition(breaker.Closed)
	if s := series(t, reg); strings.Contains(s, "8001") || !strings.Contains(s, "8002") {
		t.Fatalf("after Forget:\n%s", s)
	}
}

// TestReloadGauges checks the last-reload gauges: the first configuration
// sets them, a refused reload clears the success flag and keeps the
// timestamp of the configuration still serving, an applied one sets both.
func TestReloadGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 500_000_000)
	gauges := func(ok int, at string, reloads string) string {
		return `
# HELP sluice_config_last_reload_success_timestamp_seconds Unix time at which the configuration serving now was applied.
# TYPE sluice_config_last_reload_success_timestamp_seconds gauge
sluice_config_last_reload_success_timestamp_seconds ` + at + `
# HELP sluice_config_last_reload_successful 1 when the last configuration loaded was applied, 0 when it was refused (the one before keeps serving).
# TYPE sluice_config_last_reload_successful gauge
sluice_config_last_reload_successful ` + string(rune('0'+ok)) + `
# HELP sluice_config_reloads_total Configuration reloads, by result (ok, error).
# TYPE sluice_config_reloads_total counter
` + reloads
	}
	names := []string{"sluice_config_last_reload_successful", "sluice_config_last_reload_success_timestamp_seconds", "sluice_config_reloads_total"}
	m.Configured(t0)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges(1, "1.7000000005e+09", "")), names...); err != nil {
		t.Fatal(err)
	}
	m.Reload(false, t0.Add(time.Minute))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges(0, "1.7000000005e+09",
		`sluice_config_reloads_total{result="error"} 1
`)), names...); err != nil {
		t.Fatal(err)
	}
	m.Reload(true, t0.Add(2*time.Minute))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges(1, "1.7000001205e+09",
		`sluice_config_reloads_total{result="error"} 1
sluice_config_reloads_total{result="ok"} 1
`)), names...); err != nil {
		t.Fatal(err)
	}
}
