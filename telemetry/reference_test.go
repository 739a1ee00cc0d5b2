package telemetry_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry"
	"github.com/sluicehq/sluice/telemetry/prom"
)

// everyState is a live state with a series in every live metric.
var everyState = telemetry.Live{
	Routes: []telemetry.RouteState{{Name: "infer", InFlight: 3, HasBreaker: true, Breaker: breaker.HalfOpen,
		Concurrency: &telemetry.ConcurrencyState{Limit: 8, Queued: 2},
		Retry:       &telemetry.RetryState{Retries: 5, BudgetRefused: 1},
		Hedge:       &telemetry.HedgeState{Requests: 40, Sent: 6, Won: 4, BudgetRefused: 2},
		LastGood:    &telemetry.LastGoodState{Entries: 3, Bytes: 2048, Evictions: 7},
		Classes:     []telemetry.ClassState{{Name: "critical", InFlight: 2, Rejected: 0}, {Name: "best_effort", InFlight: 0, Rejected: 9}},
		Coalesce:    &telemetry.CoalesceState{Leaders: 10, Followers: 30}}},
	Targets:   []telemetry.TargetState{{Upstream: "models", URL: "http://127.0.0.1:8080", Healthy: true, Breaker: breaker.Open, InFlight: 1}},
	Listeners: []telemetry.ListenerState{{Name: "plain", Open: 12}, {Name: "tls", Open: 3}},
}

// documented is one row of the table in docs/metrics.md.
type documented struct {
	typ    string
	labels []string
}

// referenceRow matches a table row that documents a metric:
// | `name` | type | `label`, `label` | meaning |
var referenceRow = regexp.MustCompile("^\\| `(sluice_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// readReference returns the metrics the section of docs/metrics.md titled
// section (a "## " heading) documents, by name.
func readReference(t *testing.T, section string) map[string]documented {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]documented{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			in = title == section
		}
		m := referenceRow.FindStringSubmatch(line)
		if !in {
			m = nil
		}
		if m == nil {
			continue
		}
		if _, dup := ref[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		ref[m[1]] = documented{typ: m[2], labels: labels}
	}
	if len(ref) == 0 {
		t.Fatalf("docs/metrics.md documents no metric under %q", section)
	}
	return ref
}

// counting is a Registerer that counts the metrics (descriptors) of the
// collectors registered through it.
type counting struct {
	prometheus.Registerer
	descs int
}

func (c *counting) Register(col prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		col.Describe(ch)
		close(ch)
	}()
	for range ch {
		c.descs++
	}
	return c.Registerer.Register(col)
}

// exported registers sluice's metrics on a fresh registry, records through
// every method once so that each vector has a series, and returns what the
// registry gathers, by name. It fails if a metric New registers has no
// series (a new one this function does not record through yet), since the
// reference could not be checked against it.
func exported(t *testing.T) map[string]documented {
	t.Helper()
	reg := prometheus.NewRegistry()
	counted := &counting{Registerer: reg}
	m, err := telemetry.New(counted)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Route("infer")
	m.Request("infer", 200, "", time.Millisecond)
	r.Request(429, "rate_limited", time.Millisecond)
	r.RateLimit(true)
	r.Fallback(telemetry.FallbackLastGood)
	m.BreakerTransition("infer", breaker.Open)
	m.Reload(true, time.Now())
	m.StoreEvictions().Add(1)
	tg := m.Target("models", "http://127.0.0.1:8080")
	tg.Attempt(sluice.Success, time.Millisecond)
	tg.BreakerTransition(breaker.Open)
	m.Watch(func() telemetry.Live { return everyState })
	return gathered(t, reg, counted.descs)
}

// exportedByProm is exported for the Prometheus sink of library users
// (package telemetry/prom), recording through every event once.
func exportedByProm(t *testing.T) map[string]documented {
	t.Helper()
	reg := prometheus.NewRegistry()
	counted := &counting{Registerer: reg}
	sink, err := prom.New(counted)
	if err != nil {
		t.Fatal(err)
	}
	g := sink.Guard("db")
	g.Call(sluice.Success, time.Millisecond)
	g.Rejected("db", sluice.CircuitOpen)
	sink.BreakerState("db", breaker.Open, true)
	sink.Limit("db", 8)
	sink.Retry("db")
	sink.GiveUp("db", retry.BudgetExhausted)
	return gathered(t, reg, counted.descs)
}

// gathered returns what reg gathers, by name, and fails unless it has
// series of all the descs metrics registered on it.
func gathered(t *testing.T, reg *prometheus.Registry, descs int) map[string]documented {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]documented{}
	for _, f := range families {
		var labels []string
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		slices.Sort(labels)
		got[f.GetName()] = documented{typ: strings.ToLower(f.GetType().String()), labels: labels}
	}
	if len(got) != descs {
		t.Fatalf("New registers %d metrics, %d have series: record through the new one in exported", descs, len(got))
	}
	return got
}

// TestMetricsReference keeps docs/metrics.md complete and exact: every
// metric New registers is documented with its type and labels under "sluice
// metrics", every metric of package telemetry/prom under "Library
// metrics", and the reference documents no metric that is not exported.
func TestMetricsReference(t *testing.T) {
	t.Run("gateway", func(t *testing.T) { checkReference(t, readReference(t, "sluice metrics"), exported(t)) })
	t.Run("library", func(t *testing.T) { checkReference(t, readReference(t, "Library metrics"), exportedByProm(t)) })
}

func checkReference(t *testing.T, ref, got map[string]documented) {
	for name, g := range got {
		d, ok := ref[name]
		switch {
		case !ok:
			t.Errorf("%s (%s, labels %q) is exported but missing from docs/metrics.md", name, g.typ, g.labels)
		case d.typ != g.typ:
			t.Errorf("%s: docs/metrics.md says %s, the metric is a %s", name, d.typ, g.typ)
		case !slices.Equal(d.labels, g.labels):
			t.Errorf("%s: docs/metrics.md lists labels %q, the metric has %q", name, d.labels, g.labels)
		}
	}
	for name := range ref {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/metrics.md documents %s, which is not exported", name)
		}
	}
}
