package otelmetric_test

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/otelmetric"
)

// points returns the data points of every int64 sum and gauge collected by
// r, as "instrument{k=v,...} value" lines, sorted, and the histograms by
// instrument name.
func points(t *testing.T, r sdkmetric.Reader) ([]string, map[string]metricdata.HistogramDataPoint[float64]) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	hists := map[string]metricdata.HistogramDataPoint[float64]{}
	line := func(name string, set attribute.Set, v int64) {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.AsString())
		}
		lines = append(lines, name+"{"+strings.Join(kv, ",")+"} "+strconv.FormatInt(v, 10))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s: a counter that is not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					line(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					line(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				if len(d.DataPoints) != 1 {
					t.Fatalf("%s: %d points, want 1", m.Name, len(d.DataPoints))
				}
				hists[m.Name] = d.DataPoints[0]
				if m.Unit != "s" {
					t.Errorf("%s: unit %q, want s", m.Name, m.Unit)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	sort.Strings(lines)
	return lines, hists
}

// TestGuardAndPolicies runs calls through a real Guard (an observer, a
// retry, a breaker) on a fake clock and collects them with the OTel SDK's
// manual reader: calls by class, their latency as the caller saw it,
// rejections by policy and reason, the breaker's state set and
// transitions, a limiter's limit, retries and give-ups.
func TestGuardAndPolicies(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	sink, err := otelmetric.New(provider.Meter("sluice-test"))
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(sink).WithClock(clk)
	br, err := breaker.New(breaker.Options{Name: "db", Clock: clk, ConsecutiveFailures: 2, OpenDuration: time.Minute,
		OnStateChange: obs.Breaker("db")})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := retry.New(retry.Options{MaxAttempts: 2, Backoff: retry.Constant(0), NoBudget: true, Clock: clk,
		OnRetry: obs.Retry("db"), OnGiveUp: obs.GiveUp("db")})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(obs.Guard("db"), rt, br).WithClock(clk)
	onLimit := obs.Limit("pool", 8)
	onLimit(8, 6) // as a concurrency.Limiter's OnLimitChange does

	ctx := context.Background()
	down := errors.New("down")
	call := func(d time.Duration, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			clk.Advance(d)
			return 1, err
		}
	}
	if _, err := sluice.Do(ctx, g, call(30*time.Millisecond, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := sluice.Do(ctx, g, call(200*time.Millisecond, down)); !errors.Is(err, down) {
		t.Fatalf("failing call: %v", err)
	}
	if _, err := sluice.Do(ctx, g, call(time.Millisecond, nil)); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("call through an open breaker: %v", err)
	}

	got, hists := points(t, reader)
	want := []string{
		"sluice.circuit_breaker.state{breaker=db,state=closed} 0",
		"sluice.circuit_breaker.state{breaker=db,state=disabled} 0",
		"sluice.circuit_breaker.state{breaker=db,state=forced-open} 0",
		"sluice.circuit_breaker.state{breaker=db,state=half-open} 0",
		"sluice.circuit_breaker.state{breaker=db,state=open} 1",
		"sluice.circuit_breaker.transitions{breaker=db,to=open} 1",
		"sluice.concurrency_limiter.limit{limiter=pool} 6",
		"sluice.guard.calls{class=dropped,guard=db} 1",
		"sluice.guard.calls{class=failure,guard=db} 1",
		"sluice.guard.calls{class=success,guard=db} 1",
		"sluice.guard.rejections{guard=db,policy=db,reason=circuit_open} 1",
		"sluice.retry.giveups{policy=db,reason=attempts_exhausted} 1",
		"sluice.retry.giveups{policy=db,reason=retry_after_too_long} 1",
		"sluice.retry.retries{policy=db} 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("collected:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h, ok := hists["sluice.guard.call.duration"]
	if !ok || h.Count != 2 || h.Sum < 0.429 || h.Sum > 0.431 {
		t.Errorf("duration: %+v, want 2 calls summing to 0.43s (30ms, and 2 × 200ms retried)", h)
	}
	if v, _ := h.Attributes.Value("guard"); v.AsString() != "db" {
		t.Errorf("duration attributes %v", h.Attributes)
	}
}
