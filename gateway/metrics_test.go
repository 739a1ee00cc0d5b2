package gateway_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/config"
)

// compareMetrics fails t unless the gateway's families names have exactly
// the series of want (Prometheus text format, HELP and TYPE lines left
// out: they are taken from the registry).
func compareMetrics(t testing.TB, gw *testGateway, want string, names ...string) {
	t.Helper()
	families, err := gw.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	for _, f := range families {
		for _, n := range names {
			if f.GetName() == n {
				fmt.Fprintf(&head, "# HELP %s %s\n# TYPE %s %s\n", n, f.GetHelp(), n, strings.ToLower(f.GetType().String()))
			}
		}
	}
	if err := testutil.GatherAndCompare(gw.Registry, strings.NewReader(head.String()+want), names...); err != nil {
		t.Fatal(err)
	}
}

// gaugeValue returns the value of the gateway's gauge name, which has no
// labels.
func gaugeValue(t testing.TB, gw *testGateway, name string) float64 {
	t.Helper()
	families, err := gw.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestMetricsStateFromStart checks that the state of every route and
// target is exported before any request, with clean label values (the
// target's URL, its upstream's name, the route's name): breaker states as
// state sets, health, limits, queues, requests in flight, retries and
// attempts at zero; and that a breaker that opens shows at once in its
// state set and its transitions.
func TestMetricsStateFromStart(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusBadGateway)
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  models: {targets: ["%s"]}
routes:
  - name: infer
    upstream: models
    policies:
      circuit_breaker: {consecutive_failures: 2, open_for: 10s}
      concurrency: {max: 3}
      retry: {attempts: 2, on: [connect_error]}
`, engine, up.URL))
		state := func(open int) string {
			return fmt.Sprintf(`sluice_breaker_state{route="infer",state="closed"} %d
sluice_breaker_state{route="infer",state="disabled"} 0
sluice_breaker_state{route="infer",state="forced-open"} 0
sluice_breaker_state{route="infer",state="half-open"} 0
sluice_breaker_state{route="infer",state="open"} %d
`, 1-open, open)
		}
		u := up.URL
		compareMetrics(t, gw, state(0)+`sluice_concurrency_limit{route="infer"} 3
sluice_concurrency_queued_requests{route="infer"} 0
sluice_retries_total{route="infer"} 0
sluice_retry_budget_exhausted_total{route="infer"} 0
sluice_route_in_flight_requests{route="infer"} 0
`+fmt.Sprintf(`sluice_target_breaker_state{state="closed",target=%[1]q,upstream="models"} 1
sluice_target_breaker_state{state="disabled",target=%[1]q,upstream="models"} 0
sluice_target_breaker_state{state="forced-open",target=%[1]q,upstream="models"} 0
sluice_target_breaker_state{state="half-open",target=%[1]q,upstream="models"} 0
sluice_target_breaker_state{state="open",target=%[1]q,upstream="models"} 0
sluice_target_healthy{target=%[1]q,upstream="models"} 1
sluice_target_in_flight_requests{target=%[1]q,upstream="models"} 0
sluice_target_requests_total{class="failure",target=%[1]q,upstream="models"} 0
sluice_target_requests_total{class="ignored",target=%[1]q,upstream="models"} 0
sluice_target_requests_total{class="success",target=%[1]q,upstream="models"} 0
`, u),
			"sluice_breaker_state", "sluice_concurrency_limit", "sluice_concurrency_queued_requests", "sluice_retries_total",
			"sluice_retry_budget_exhausted_total", "sluice_route_in_flight_requests", "sluice_target_breaker_state",
			"sluice_target_healthy", "sluice_target_in_flight_requests", "sluice_target_requests_total")

		c := newClient(t)
		for range 2 {
			if r := get(t, c, gw.URL+"/"); r.Code != http.StatusBadGateway {
				t.Fatalf("status %d, want the upstream's 502", r.Code)
			}
		}
		compareMetrics(t, gw, state(1)+`sluice_breaker_transitions_total{route="infer",to="open"} 1
`, "sluice_breaker_state", "sluice_breaker_transitions_total")
	})
}

// TestMetricsInFlightAndQueue holds requests at the upstream and checks
// the gauges read at scrape time: the route's requests in flight (queued
// ones included), its concurrency queue, and the target's attempts in
// flight; all back to zero once the requests are answered.
func TestMetricsInFlightAndQueue(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(3)
		t.Cleanup(g.open)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			g.wait(r)
			fmt.Fprint(w, "ok")
		})
		gw := routedGateway(t, engine, up, `
  - name: q
    upstream: up
    policies:
      concurrency: {max: 1, queue: 2}
`)
		c := newClient(t)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, err := tryDo(c, "GET", gw.URL+"/", nil, nil); err != nil || r.Code != 200 {
					failed.Add(1)
				}
			}()
		}
		g.awaitArrivals(t, 1)
		eventually(t, "two requests queued", func() bool { return gw.routeStatus(t, "q").ConcurrencyQueued == 2 })
		gauges := func(route, queued, target int) string {
			return fmt.Sprintf(`sluice_concurrency_queued_requests{route="q"} %d
sluice_route_in_flight_requests{route="q"} %d
sluice_target_in_flight_requests{target=%q,upstream="up"} %d
`, queued, route, up.URL, target)
		}
		names := []string{"sluice_concurrency_queued_requests", "sluice_route_in_flight_requests", "sluice_target_in_flight_requests"}
		compareMetrics(t, gw, gauges(3, 2, 1), names...)
		g.open()
		wg.Wait()
		if n := failed.Load(); n != 0 {
			t.Fatalf("%d of 3 requests failed", n)
		}
		eventually(t, "the route idle", func() bool { return gw.routeStatus(t, "q").InFlight == 0 })
		compareMetrics(t, gw, gauges(0, 0, 0), names...)
	})
}

// TestMetricsForgetRemovedOnReload checks that a reload deletes every
// series of a route it removed and of the targets it removed from their
// upstream (or with their upstream), keeps the series of what stays (a
// target kept in a rebuilt upstream included), and sets the last-reload
// gauges; a refused reload clears the success gauge and keeps the
// timestamp.
func TestMetricsForgetRemovedOnReload(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		a1, a2, b := startUpstream(t, "a1", nil), startUpstream(t, "a2", nil), startUpstream(t, "b", nil)
		const conf = `
server: {engine: %s}
upstreams:
  a: {targets: [%s]}
%s
routes:
  - {name: kept, upstream: a, match: {path_prefix: /kept}}
%s
`
		gw := startGateway(t, parseConfig(t, conf, engine, `"`+a1.URL+`", "`+a2.URL+`"`,
			fmt.Sprintf(`  b: {targets: ["%s"]}`, b.URL), `  - name: gone
    upstream: b
    match: {path_prefix: /gone}
    policies:
      circuit_breaker: {consecutive_failures: 5}
      rate_limit: {limit: 100, period: 1s}
      retry: {attempts: 2, on: [connect_error]}
      concurrency: {max: 4}`))
		c := newClient(t)
		for _, p := range []string{"/kept", "/kept", "/gone"} {
			if r := get(t, c, gw.URL+p); r.Code != 200 {
				t.Fatalf("%s: %d", p, r.Code)
			}
		}
		at := func() float64 { return gaugeValue(t, gw, "sluice_config_last_reload_success_timestamp_seconds") }
		before := at()
		m := gw.metricsText(t)
		for _, want := range []string{`route="gone"`, `target="` + a2.URL + `"`, `upstream="b"`} {
			if !strings.Contains(m, want) {
				t.Fatalf("before the reload, no series with %s:\n%s", want, grepLines(m, "sluice_"))
			}
		}

		if err := gw.Apply(parseConfig(t, conf, engine, `"`+a1.URL+`"`, "", "")); err != nil {
			t.Fatal(err)
		}
		m = gw.metricsText(t)
		for _, gone := range []string{`route="gone"`, a2.URL, b.URL, `upstream="b"`} {
			if strings.Contains(m, gone) {
				t.Errorf("after the reload, series with %s remain:\n%s", gone, grepLines(m, gone))
			}
		}
		for _, kept := range []string{`sluice_requests_total{code="200",outcome="ok",route="kept"} 2`,
			`sluice_target_healthy{target="` + a1.URL + `",upstream="a"} 1`,
			`sluice_target_requests_total{class="success",target="` + a1.URL + `",upstream="a"}`,
			`sluice_config_last_reload_successful 1`, `sluice_config_reloads_total{result="ok"} 1`} {
			if !strings.Contains(m, kept) {
				t.Errorf("after the reload, no %s:\n%s", kept, grepLines(m, "sluice_"))
			}
		}
		applied := at()
		if applied < before {
			t.Errorf("success timestamp %v after the reload, %v before", applied, before)
		}

		gw.Refuse(errors.New("bad file"))
		m = gw.metricsText(t)
		if !strings.Contains(m, "sluice_config_last_reload_successful 0") || !strings.Contains(m, `sluice_config_reloads_total{result="error"} 1`) {
			t.Errorf("after a refused reload:\n%s", grepLines(m, "reload"))
		}
		if got := at(); got != applied {
			t.Errorf("a refused reload moved the success timestamp from %v to %v", applied, got)
		}
	})
}

// TestRequestDurationToEndOfBody holds a streamed response's body at the
// upstream after its head and first part have reached the client: the
// request is not recorded yet (it used to be, at the head); once the rest
// is sent it is, with a duration that covers the wait for the body.
func TestRequestDurationToEndOfBody(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		const size = 256 << 10 // streams: larger than what is read whole
		g := newGate(1)
		t.Cleanup(g.open)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			_, _ = w.Write(make([]byte, size/2))
			w.(http.Flusher).Flush()
			g.wait(r)
			_, _ = w.Write(make([]byte, size-size/2))
		})
		gw := routedGateway(t, engine, up, `
  - {name: s, upstream: up}
`)
		resp, err := newClient(t).Get(gw.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		head := time.Now()
		g.awaitArrivals(t, 1)
		m := gw.metricsText(t)
		released := time.Now()
		g.open()
		if !strings.Contains(m, `sluice_request_duration_seconds_count{route="s"} 0`) || strings.Contains(m, "sluice_requests_total{") {
			t.Errorf("the request is recorded while its body is still streaming:\n%s", grepLines(m, "sluice_request"))
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size {
			t.Fatalf("body: %d bytes, %v; want %d", n, err, size)
		}
		var sum float64
		eventually(t, "the request recorded", func() bool {
			families, err := gw.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() == "sluice_request_duration_seconds" && len(f.GetMetric()) == 1 && f.GetMetric()[0].GetHistogram().GetSampleCount() == 1 {
					sum = f.GetMetric()[0].GetHistogram().GetSampleSum()
					return true
				}
			}
			return false
		})
		if wait := released.Sub(head).Seconds(); sum < wait {
			t.Errorf("recorded duration %gs, shorter than the %gs between the head and the body's release", sum, wait)
		}
		if m := gw.metricsText(t); !strings.Contains(m, `sluice_requests_total{code="200",outcome="ok",route="s"} 1`) {
			t.Errorf("requests:\n%s", grepLines(m, "sluice_requests_total"))
		}
	})
}

// TestMetricsTargetAttempts sends requests to an upstream of a failing and
// a healthy target: each target's attempts are counted by class and timed,
// and the failing one's passive-health breaker shows open in its state set
// and its transitions, under the target's URL and upstream's name.
func TestMetricsTargetAttempts(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad", http.StatusBadGateway)
		})
		good := startUpstream(t, "good", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s", "%s"]}
routes:
  - {name: all, upstream: up}
`, engine, bad.URL, good.URL))
		c := newClient(t)
		for range 20 {
			get(t, c, gw.URL+"/")
		}
		if n := bad.calls.Load(); n != 5 {
			t.Fatalf("the failing target got %d calls, want 5 (then its breaker opens)", n)
		}
		compareMetrics(t, gw, fmt.Sprintf(`sluice_target_breaker_state{state="closed",target=%[1]q,upstream="up"} 0
sluice_target_breaker_state{state="closed",target=%[2]q,upstream="up"} 1
sluice_target_breaker_state{state="disabled",target=%[1]q,upstream="up"} 0
sluice_target_breaker_state{state="disabled",target=%[2]q,upstream="up"} 0
sluice_target_breaker_state{state="forced-open",target=%[1]q,upstream="up"} 0
sluice_target_breaker_state{state="forced-open",target=%[2]q,upstream="up"} 0
sluice_target_breaker_state{state="half-open",target=%[1]q,upstream="up"} 0
sluice_target_breaker_state{state="half-open",target=%[2]q,upstream="up"} 0
sluice_target_breaker_state{state="open",target=%[1]q,upstream="up"} 1
sluice_target_breaker_state{state="open",target=%[2]q,upstream="up"} 0
sluice_target_breaker_transitions_total{target=%[1]q,to="open",upstream="up"} 1
sluice_target_requests_total{class="failure",target=%[1]q,upstream="up"} 5
sluice_target_requests_total{class="failure",target=%[2]q,upstream="up"} 0
sluice_target_requests_total{class="ignored",target=%[1]q,upstream="up"} 0
sluice_target_requests_total{class="ignored",target=%[2]q,upstream="up"} 0
sluice_target_requests_total{class="success",target=%[1]q,upstream="up"} 0
sluice_target_requests_total{class="success",target=%[2]q,upstream="up"} 15
`, bad.URL, good.URL), "sluice_target_breaker_state", "sluice_target_breaker_transitions_total", "sluice_target_requests_total")
		m := gw.metricsText(t)
		for _, want := range []string{
			fmt.Sprintf(`sluice_target_request_duration_seconds_count{target=%q,upstream="up"} 5`, bad.URL),
			fmt.Sprintf(`sluice_target_request_duration_seconds_count{target=%q,upstream="up"} 15`, good.URL),
		} {
			if !strings.Contains(m, want) {
				t.Errorf("no %s:\n%s", want, grepLines(m, "sluice_target_request_duration_seconds_count"))
			}
		}
	})
}

