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
