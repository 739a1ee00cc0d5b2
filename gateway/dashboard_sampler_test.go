package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/telemetry"
)

// sampledGateway builds (without serving) a gateway of one route "r" with
// a breaker and a static concurrency limit of 8, on a fake clock, with its
// metrics on a registry of its own.
func sampledGateway(t testing.TB) (*Gateway, *clock.Fake, *telemetry.Metrics, *prometheus.Registry) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(`upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: up
    policies: {circuit_breaker: {consecutive_failures: 1}, concurrency: {max: 8}}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Metrics: m, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	return g, fc, m, reg
}

// receive returns the next sample a viewer gets, failing the test when the
// stream ends or none comes within a bound that a passing test never
// reaches (the samples are driven by the fake clock).
func receive(t *testing.T, v *viewer) DashboardFrame {
	t.Helper()
	select {
	case b, ok := <-v.frames:
		if !ok {
			t.Fatal("the stream ended")
		}
		var f DashboardFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("no sample")
	}
	return DashboardFrame{}
}

// TestDashboardSamplerUnderFakeClock drives the sampler with a fake clock:
// a sample at once without rates, then one per second of the clock whose
// rates are the requests recorded in that second; the breaker's
// transitions; a history that keeps the last dashHistory points across
// viewers; and the sampler slowed to dashIdleInterval once the last viewer
// leaves.
func TestDashboardSamplerUnderFakeClock(t *testing.T) {
	noLeaks(t)
	g, fc, m, reg := sampledGateway(t)
	d := newDashboard(g, reg)
	v, history, last, ok := d.join()
	if !ok || len(history) != 0 || last != nil {
		t.Fatalf("first join: ok %v, %d points, last %q", ok, len(history), last)
	}
	f := receive(t, v)
	if f.Rates != nil || len(f.Routes) != 1 || f.Routes[0].Name != "r" || f.Routes[0].Breaker != "closed" ||
		f.Point.Routes["r"].Limit != 8 || !f.Time.Equal(fc.Now()) {
		t.Fatalf("first sample: %+v", f)
	}

	// One second: 4 served requests (2 of 1 ms, 2 of 100 ms), 2 rate
	// limited, 1 breaker open, 1 upstream error; the breaker opens.
	rm := m.Route("r")
	for _, d := range []time.Duration{time.Millisecond, time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond} {
		rm.Request(200, "", d)
	}
	rm.Request(429, "rate_limited", 0)
	rm.Request(429, "rate_limited", 0)
	rm.Request(503, "circuit_open", 0)
	rm.Request(502, "upstream_status", 0)
	rm.RateLimit(true)
	rm.RateLimit(false)
	g.breakerLog.record("r", breaker.Closed, breaker.Open, fc.Now())
	fc.Advance(dashInterval)
	f = receive(t, v)
	r := f.Rates["r"]
	if r == nil {
		t.Fatalf("second sample has no rates: %+v", f)
	}
	want := map[string]float64{"served": 4, "rate_limited": 2, "breaker_open": 1, "overloaded": 0, "timeout": 0, "upstream_error": 1, "other": 0}
	for k, n := range want {
		if r.Requests[k] != n {
			t.Errorf("%s: %v/s, want %v", k, r.Requests[k], n)
		}
	}
	if r.Allowed != 1 || r.Rejected != 1 {
		t.Errorf("rate-limit decisions %v allowed, %v rejected a second, want 1 and 1", r.Allowed, r.Rejected)
	}
	// The 8 requests: 2 zero, 2 at 1 ms, 2 at 100 ms... in buckets; p50 in
	// the 1 ms bucket, p99 in the 100 ms one.
	if r.P50 == nil || r.P99 == nil || *r.P50 <= 0 || *r.P50 > 0.001 || *r.P99 <= 0.05 || *r.P99 > 0.1 {
		t.Errorf("p50 %v, p99 %v", r.P50, r.P99)
	}
	if tr := f.Transitions["r"]; len(tr) != 1 || tr[0].From != "closed" || tr[0].To != "open" {
		t.Errorf("transitions %+v", f.Transitions)
	}
	if p := f.Point.Routes["r"]; p.Served != 4 || p.Refused != 4 {
		t.Errorf("point %+v, want 4 served and 4 refused", p)
	}

	// A quiet second: zero rates, no latency.
	fc.Advance(dashInterval)
	f = receive(t, v)
	if r := f.Rates["r"]; r == nil || r.Requests["served"] != 0 || r.P50 != nil {
		t.Errorf("quiet second: %+v", r)
	}

	// The history is a ring of the last dashHistory points.
	for range dashHistory + 10 {
		fc.Advance(dashInterval)
		receive(t, v)
	}
	// Nobody watches: the sample due comes, then one every
	// dashIdleInterval, into the history alone.
	d.leave(v)
	watched := fc.Now().UnixMilli()
	fc.Advance(dashInterval)
	for range 2 {
		fc.Advance(dashIdleInterval)
	}
	if n := fc.Timers(); n != 1 {
		t.Fatalf("%d timers while nobody watches, want the next sample's", n)
	}
	fc.Advance(2 * time.Second)
	v, history, last, ok = d.join()
	if !ok || len(history) != dashHistory || last != nil {
		t.Fatalf("second join: ok %v, %d points, last %d bytes", ok, len(history), len(last))
	}
	idle := dashInterval.Milliseconds()
	for i, p := range history {
		want := watched - int64(dashHistory-4-i)*dashInterval.Milliseconds() // watched, a second apart
		if back := dashHistory - 1 - i; back < 3 {
			want = watched + idle + int64(2-back)*dashIdleInterval.Milliseconds()
		}
		if p.Time != want {
			t.Fatalf("history[%d] at %d, want %d", i, p.Time, want)
		}
	}
	// The first sample of the new viewer is taken at once, with the rates
	// of the 2 s since the last idle one.
	if f := receive(t, v); !f.Time.Equal(fc.Now()) || f.Rates == nil || f.Rates["r"].Requests["served"] != 0 {
		t.Errorf("the first sample of a new viewer: at %v (now %v), rates %+v", f.Time, fc.Now(), f.Rates)
	}
	d.leave(v)
}

// TestDashboardHistoryBeforeViewers: the sampler runs from start, every
// dashIdleInterval while nobody watches, so that the first viewer sees
// what happened before it came (the requests of each interval as rates);
// a route a reload removed leaves the history (its points are freed), one
// it added joins it.
func TestDashboardHistoryBeforeViewers(t *testing.T) {
	noLeaks(t)
	g, fc, m, reg := sampledGateway(t)
	d := newDashboard(g, reg)
	d.start()
	start := fc.Now().UnixMilli()
	for i := range 3 {
		for range 5 * (i + 1) {
			m.Route("r").Request(200, "", time.Millisecond)
		}
		fc.Advance(dashIdleInterval)
	}
	if n := fc.Timers(); n != 1 {
		t.Fatalf("%d timers, want the next sample's", n)
	}
	v, history, _, ok := d.join()
	if !ok || len(history) != 4 {
		t.Fatalf("join: ok %v, %d points, want the start's and 3 more", ok, len(history))
	}
	for i, p := range history {
		if want := start + int64(i)*dashIdleInterval.Milliseconds(); p.Time != want {
			t.Errorf("point %d at %d, want %d", i, p.Time, want)
		}
		if want := float64(i); p.Routes["r"].Served != want || p.Routes["r"].Limit != 8 {
			t.Errorf("point %d: %+v, want %v served a second and the limit 8", i, p.Routes["r"], want)
		}
	}
	receive(t, v)
	d.leave(v)

	cfg, err := config.Parse("test.yaml", []byte(`upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: s, upstream: up}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	fc.Advance(dashInterval) // the sample due since the viewer left
	d.mu.Lock()
	_, kept := d.history.routes["r"]
	routes := len(d.history.routes)
	points := d.history.points()
	d.mu.Unlock()
	if kept || routes != 1 {
		t.Errorf("after the reload: %d routes in the history (r kept: %v), want s alone", routes, kept)
	}
	for i, p := range points {
		_, r := p.Routes["r"]
		_, s := p.Routes["s"]
		if r || s != (i == len(points)-1) {
			t.Errorf("point %d has routes %v, want s in the last alone", i, p.Routes)
		}
	}
}

