package gateway_test

import (
	"testing"
)

// flowConfig is a route with hedging and a last-good fallback; %s are the
// engine, the upstream's URL, the route's timeout, the hedge's delay and
// the last-good max_entries.
const flowConfig = `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: r
    upstream: up
    policies:
      timeout: %s
      hedge: {delay: %s, budget: 1}
      fallback: {last_good: {max_entries: %s}}
`

// TestReloadKeepsFlowState checks that a reload keeps the hedge (its
// counters and latency window) and the last good answers while their
// settings are unchanged, and starts them afresh when they change.
func TestReloadKeepsFlowState(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startSwitchable(t, "up")
		tg := startGateway(t, parseConfig(t, flowConfig, engine, up.URL, "10s", "1s", "10"))
		c := newClient(t)
		if res := get(t, c, tg.URL+"/a"); res.Code != 200 {
			t.Fatalf("first request: %d %s", res.Code, res.Body)
		}
		check := func(when string, requests uint64, kept int) {
			t.Helper()
			rs := tg.routeStatus(t, "r")
			if rs.Hedge == nil || rs.Hedge.Requests != requests || rs.LastGood != kept {
				t.Errorf("%s: hedge %+v, %d last good answers; want %d hedged requests, %d answers", when, rs.Hedge, rs.LastGood, requests, kept)
			}
		}
		check("before a reload", 1, 1)
		if err := tg.Apply(parseConfig(t, flowConfig, engine, up.URL, "20s", "1s", "10")); err != nil {
			t.Fatal(err)
		}
		check("after a reload that changed the timeout", 1, 1)
		up.failing.Store(true)
		if res := get(t, c, tg.URL+"/a"); res.Code != 200 || res.Body != "up /a " {
			t.Errorf("after the reload, the upstream failing: %d %q, want the last good answer", res.Code, res.Body)
		}
		if err := tg.Apply(parseConfig(t, flowConfig, engine, up.URL, "20s", "2s", "20")); err != nil {
			t.Fatal(err)
		}
		check("after a reload that changed both", 0, 0)
	})
}

// TestReloadDropsLastGoodOfAnotherSource checks, on both engines, that a
// reload that sends the route elsewhere (another upstream, other targets,
// another rewrite or request headers, another rate-limit key) starts its
// last good answers afresh, as it keeps them through one that does not
// (the timeout): an answer from the old source is not the route's any
// more. (The old upstream's answer was given for the new one.)
func TestReloadDropsLastGoodOfAnotherSource(t *testing.T) {
	const cfg = `
server: {engine: %s}
upstreams:
  one: {targets: ["%s"]}
  two: {targets: ["%s"]}
routes:
  - name: r
    upstream: %s
    policies:
      timeout: %s
      fallback: {last_good: {}}
`
	forEngines(t, func(t *testing.T, engine string) {
		one := startSwitchable(t, "one")
		two := startSwitchable(t, "two")
		two.failing.Store(true)
		tg := startGateway(t, parseConfig(t, cfg, engine, one.URL, two.URL, "one", "10s"))
		c := newClient(t)
		if res := get(t, c, tg.URL+"/a"); res.Code != 200 || res.Body != "one /a " {
			t.Fatalf("first request: %d %q", res.Code, res.Body)
		}
		if err := tg.Apply(parseConfig(t, cfg, engine, one.URL, two.URL, "one", "20s")); err != nil {
			t.Fatal(err)
		}
		if n := tg.routeStatus(t, "r").LastGood; n != 1 {
			t.Errorf("after a reload that changed the timeout: %d last good answers, want 1", n)
		}
		if err := tg.Apply(parseConfig(t, cfg, engine, one.URL, two.URL, "two", "20s")); err != nil {
			t.Fatal(err)
		}
		if res := get(t, c, tg.URL+"/a"); res.Code != 503 || res.Body != "two down\n" {
			t.Errorf("routed to another upstream, failing: %d %q, want its own 503", res.Code, res.Body)
		}
	})
}
