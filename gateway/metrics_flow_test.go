package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// seriesValue returns the value of the gateway's series of family name
// whose labels include labels (name=value pairs), and whether there is one.
func seriesValue(t testing.TB, tg *testGateway, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := tg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestMetricsHedges checks the hedging metrics on both engines: with
// budget 0.5 the first slow request's hedge is refused and the second's
// sent, and it wins.
func TestMetricsHedges(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rs := startRacers(t)
		tg := hedgeGateway(t, engine, rs, "hedge: {delay: 50ms, budget: 0.5}")
		c := newClient(t)
		for i := 1; i <= 2; i++ {
			id := fmt.Sprint(i)
			base := tg.Clock.Timers()
			answered := send(t, c, tg, "GET", id)
			rc := rs.race(id)
			awaitClosed(t, rc.first, "the first attempt of request "+id)
			hedgeTimer(t, tg, base, 50*time.Millisecond)
			eventually(t, "the hedge decided", func() bool {
				h := tg.routeStatus(t, "r").Hedge
				return h.Hedges+h.Denied == uint64(i)
			})
			want := "fast "
			if i == 1 {
				want = "slow "
				close(rc.release)
			}
			if res := <-answered; res.Code != 200 || !strings.HasPrefix(res.Body, want) {
				t.Fatalf("request %d: %d %q, want %s...", i, res.Code, res.Body, want)
			}
		}
		compareMetrics(t, tg, `
sluice_hedged_requests_total{route="r"} 2
sluice_hedges_total{route="r"} 1
sluice_hedge_wins_total{route="r"} 1
sluice_hedge_budget_exhausted_total{route="r"} 1
`, "sluice_hedged_requests_total", "sluice_hedges_total", "sluice_hedge_wins_total", "sluice_hedge_budget_exhausted_total")
	})
}

// TestMetricsFallbackLevels checks, on both engines, that fallback answers
// are counted by the level that gave them, the fallback upstream's
// attempts by its target's metrics, and the last-good store's
// entries, bytes and evictions (max_entries 1: a second good answer evicts
// the first).
func TestMetricsFallbackLevels(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		primary := startSwitchable(t, "primary")
		backup := startSwitchable(t, "backup")
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
  backup: {targets: ["%s"]}
routes:
  - name: r
    upstream: up
    policies:
      fallback:
        upstream: backup
        last_good: {max_age: 30s, max_entries: 1}
        body: static
`, engine, primary.URL, backup.URL))
		c := newClient(t)
		check := func(what, path string, code int, body string) {
			t.Helper()
			if res := get(t, c, tg.URL+path); res.Code != code || res.Body != body {
				t.Fatalf("%s: %d %q, want %d %q", what, res.Code, res.Body, code, body)
			}
		}
		check("primary up", "/a", 200, "primary /a ")
		check("primary up", "/b", 200, "primary /b ")
		primary.failing.Store(true)
		check("the backup upstream", "/b", 200, "backup /b ")
		backup.failing.Store(true)
		check("the last good answer", "/b", 200, "primary /b ")
		check("evicted: the static answer", "/a", 503, "static")
		check("never good: the static answer", "/c", 503, "static")
		compareMetrics(t, tg, `
sluice_fallback_answers_total{level="last_good",route="r"} 1
sluice_fallback_answers_total{level="static",route="r"} 2
sluice_fallback_answers_total{level="upstream",route="r"} 1
sluice_last_good_entries{route="r"} 1
sluice_last_good_evictions_total{route="r"} 1
`, "sluice_fallback_answers_total", "sluice_last_good_entries", "sluice_last_good_evictions_total")
		// The backup's target counts its attempts: the one that answered,
		// and the three it failed.
		for class, want := range map[string]float64{"success": 1, "failure": 3} {
			if n, _ := seriesValue(t, tg, "sluice_target_requests_total", "upstream", "backup", "class", class); n != want {
				t.Errorf("the backup target's %s attempts: %v, want %v", class, n, want)
			}
		}
		size, ok := seriesValue(t, tg, "sluice_last_good_bytes", "route", "r")
		if want := tg.routeStatus(t, "r").LastGoodBytes; !ok || want == 0 || size != float64(want) {
			t.Errorf("sluice_last_good_bytes %v (found %v), want %d as /status says", size, ok, want)
		}
	})
}

// TestMetricsPriorityClasses checks, on both engines, the priority-class
// series of a route whose adaptive limit is pinned at 1 and guaranteed to
// critical requests: while a critical request is in flight, best-effort
// ones are shed and counted as such.
func TestMetricsPriorityClasses(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(1)
		up := startUpstream(t, "up", func(_ http.ResponseWriter, r *http.Request) { g.wait(r) })
		tg := routedGateway(t, engine, up, `
  - name: r
    upstream: up
    policies:
      concurrency: {adaptive: {min: 1, initial: 1, max: 1}}
      priority:
        from: "header:X-Priority"
        shares: {critical: 1, normal: 0, best_effort: 0}
`)
		c := newClient(t)
		var wg sync.WaitGroup
		wg.Go(func() {
			if res, err := tryDo(c, "GET", tg.URL+"/", http.Header{"X-Priority": {"critical"}}, nil); err != nil || res.Code != 200 {
				t.Errorf("critical request: %d %v", res.Code, err)
			}
		})
		g.awaitArrivals(t, 1)
		for range 2 {
			res := do(t, c, "GET", tg.URL+"/", http.Header{"X-Priority": {"best_effort"}}, nil)
			if res.Code != http.StatusServiceUnavailable {
				t.Fatalf("best-effort request beside the critical one: %d %q, want 503", res.Code, res.Body)
			}
		}
		compareMetrics(t, tg, `
sluice_priority_in_flight_requests{priority="best_effort",route="r"} 0
sluice_priority_in_flight_requests{priority="critical",route="r"} 1
sluice_priority_in_flight_requests{priority="normal",route="r"} 0
sluice_priority_rejected_total{priority="best_effort",route="r"} 2
sluice_priority_rejected_total{priority="critical",route="r"} 0
sluice_priority_rejected_total{priority="normal",route="r"} 0
`, "sluice_priority_in_flight_requests", "sluice_priority_rejected_total")
		g.open()
		wg.Wait()
		eventually(t, "the critical request's permit returned", func() bool {
			v, ok := seriesValue(t, tg, "sluice_priority_in_flight_requests", "route", "r", "priority", "critical")
			return ok && v == 0
		})
	})
}

// TestMetricsCoalescing checks, on both engines, that identical
// concurrent GETs are counted as one leader and its followers.
func TestMetricsCoalescing(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		const n = 4
		g := newGate(n)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			g.wait(r)
			fmt.Fprint(w, "answer")
		})
		tg := routedGateway(t, engine, up, `
  - {name: co, upstream: up, policies: {coalesce: true}}
`)
		c := newClient(t)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if res, err := tryDo(c, "GET", tg.URL+"/same", nil, nil); err != nil || res.Code != 200 {
					t.Errorf("coalesced request: %d %v", res.Code, err)
				}
			})
		}
		g.awaitArrivals(t, 1)
		eventually(t, "every request to join the call under way", func() bool {
			return gateway.CoalesceShared(tg.Gateway, "co") == n-1
		})
		g.open()
		wg.Wait()
		compareMetrics(t, tg, `
sluice_coalesced_requests_total{role="follower",route="co"} 3
sluice_coalesced_requests_total{role="leader",route="co"} 1
`, "sluice_coalesced_requests_total")
	})
}

// TestMetricsFlowForgetRemovedOnReload checks, on both engines, that a
// reload that removes routes deletes their hedging, fallback, last-good,
// priority and coalescing series (coalescing has a route of its own: it
// takes no fallback levels), and keeps those of the route that stays.
func TestMetricsFlowForgetRemovedOnReload(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startSwitchable(t, "up")
		const conf = `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: kept, upstream: up, match: {path_prefix: /kept}, policies: {coalesce: true}}