// TestDashboardViewersBounded: at most dashMaxViewers streams, and a
// shutting-down gateway ends them and takes no more.
func TestDashboardViewersBounded(t *testing.T) {
	noLeaks(t)
	g, fc, _, reg := sampledGateway(t)
	d := newDashboard(g, reg)
	var vs []*viewer
	for range dashMaxViewers {
		v, _, _, ok := d.join()
		if !ok {
			t.Fatalf("viewer %d refused", len(vs)+1)
		}
		vs = append(vs, v)
	}
	if _, _, _, ok := d.join(); ok {
		t.Fatalf("viewer %d admitted", dashMaxViewers+1)
	}
	receive(t, vs[0]) // the first sample: the next one's timer is set
	fc.Advance(dashInterval)
	for _, v := range vs {
		for f := receive(t, v); f.Time.Before(fc.Now()); f = receive(t, v) {
		}
	}
	g.closing.Store(true)
	fc.Advance(dashInterval)
	for _, v := range vs {
		for range v.frames { // drained until closed; the closing sample sends nothing
		}
		d.leave(v) // after the shutdown's removal: does nothing
	}
	if _, _, _, ok := d.join(); ok {
		t.Error("a viewer admitted during shutdown")
	}
	eventually(t, "the sampler stops", func() bool { return fc.Timers() == 0 })
}

