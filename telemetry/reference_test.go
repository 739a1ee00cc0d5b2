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
	"github.com/sluicehq/sluice/telemetry"
)

// everyState is a live state with a series in every live metric.
var everyState = telemetry.Live{
	Routes: []telemetry.RouteState{{Name: "infer", InFlight: 3, HasBreaker: true, Breaker: breaker.HalfOpen,
		Concurrency: &telemetry.ConcurrencyState{Limit: 8, Queued: 2},
		Retry:       &telemetry.RetryState{Retries: 5, BudgetRefused: 1}}},
	Targets: []telemetry.TargetState{{Upstream: "models", URL: "http://127.0.0.1:8080", Healthy: true, Breaker: breaker.Open, InFlight: 1}},
}

// documented is one row of the table in docs/metrics.md.
type documented struct {
	typ    string
	labels []string
}

// referenceRow matches a table row that documents a metric:
// | `name` | type | `label`, `label` | meaning |
var referenceRow = regexp.MustCompile("^\\| `(sluice_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// readReference returns the metrics docs/metrics.md documents, by name.
func readReference(t *testing.T) map[string]documented {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]documented{}
	for _, line := range strings.Split(string(b), "\n") {
		m := referenceRow.FindStringSubmatch(line)
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
		t.Fatal("docs/metrics.md documents no metric")
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
	m.BreakerTransition("infer", breaker.Open)
	m.Reload(true, time.Now())
	m.StoreEvictions().Add(1)
	tg := m.Target("models", "http://127.0.0.1:8080")
	tg.Attempt(sluice.Success, time.Millisecond)
	tg.BreakerTransition(breaker.Open)
	m.Watch(func() telemetry.Live { return everyState })
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
	if len(got) != counted.descs {
		t.Fatalf("New registers %d metrics, %d have series: record through the new one in exported", counted.descs, len(got))
	}
	return got
}

// TestMetricsReference keeps docs/metrics.md complete and exact: every
// metric New registers is documented with its type and labels, and the
// reference documents no metric that is not exported.
func TestMetricsReference(t *testing.T) {
	ref, got := readReference(t), exported(t)
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
