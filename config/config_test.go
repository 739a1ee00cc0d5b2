package config_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

func TestExampleConfigValidates(t *testing.T) {
	c, err := config.Load("../examples/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Routes[0]
	if r.Policies.RateLimit.Period.D() != time.Minute || r.Policies.CircuitBreaker.Window.Size != "10s" || r.Policies.CircuitBreaker.Window.Span.D() != 10*time.Second || r.Policies.Retry.On[1] != 502 {
		t.Fatalf("decoded wrongly: %+v", r.Policies)
	}
}

func TestDefaults(t *testing.T) {
	c, err := config.Parse("min.yaml", []byte(`
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: a
    policies:
      rate_limit: {limit: 10}
      circuit_breaker: {}
      retry: {}
      concurrency: {adaptive: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Routes[0].Policies
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", c.Listen, "127.0.0.1:8080"},
		{"admin", c.Admin.Listen, "127.0.0.1:9901"},
		{"store", c.Store.Kind, "memory"},
		{"store max keys", c.Store.MaxKeys, 1 << 20},
		{"balance", c.Upstreams["a"].Balance, "round_robin"},
		{"idle timeout", c.Upstreams["a"].IdleTimeout.D(), 4 * time.Second},
		{"connect timeout", c.Upstreams["a"].ConnectTimeout.D(), 5 * time.Second},
		{"response header timeout", c.Upstreams["a"].ResponseHeaderTimeout.D(), 60 * time.Second},
		{"write timeout", c.Server.WriteTimeout.D(), 60 * time.Second},
		{"prefix", c.Routes[0].Match.PathPrefix, "/"},
		{"rl algorithm", p.RateLimit.Algorithm, "gcra"},
		{"rl period", p.RateLimit.Period.D(), time.Second},
		{"rl burst", p.RateLimit.Burst, 10},
		{"rl key", p.RateLimit.Key, config.Source{Kind: config.SourceIP}},
		{"cb rate", p.CircuitBreaker.FailureRate, 0.5},
		{"cb window", p.CircuitBreaker.Window.Kind + "/" + p.CircuitBreaker.Window.Size, "count/100"},
		{"cb window calls", strconv.Itoa(p.CircuitBreaker.Window.Calls), "100"},
		{"cb open", p.CircuitBreaker.OpenFor.D(), 5 * time.Second},
		{"retry attempts", p.Retry.Attempts, 3},
		{"retry budget", p.Retry.Budget, 0.2},
		{"adaptive", p.Concurrency.Adaptive.Algorithm, "default"},
		{"adaptive initial", p.Concurrency.Adaptive.Initial, 20},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestEveryErrorReportedWithPosition(t *testing.T) {
	src := `listen: 127.0.0.1:8080
lisen: oops
upstreams:
  a:
    targets: ["ftp://x"]
    balance: random
routes:
  - name: r
    upstream: b
    policies:
      timeout: 5
      rate_limit: {limit: 0, algorithm: magic}
      retry: {attempts: "three"}
  - name: r
    upstream: a
`
	_, err := config.Parse("bad.yaml", []byte(src))
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("err = %v, want config.Errors", err)
	}
	// Decoding errors come first, then validation's, except about fields
	// that did not decode.
	want := []string{
		"bad.yaml:2:1: lisen: unknown field",
		`bad.yaml:11:16: routes[0].policies.timeout: a duration needs a unit: "5"`,
		`bad.yaml:13:25: routes[0].policies.retry.attempts: want a whole number, got "three"`,
		`bad.yaml:5:15: upstreams.a.targets[0]: want an http:// or https:// URL`,
		`bad.yaml:6:14: upstreams.a.balance: "random" is not one of`,
		`bad.yaml:9:15: routes[0].upstream: no upstream named "b"`,
		`bad.yaml:12:41: routes[0].policies.rate_limit.algorithm: "magic" is not one of`,
		`bad.yaml:12:27: routes[0].policies.rate_limit.limit: want a limit above 0`,
		`bad.yaml:14:11: routes[1].name: route name "r" is used twice`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i].Error(), w)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	src := `store: {max_keys: -1}
upstreams:
  a:
    targets: ["ftp://x"]
    balance: random
routes:
  - name: r
    upstream: b
    policies:
      rate_limit: {limit: 0, algorithm: magic}
      concurrency: {max: 3, adaptive: {}}
  - name: r
    upstream: a
    policies: {coalesce_vary: [X-Tenant, "X Tenant"]}
`
	_, err := config.Parse("bad.yaml", []byte(src))
	got := err.Error()
	for _, w := range []string{
		`bad.yaml:1:19: store.max_keys: want at least 1, got -1`,
		`bad.yaml:4:15: upstreams.a.targets[0]: want an http:// or https:// URL, got "ftp://x"`,
		`bad.yaml:5:14: upstreams.a.balance: "random" is not one of round_robin, least_inflight, p2c`,
		`bad.yaml:8:15: routes[0].upstream: no upstream named "b"`,
		`bad.yaml:10:41: routes[0].policies.rate_limit.algorithm: "magic" is not one of`,
		`bad.yaml:10:27: routes[0].policies.rate_limit.limit: want a limit above 0`,
		`bad.yaml:11:20: routes[0].policies.concurrency: give either max`,
		`bad.yaml:12:11: routes[1].name: route name "r" is used twice`,
		`bad.yaml:14:31: routes[1].policies.coalesce_vary: needs coalesce: true`,
		`bad.yaml:14:42: routes[1].policies.coalesce_vary[1]: want a header name, got "X Tenant"`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}

func TestEmptyAndMalformedFiles(t *testing.T) {
	for _, src := range []string{"", "a: [", "- 1\n- 2\n"} {
		if _, err := config.Parse("x.yaml", []byte(src)); err == nil {
			t.Errorf("Parse(%q) succeeded", src)
		}
	}
}

// TestRedisSentinel checks store.redis.sentinel: the master set name is
// kept, addrs are the Sentinels' (127.0.0.1:26379 by default), and a name
// with a space is refused.
func TestRedisSentinel(t *testing.T) {
	const routes = `
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: r, upstream: a}]
`
	tests := []struct {
		name, store string
		sentinel    string
		addrs       []string
	}{
		{"default addr", `{kind: redis, redis: {sentinel: mymaster}}`, "mymaster", []string{config.DefaultSentinelAddr}},
		{"addrs", `{kind: redis, redis: {sentinel: m1, addrs: ["10.0.0.1:26379", "10.0.0.2:26379"]}}`, "m1", []string{"10.0.0.1:26379", "10.0.0.2:26379"}},
		{"no sentinel", `{kind: redis}`, "", []string{config.DefaultRedisAddr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("s.yaml", []byte("store: "+tt.store+routes))
			if err != nil {
				t.Fatal(err)
			}
			r := c.Store.Redis
			if r.Sentinel != tt.sentinel || strings.Join(r.Addrs, ",") != strings.Join(tt.addrs, ",") {
				t.Errorf("sentinel %q, addrs %v; want %q, %v", r.Sentinel, r.Addrs, tt.sentinel, tt.addrs)
			}
		})
	}
	_, err := config.Parse("s.yaml", []byte(`store: {kind: redis, redis: {sentinel: "my master"}}`+routes))
	if want := `s.yaml:1:40: store.redis.sentinel: a master set name has no spaces, got "my master"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestNegativeTimeouts(t *testing.T) {
	src := `server: {write_timeout: -1s}
upstreams:
  a: {targets: ["http://x:1"], connect_timeout: -1s, response_header_timeout: -1s}
routes:
  - {name: r, upstream: a}
`
	_, err := config.Parse("neg.yaml", []byte(src))
	if err == nil {
		t.Fatal("negative timeouts accepted")
	}
	for _, w := range []string{"server.write_timeout: a duration cannot be negative", "upstreams.a.connect_timeout: a duration cannot be negative",
		"upstreams.a.response_header_timeout: a duration cannot be negative"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
}

// TestRouteRules checks that a route's rewrite and header rules decode, and
// that every bad one is reported at its YAML path.
func TestRouteRules(t *testing.T) {
	good := `upstreams: {a: {targets: ["http://x:1"]}}
routes:
  - name: r
    upstream: a
    rewrite: {strip_prefix: /v1, add_prefix: /api}
    headers:
      request: {set: {X-Env: prod}, add: {X-Tag: a}, remove: [Cookie]}
      response: {remove: [Server]}
    preserve_host: true
`
	c, err := config.Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Routes[0]
	if r.Rewrite.StripPrefix != "/v1" || r.Rewrite.AddPrefix != "/api" || r.Headers.Request.Set["X-Env"] != "prod" ||
		r.Headers.Request.Add["X-Tag"] != "a" || r.Headers.Request.Remove[0] != "Cookie" || r.Headers.Response.Remove[0] != "Server" || !r.PreserveHost {
		t.Errorf("decoded %+v %+v %+v", r.Rewrite, r.Headers, r.PreserveHost)
	}
	bad := `upstreams: {a: {targets: ["http://x:1"]}}
routes:
  - name: r
    upstream: a
    rewrite: {strip_prefix: v1/, add_prefix: "/a b"}
    headers:
      request: {set: {"X Bad": v, X-Ok: "a\r\nInjected: 1"}, add: {content-length: "1"}, remove: [Transfer-Encoding, Host]}
      response: {set: {Connection: close}, remove: [X-Fine, "Bad:", date]}
`
	_, err = config.Parse("bad.yaml", []byte(bad))
	if err == nil {
		t.Fatal("bad rules accepted")
	}
	for _, w := range []string{
		`routes[0].rewrite.strip_prefix: want a path such as /v1`,
		`routes[0].rewrite.add_prefix: want a path such as /v1`,
		`routes[0].headers.request.set.X Bad: "X Bad" is not a header name`,
		`routes[0].headers.request.set.X-Ok: a header value has no control characters`,
		`routes[0].headers.request.add.content-length: content-length is a framing or hop-by-hop header`,
		`routes[0].headers.request.remove[0]: Transfer-Encoding is a framing or hop-by-hop header`,
		`routes[0].headers.request.remove[1]: Host is a framing or hop-by-hop header`,
		`routes[0].headers.response.set.Connection: Connection is a framing or hop-by-hop header`,
		`routes[0].headers.response.remove[1]: "Bad:" is not a header name`,
		`routes[0].headers.response.remove[2]: a response's Date is the gateway's`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "X-Fine") {
		t.Errorf("a good name reported:\n%v", err)
	}
}

// TestRetryOnDecodedOnce checks that retry.on is decoded into typed values
// by the config package (the gateway never parses its strings), and that a
// bad entry is reported at its own position.
func TestRetryOnDecodedOnce(t *testing.T) {
	const head = "upstreams: {a: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{name: r, upstream: a, policies: {retry: {on: "
	cfg, err := config.Parse("c.yaml", []byte(head+"[timeout, connect_error, 429]}}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Routes[0].Policies.Retry.On, []config.RetryOn{config.RetryTimeout, config.RetryConnectError, 429}; !slices.Equal(got, want) {
		t.Errorf("on = %v, want %v", got, want)
	}
	for _, bad := range []string{"600", "99", "reset", "5o3", "-1"} {
		src := head + "[connect_error, " + bad + "]}}}]\n"
		_, err := config.Parse("c.yaml", []byte(src))
		col := strings.LastIndex(src, bad) - strings.LastIndex(src, "\n"+"routes")
		want := fmt.Sprintf("c.yaml:2:%d: routes[0].policies.retry.on[1]: want connect_error, timeout or a status code, got %q", col, bad)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("on: [connect_error, %s]: error %v, want %s", bad, err, want)
		}
	}
}

// TestSourcesDecodedOnce checks that rate_limit.key and priority.from are
// decoded into Sources by the config package (the gateway reads no
// "header:" prefix), with their defaults and their text.
func TestSourcesDecodedOnce(t *testing.T) {
	const head = "upstreams: {a: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{name: r, upstream: a, policies: {concurrency: {adaptive: {}}, "
	header := func(name string) config.Source { return config.Source{Kind: config.SourceHeader, Header: name} }
	for _, tt := range []struct {
		yaml      string
		key, from config.Source
		text      string // the key's, then the class's
	}{
		{"rate_limit: {limit: 1}, priority: {}", config.Source{Kind: config.SourceIP}, config.Source{Kind: config.SourceRoute}, "ip route"},
		{"rate_limit: {limit: 1, key: route}, priority: {from: route}", config.Source{Kind: config.SourceRoute}, config.Source{Kind: config.SourceRoute}, "route route"},
		{`rate_limit: {limit: 1, key: "header:X-Api-Key"}, priority: {from: "header:X-Tier"}`, header("X-Api-Key"), header("X-Tier"), "header:X-Api-Key header:X-Tier"},
	} {
		cfg, err := config.Parse("c.yaml", []byte(head+tt.yaml+"}}]\n"))
		if err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		p := cfg.Routes[0].Policies
		if p.RateLimit.Key != tt.key || p.Priority.From != tt.from || p.RateLimit.Key.String()+" "+p.Priority.From.String() != tt.text {
			t.Errorf("%s: key %+v, from %+v; want %+v, %+v (%s)", tt.yaml, p.RateLimit.Key, p.Priority.From, tt.key, tt.from, tt.text)
		}
	}
}