// TestHistogramQuantile checks the estimate against
// histogram_quantile's: linear within the bucket, from 0 in the first,
// the last bound above it.
func TestHistogramQuantile(t *testing.T) {
	h := histogram{upper: []float64{0.1, 0.2, 0.4}, counts: []float64{10, 10, 30}, count: 40}
	for _, tt := range []struct{ q, want float64 }{
		{0.1, 0.04},  // rank 4 of 10 in (0, 0.1]
		{0.25, 0.1},  // rank 10: the first bucket's top
		{0.5, 0.3},   // rank 20: half of the third bucket's 20
		{0.75, 0.4},  // rank 30: its top
		{0.99, 0.4},  // above every bound: the last bound
		{0.001, 0.0}, // rank 0.04
	} {
		if got := h.quantile(tt.q); math.Abs(got-tt.want) > 0.0005 {
			t.Errorf("q %v: %v, want %v", tt.q, got, tt.want)
		}
	}
	prev := histogram{upper: h.upper, counts: []float64{5, 5, 5}, count: 5}
	if d := h.since(prev); d.count != 35 || d.counts[2] != 25 {
		t.Errorf("since: %+v", d)
	}
	if d := prev.since(h); d.count != 5 {
		t.Errorf("since after a reset: %+v, want the later reading itself", d)
	}
}

// TestOutcomeClass maps every outcome the gateway records.
func TestOutcomeClass(t *testing.T) {
	for label, want := range map[string]string{
		"ok": "served", "rate_limited": "rate_limited", "circuit_open": "breaker_open", "overloaded": "overloaded",
		"timeout": "timeout", "upstream_unreachable": "upstream_error", "upstream_error": "upstream_error",
		"upstream_status": "upstream_error", "client_closed_request": "other", "no_route": "other",
	} {
		if got := outcomeClass(label); got != want {
			t.Errorf("%s: %s, want %s", label, got, want)
		}
	}
}

// noLeaks fails t if goroutines started after it are left running once
// t's later cleanups (the gateway's shutdown) have run.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// eventually polls cond until it holds, failing the test after a bound a
// passing test never reaches.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkDashboardSample measures one sample of the dashboard's sampler,
// once a second while someone watches: reading the counters from a
// registry like sluice serve's (with the Go and process collectors), the
// status, the frame and its encoding. Idle: a sample while nobody watches,
// every dashIdleInterval, which is not encoded.
func BenchmarkDashboardSample(b *testing.B) {
	b.Run("watched", func(b *testing.B) { benchDashboardSample(b, true) })
	b.Run("idle", func(b *testing.B) { benchDashboardSample(b, false) })
}

func benchDashboardSample(b *testing.B, watched bool) {
	g, _, m, reg := sampledGateway(b)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rm := m.Route("r")
	for i := range 1000 {
		rm.Request(200+i%4*100, []string{"", "rate_limited", "circuit_open", "upstream_status"}[i%4], time.Duration(i)*time.Millisecond)
	}
	d := newDashboard(g, reg)
	prev, _ := readCounters(reg)
	b.ReportAllocs()
	for b.Loop() {
		cur, err := readCounters(reg)
		if err != nil {
			b.Fatal(err)
		}
		f := d.frame(rates(prev, cur, 1))
		if watched {
			if _, err := json.Marshal(f); err != nil {
				b.Fatal(err)
			}
		}
		prev = cur
	}
}
