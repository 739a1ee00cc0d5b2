package sluice_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
	"github.com/sluicehq/sluice/retry"
)

// TestDefaultsTable checks docs/defaults.md against the code: for every
// row, the library's default (the package's constant, or what a zero
// Options gives) and the gateway's (what config.Parse fills in for a route
// that leaves the field out) must both be the row's Default, and every
// default listed here must have its row.
func TestDefaultsTable(t *testing.T) {
	cfg, err := config.Parse("defaults.yaml", []byte(`
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
store: {redis: {}}
routes:
  - name: r
    upstream: a
    policies:
      rate_limit: {limit: 10}
      circuit_breaker: {}
      retry: {}
      concurrency: {adaptive: {}}
      hedge: {}
      fallback: {last_good: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Routes[0].Policies
	zeroJitter := retry.Options{}.Jitter
	burst := "= limit"
	if p.RateLimit.Burst != p.RateLimit.Limit {
		burst = strconv.Itoa(p.RateLimit.Burst)
	}
	d, err := ratelimit.NewMemory(ratelimit.MemoryOptions{}).AllowN(t.Context(), "k", ratelimit.Limit{Limit: 7, Period: time.Second}, 1)
	libBurst := "= limit"
	if err != nil || d.Limit != 7 {
		libBurst = "not the limit"
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	// gatewayOnly is a row with no library default ("—"): the gateway's
	// duration, written as the table writes it ("5m", not "5m0s").
	gatewayOnly := func(d time.Duration) [2]string {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = s[:len(s)-2]
		}
		if strings.HasSuffix(s, "h0m") {
			s = s[:len(s)-2]
		}
		return [2]string{s, s}
	}
	// YAML path → the library's default, the gateway's.
	code := map[string][2]string{
		"rate_limit.algorithm":                       {string(ratelimit.GCRA), p.RateLimit.Algorithm},
		"rate_limit.burst":                           {libBurst, burst},
		"rate_limit.key":                             {"ip", p.RateLimit.Key.String()}, // httpguard's default: TestMiddlewareDefaultKeyIsClientIP
		"store.max_keys":                             {strconv.Itoa(ratelimit.DefaultMaxKeys), strconv.Itoa(cfg.Store.MaxKeys)},
		"store.redis.timeout":                        {redisstore.DefaultTimeout.String(), cfg.Store.Redis.Timeout.D().String()},
		"circuit_breaker.failure_rate":               {f(breaker.DefaultFailureRate), f(p.CircuitBreaker.FailureRate)},
		"circuit_breaker.window.size":                {strconv.Itoa(breaker.DefaultCountWindow), p.CircuitBreaker.Window.Size},
		"circuit_breaker.min_calls":                  {strconv.Itoa(breaker.DefaultMinCalls), strconv.Itoa(p.CircuitBreaker.MinCalls)},
		"circuit_breaker.open_for":                   {breaker.DefaultOpenDuration.String(), p.CircuitBreaker.OpenFor.D().String()},
		"circuit_breaker.half_open_calls":            {strconv.Itoa(breaker.DefaultHalfOpenCalls), strconv.Itoa(p.CircuitBreaker.HalfOpenCalls)},
		"retry.attempts":                             {strconv.Itoa(retry.DefaultMaxAttempts), strconv.Itoa(p.Retry.Attempts)},
		"retry.backoff.initial":                      {retry.DefaultInitial.String(), p.Retry.Backoff.Initial.D().String()},
		"retry.backoff.max":                          {retry.DefaultMax.String(), p.Retry.Backoff.Max.D().String()},
		"retry.backoff.jitter":                       {zeroJitter.String(), p.Retry.Backoff.Jitter.String()},
		"retry.budget":                               {f(retry.DefaultRatio), f(p.Retry.Budget)},
		"concurrency.adaptive.algorithm":             {"default", p.Concurrency.Adaptive.Algorithm}, // chain.Builder.Adaptive: TestAdaptiveDefaultAlgorithm
		"concurrency.adaptive.initial":               {strconv.Itoa(limit.DefaultInitialLimit), strconv.Itoa(p.Concurrency.Adaptive.Initial)},
		"concurrency.adaptive.min":                   {strconv.Itoa(limit.DefaultMinLimit), strconv.Itoa(p.Concurrency.Adaptive.Min)},
		"concurrency.adaptive.max":                   {strconv.Itoa(limit.DefaultMaxLimit), strconv.Itoa(p.Concurrency.Adaptive.Max)},
		"concurrency.queue":                          {"0", strconv.Itoa(p.Concurrency.Queue)},
		"hedge.window":                               {strconv.Itoa(hedge.DefaultWindow), strconv.Itoa(p.Hedge.Window)},
		"fallback.last_good.max_entries":             {strconv.Itoa(fallback.DefaultMaxKeys), strconv.Itoa(p.Fallback.LastGood.MaxEntries)},
		"server.websocket_idle_timeout":              gatewayOnly(cfg.Server.WebSocketIdleTimeout.D()),
		"server.grpc_idle_timeout":                   gatewayOnly(cfg.Server.GRPCIdleTimeout.D()),
		"server.max_held_body_bytes":                 {strconv.Itoa(cfg.Server.MaxHeldBodyBytes), strconv.Itoa(cfg.Server.MaxHeldBodyBytes)},                                 // gateway only
		"server.max_connections":                     {strconv.Itoa(cfg.Server.MaxConnections), strconv.Itoa(cfg.Server.MaxConnections)},                                     // gateway only
		"server.max_connections_per_client":          {strconv.Itoa(cfg.Server.MaxConnectionsPerClient), strconv.Itoa(cfg.Server.MaxConnectionsPerClient)},                   // gateway only
		"server.http2.max_websockets_per_connection": {strconv.Itoa(cfg.Server.HTTP2.MaxWebSocketsPerConnection), strconv.Itoa(cfg.Server.HTTP2.MaxWebSocketsPerConnection)}, // gateway only
		"server.http2.loops":                         {strconv.FormatBool(cfg.Server.HTTP2.Loops), strconv.FormatBool(cfg.Server.HTTP2.Loops)},                               // gateway only
		"rate_limit.ipv6_prefix":                     {strconv.Itoa(p.RateLimit.IPv6Prefix), strconv.Itoa(p.RateLimit.IPv6Prefix)},                                           // gateway only
	}

	doc, err := os.ReadFile("docs/defaults.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 7 || !strings.HasPrefix(strings.TrimSpace(cells[3]), "`") {
			continue // not a row of the table
		}
		path := strings.Trim(strings.TrimSpace(cells[3]), "`")
		want := strings.Trim(strings.TrimSpace(cells[4]), "`")
		got, ok := code[path]
		if !ok {
			t.Errorf("docs/defaults.md: %s has no check in TestDefaultsTable", path)
			continue
		}
		seen[path] = true
		if got[0] != want || got[1] != want {
			t.Errorf("docs/defaults.md: %s is %q, but the library's default is %q and the gateway's %q", path, want, got[0], got[1])
		}
	}
	for path := range code {
		if !seen[path] {
			t.Errorf("docs/defaults.md has no row for %s", path)
		}
	}
}