%s`
		const gone = `  - name: gone
    upstream: up
    match: {path_prefix: /gone}
    policies:
      hedge: {delay: 1s}
      concurrency: {adaptive: {min: 1, max: 8}}
      priority: {}
      fallback: {last_good: {max_age: 30s}, body: static}
  - {name: gone-co, upstream: up, match: {path_prefix: /co}, policies: {coalesce: true}}
`
		tg := startGateway(t, parseConfig(t, conf, engine, up.URL, gone))
		c := newClient(t)
		for _, p := range []string{"/kept", "/gone/a", "/co"} {
			if res := get(t, c, tg.URL+p); res.Code != 200 {
				t.Fatalf("%s: %d %q", p, res.Code, res.Body)
			}
		}
		up.failing.Store(true)
		if res := get(t, c, tg.URL+"/gone/b"); res.Code != 503 || res.Body != "static" {
			t.Fatalf("/gone/b with the upstream down: %d %q, want the static answer", res.Code, res.Body)
		}
		families := []string{"sluice_hedged_requests_total", "sluice_hedges_total", "sluice_hedge_wins_total",
			"sluice_hedge_budget_exhausted_total", "sluice_fallback_answers_total", "sluice_last_good_entries",
			"sluice_last_good_bytes", "sluice_last_good_evictions_total", "sluice_priority_in_flight_requests",
			"sluice_priority_rejected_total", "sluice_coalesced_requests_total"}
		for _, f := range families {
			route := "gone"
			if f == "sluice_coalesced_requests_total" {
				route = "gone-co"
			}
			if _, ok := seriesValue(t, tg, f, "route", route); !ok {
				t.Fatalf("before the reload, no %s of route gone:\n%s", f, grepLines(tg.metricsText(t), "sluice_"))
			}
		}
		if err := tg.Apply(parseConfig(t, conf, engine, up.URL, "")); err != nil {
			t.Fatal(err)
		}
		if m := tg.metricsText(t); strings.Contains(m, `route="gone`) {
			t.Errorf("after the reload, series of the routes removed remain:\n%s", grepLines(m, `route="gone`))
		}
		if v, ok := seriesValue(t, tg, "sluice_coalesced_requests_total", "route", "kept", "role", "leader"); !ok || v != 1 {
			t.Errorf("after the reload, route kept's leaders: %v (found %v), want 1", v, ok)
		}
	})
}
