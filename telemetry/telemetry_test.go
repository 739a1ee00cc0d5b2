package telemetry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/internal/buildinfo"
	"github.com/sluicehq/sluice/telemetry"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Route("infer")
	m.Request("infer", 200, "", 20*time.Millisecond)
	r.Request(200, "", 30*time.Millisecond)
	r.Request(429, "rate_limited", time.Millisecond)
	m.Request("", 404, "no_route", time.Millisecond)
	m.BreakerTransition("infer", breaker.Open)
	r.RateLimit(false)
	m.Reload(true, time.Now())
	want := `
# HELP sluice_requests_total Requests served, by route, status code and outcome (ok, or the reason the request was not served by the upstream).
# TYPE sluice_requests_total counter
sluice_requests_total{code="200",outcome="ok",route="infer"} 2
sluice_requests_total{code="404",outcome="no_route",route=""} 1
sluice_requests_total{code="429",outcome="rate_limited",route="infer"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "sluice_request_duration_seconds",
		"sluice_ratelimit_decisions_total", "sluice_config_reloads_total", "sluice_breaker_transitions_total"); n != 6 {
		t.Fatalf("got %d series, want 6", n) // two routes' durations, one route's two decisions
	}
	if _, err := telemetry.New(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}

// TestStoreEvictions checks that the evictions memory stores add to the
// counter StoreEvictions hands out are exported.
func TestStoreEvictions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.StoreEvictions().Add(3)
	want := `
# HELP sluice_ratelimit_store_evictions_total Keys a full in-memory rate-limit store forgot before they were idle (each starts afresh if it comes back).
# TYPE sluice_ratelimit_store_evictions_total counter
sluice_ratelimit_store_evictions_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_ratelimit_store_evictions_total"); err != nil {
		t.Fatal(err)
	}
}

// TestBuildInfo checks that New exports the running build's version and
// Go version as sluice_build_info, always 1.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := telemetry.New(reg); err != nil {
		t.Fatal(err)
	}
	b := buildinfo.Read()
	want := fmt.Sprintf(`
# HELP sluice_build_info Always 1; its labels are the running build's version and the Go version that built it.
# TYPE sluice_build_info gauge
sluice_build_info{goversion=%q,version=%q} 1
`, b.GoVersion, b.Version)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_build_info"); err != nil {
		t.Fatal(err)
	}
}

func TestNilMetricsDoNothing(t *testing.T) {
	var m *telemetry.Metrics
	m.Request("r", 200, "", time.Second)
	m.BreakerTransition("r", breaker.Open)
	m.Route("r").RateLimit(true)
	m.Route("r").Request(200, "", time.Second)
	m.Route("r").Forget()
	m.ForgetRoute("r")
	m.Target("u", "http://x").Attempt(sluice.Success, time.Second)
	m.Target("u", "http://x").BreakerTransition(breaker.Open)
	m.Target("u", "http://x").Forget()
	m.Reload(false, time.Now())
	m.Configured(time.Now())
	m.Watch(func() telemetry.Live { return telemetry.Live{} })
	if m.StoreEvictions() != nil {
		t.Fatal("a nil Metrics has an eviction counter")
	}
}

func BenchmarkRequest(b *testing.B) {
	m, _ := telemetry.New(prometheus.NewRegistry())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request("infer", 200, "", time.Millisecond)
		}
	})
}

func BenchmarkRouteRequest(b *testing.B) {
	m, _ := telemetry.New(prometheus.NewRegistry())
	r := m.Route("infer")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Request(200, "", time.Millisecond)
		}
	})
}

func BenchmarkTargetAttempt(b *testing.B) {
	m, _ := telemetry.New(prometheus.NewRegistry())
	t := m.Target("models", "http://127.0.0.1:8080")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t.Attempt(sluice.Success, time.Millisecond)
		}
	})
}
