package gateway_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisSentinelStore configures the Redis store through Redis Sentinel
// (store.redis.sentinel) and checks that a route limited to 5 requests per
// hour admits exactly 5 of 15, with the state in the master the sentinels
// name. The store fails closed, so an admission can only come from Redis.
func TestRedisSentinelStore(t *testing.T) {
	const limit = 5
	d := redistest.StartSentinel(t, redistest.SentinelOptions{})
	up := startUpstream(t, "up", nil)
	gw := startGateway(t, parseConfig(t, `
store:
  kind: redis
  redis: {addrs: ["%s"], sentinel: %s, on_error: closed, timeout: 2s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: rl
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: %d, burst: %d, period: 1h, key: route}
`, strings.Join(d.Addrs(), `", "`), redistest.MasterName, up.URL, limit, limit))
	c := newClient(t)
	for i := range 3 * limit {
		r := get(t, c, gw.URL+"/")
		want := 200
		if i >= limit {
			want = 429
		}
		if r.Code != want {
			t.Errorf("request %d: status %d, want %d (body %q)", i, r.Code, want, r.Body)
		}
	}
	if n := up.calls.Load(); n != limit {
		t.Errorf("upstream got %d calls, want %d", n, limit)
	}
	if n, err := redistest.Do(d.Master().Addr, "DBSIZE"); err != nil || n != "1" {
		t.Errorf("DBSIZE of the master = %q, %v; want one key", n, err)
	}
}
