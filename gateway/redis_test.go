package gateway_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/redistest"
)

// redisPeriod is the period of the Redis tests' limits, about 34 years
// (two periods stay within a limit's longest horizon): so long that
// Redis's clock, which a test cannot control, neither refills a bucket
// measurably nor reaches a window's end while a test runs (windows are
// aligned to the Unix epoch; the current one ends in 2038).
const redisPeriod = "300000h"

// redisPeriodSeconds is redisPeriod in seconds.
const redisPeriodSeconds = 300000 * 3600

// redisAlgorithms are the rate-limit algorithms with the suffix of their
// Redis keys.
var redisAlgorithms = []struct{ name, suffix string }{
	{"token_bucket", "tb"},
	{"gcra", "gcra"},
	{"fixed_window", "fw"},
	{"sliding_log", "log"},
	{"sliding_window", "sw"},
	{"leaky_bucket", "lb"},
}

// TestRedisAlgorithms runs every rate-limit algorithm on the Redis store,
// on both engines, with two gateways sharing one redis-server: each client
// (X-Client header) gets exactly its limit across the two gateways, then
// 429 with a Retry-After, and one client's requests do not count against
// another's. The store fails closed, so an admission can only come from
// Redis, and the keys in Redis name the algorithm's script.
func TestRedisAlgorithms(t *testing.T) {
	const limit = 4
	redis := redistest.Start(t)
	forEngines(t, func(t *testing.T, engine string) {
		for _, alg := range redisAlgorithms {
			t.Run(alg.name, func(t *testing.T) {
				prefix := "t-" + engine + "-" + alg.name
				up := startUpstream(t, "up", nil)
				cfg := func() *config.Config {
					return parseConfig(t, `
server: {engine: %s}
store:
  kind: redis
  redis: {addrs: ["%s"], on_error: closed, timeout: 10s, prefix: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: rl
    upstream: up
    policies:
      rate_limit: {algorithm: %s, limit: %d, period: %s, key: "header:X-Client"}
`, engine, redis, prefix, up.URL, alg.name, limit, redisPeriod)
				}
				gws := []*testGateway{startGateway(t, cfg()), startGateway(t, cfg())}
				c := newClient(t)
				for _, client := range []string{"a", "b"} {
					for i := range limit + 3 {
						gw := gws[i%2]
						r := do(t, c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {client}}, nil)
						if i < limit {
							if r.Code != 200 {
								t.Fatalf("client %s, request %d: status %d, want 200 (body %q)", client, i, r.Code, r.Body)
							}
							continue
						}
						if r.Code != 429 || r.errorBody(t).Error != "rate_limited" {
							t.Fatalf("client %s, request %d: status %d, body %q; want 429 rate_limited", client, i, r.Code, r.Body)
						}
						ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
						if err != nil || ra < 1 || ra > 2*redisPeriodSeconds {
							t.Errorf("client %s, request %d: Retry-After %q, want 1 to %d seconds", client, i, r.Header.Get("Retry-After"), 2*redisPeriodSeconds)
						}
					}
				}
				if n := up.calls.Load(); n != 2*limit {
					t.Errorf("upstream got %d calls, want %d", n, 2*limit)
				}
				keys, err := redistest.DoStrings(redis, "KEYS", "{"+prefix+":*")
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(keys)
				want := []string{"{" + prefix + ":rl|h|a}:" + alg.suffix, "{" + prefix + ":rl|h|b}:" + alg.suffix}
				if !slices.Equal(keys, want) {
					t.Errorf("keys in Redis %q, want %q", keys, want)
				}
			})
		}
	})
}
