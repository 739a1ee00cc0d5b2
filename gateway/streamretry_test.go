package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStreamedBodyRetryChargesNoTarget sends requests whose bodies stream
// (of unknown length) to a pool of a target that refuses connections and
// a healthy one, on a route that retries connect errors, on each engine.
// Round robin makes every request after the first try the refusing target
// first; the retry cannot send the body again, and must not count as a
// failure of the healthy target, which it never reached. (The healthy
// target was charged a failure by each such retry, and its passive health
// took it out after five.)
func TestStreamedBodyRetryChargesNoTarget(t *testing.T) {
	const requests = 8
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		})
		// The real clock: the wait before a retry is a nanosecond.
		gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s", "%s"], balance: round_robin}
routes:
  - name: rt
    upstream: up
    policies:
      retry: {attempts: 2, on: [connect_error], backoff: {initial: 1ns, max: 1ns, jitter: none}}
`, engine, closedAddr(t), up.URL), nil)
		c := newClient(t)
		for range requests {
			// A reader of unknown length: the body goes chunked, and streams.
			r := do(t, c, "POST", gw.URL+"/", nil, io.MultiReader(strings.NewReader("payload")))
			if r.Code != 200 && r.Code != 502 {
				t.Fatalf("POST: %d %q", r.Code, r.Body)
			}
		}
		for _, u := range gw.Status().Upstreams {
			for _, tg := range u.Targets {
				if tg.URL == up.URL && tg.Breaker != "closed" {
					t.Errorf("healthy target's passive health %q, want closed", tg.Breaker)
				}
			}
		}
	})
}