// TestMetricsRefusedReloadLeavesNoSeries applies a configuration that
// fails to build after some of its routes and upstreams were: the refused
// configuration's new routes and targets leave no series, and the serving
// one keeps its own.
func TestMetricsRefusedReloadLeavesNoSeries(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up, other := startUpstream(t, "up", nil), startUpstream(t, "other", nil)
		gw := routedGateway(t, engine, up, `
  - {name: old, upstream: up}
`)
		// A rate limit whose horizon no clock can hold fails to build (see
		// TestInvalidReloadRefused), after the route before it was built.
		unbuildable := parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
  other: {targets: ["%s"]}
routes:
  - {name: new, match: {path_prefix: /new}, upstream: other, policies: {rate_limit: {limit: 5, period: 1s}}}
  - name: huge
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, burst: 10}
`, engine, up.URL, other.URL)
		unbuildable.Routes[1].Policies.RateLimit.Period = config.Duration(200000 * time.Hour)
		if err := gw.Apply(unbuildable); err == nil {
			t.Fatal("Apply accepted a configuration that cannot be built")
		}
		m := gw.metricsText(t)
		for _, gone := range []string{`route="new"`, `route="huge"`, other.URL, `upstream="other"`} {
			if strings.Contains(m, gone) {
				t.Errorf("after a refused reload, series with %s:\n%s", gone, grepLines(m, gone))
			}
		}
		for _, kept := range []string{`sluice_route_in_flight_requests{route="old"} 0`,
			fmt.Sprintf(`sluice_target_requests_total{class="success",target=%q,upstream="up"} 0`, up.URL)} {
			if !strings.Contains(m, kept) {
				t.Errorf("after a refused reload, no %s:\n%s", kept, grepLines(m, "sluice_"))
			}
		}
	})
}
