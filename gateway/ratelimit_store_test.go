package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestRateLimitStoreFloodDeniesNoOne floods a route keyed by header with
// more distinct keys than the memory store holds: every new key is still
// admitted by its own limit, a client of another route, keyed by IP, is
// not turned away, and the store's evictions show in the metrics. (A full
// store used to refuse every new key, on every route.)
func TestRateLimitStoreFloodDeniesNoOne(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		const maxKeys, flood = 8, 40
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
store: {max_keys: %d}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: by-key
    match: {path_prefix: /key}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: "header:X-API-Key"}
  - name: by-ip
    match: {path_prefix: /ip}
    upstream: up
    policies:
      rate_limit: {limit: 2, period: 1h}
`, engine, maxKeys, up.URL))
		c := newClient(t)
		for i := range flood {
			h := http.Header{"X-Api-Key": {fmt.Sprint("client-", i)}}
			if r := do(t, c, "GET", gw.URL+"/key", h, nil); r.Code != 200 {
				t.Fatalf("flood key %d: status %d, want 200", i, r.Code)
			}
		}
		// A key's own limit still holds: the last key is busy and kept.
		h := http.Header{"X-Api-Key": {fmt.Sprint("client-", flood-1)}}
		if r := do(t, c, "GET", gw.URL+"/key", h, nil); r.Code != 429 {
			t.Fatalf("the last flood key again: status %d, want 429", r.Code)
		}
		for i, want := range []int{200, 200, 429} {
			if r := get(t, c, gw.URL+"/ip"); r.Code != want {
				t.Fatalf("ip-keyed request %d after the flood: status %d, want %d", i, r.Code, want)
			}
		}
		m := gw.metricsText(t)
		if strings.Contains(m, "sluice_ratelimit_store_evictions_total 0") || !strings.Contains(m, "sluice_ratelimit_store_evictions_total ") {
			t.Errorf("metrics show no evictions:\n%s", grepLines(m, "sluice_ratelimit_store"))
		}
	})
}
