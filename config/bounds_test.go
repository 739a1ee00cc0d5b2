package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// base is a valid configuration; each case of TestRefused adds a line or
// a mapping to it at the end. Its last line is line 4.
const base = `upstreams:
  a: {targets: ["http://127.0.0.1:1"]}
routes:
  - {name: r, upstream: a}
`

// route is base with the route's policies (or match) given on line 5.
const route = `upstreams:
  a: {targets: ["http://127.0.0.1:1"]}
routes:
  - name: r
    upstream: a
`

// TestRefused checks values that were accepted without a word (and then
// spun a core, were silently replaced, or were refused only by serve):
// each is an error at the value's line and column that names the field.
func TestRefused(t *testing.T) {
	tests := []struct {
		name, src string
		key       string // the YAML key whose value is at fault (its last one in src)
		want      string // the error after file:line:col
	}{
		// Durations out of their bounds.
		{"health interval 1ns", `upstreams:
  a: {targets: ["http://127.0.0.1:1"], health: {path: /h, interval: 1ns}}
routes: [{name: r, upstream: a}]
`, `interval`, `upstreams.a.health.interval: want a duration between 100ms and 24h, got 1ns`},
		{"health interval 0s", `upstreams:
  a: {targets: ["http://127.0.0.1:1"], health: {path: /h, interval: 0s}}
routes: [{name: r, upstream: a}]
`, `interval`, `upstreams.a.health.interval: want a duration between 100ms and 24h, got 0s`},
		{"health timeout", `upstreams:
  a: {targets: ["http://127.0.0.1:1"], health: {path: /h, timeout: 25h}}
routes: [{name: r, upstream: a}]
`, `timeout`, `upstreams.a.health.timeout: want a duration between 1ms and 24h, got 25h`},
		{"upstream idle timeout 0s", `upstreams:
  a: {targets: ["http://127.0.0.1:1"], idle_timeout: 0s}
routes: [{name: r, upstream: a}]
`, `idle_timeout`, `upstreams.a.idle_timeout: want a duration between 1ms and 24h, got 0s`},
		{"redis timeout", base + "store: {redis: {timeout: 2m}}\n", `timeout`, `store.redis.timeout: want a duration between 1ms and 1m, got 2m`},
		{"redis on_error", base + "store: {redis: {on_error: maybe}}\n", `on_error`, `store.redis.on_error: "maybe" is not one of open, closed, local`},
		{"redis on_error not a string", base + "store: {redis: {on_error: [open]}}\n", `on_error`, `store.redis.on_error: want a string, got a list`},
		{"read timeout 0s", base + "server: {read_timeout: 0s}\n", `read_timeout`, `server.read_timeout: want a duration between 1ms and 24h, got 0s`},
		{"read header timeout 1ns", base + "server: {read_header_timeout: 1ns}\n", `read_header_timeout`, `server.read_header_timeout: want a duration between 1ms and 24h, got 1ns`},
		{"idle timeout", base + "server: {idle_timeout: 1000h}\n", `idle_timeout`, `server.idle_timeout: want a duration between 1ms and 24h, got 1000h`},
		{"shutdown timeout 0s", base + "server: {shutdown_timeout: 0s}\n", `shutdown_timeout`, `server.shutdown_timeout: want a duration between 1ms and 24h, got 0s`},
		{"route timeout", route + "    policies: {timeout: 1ns}\n", `timeout`, `routes[0].policies.timeout: want a duration between 1ms and 24h, got 1ns`},
		{"max wait", route + "    policies: {concurrency: {max: 1, max_wait: 1ns}}\n", `max_wait`, `routes[0].policies.concurrency.max_wait: want a duration between 1ms and 24h`},
		{"open for 0s", route + "    policies: {circuit_breaker: {open_for: 0s}}\n", `open_for`, `routes[0].policies.circuit_breaker.open_for: want a duration between 1ms and 24h, got 0s`},
		{"slow call threshold", route + "    policies: {circuit_breaker: {slow_call: {threshold: 1ns}}}\n", `threshold`, `routes[0].policies.circuit_breaker.slow_call.threshold: want a duration between 1ms and 24h`},
		{"time window 1ns", route + "    policies: {circuit_breaker: {window: {kind: time, size: 1ns}}}\n", `size`, `routes[0].policies.circuit_breaker.window.size: a time window's size is a duration between 1s and 24h, got "1ns"`},
		{"backoff initial 0s", route + "    policies: {retry: {backoff: {initial: 0s}}}\n", `initial`, `routes[0].policies.retry.backoff.initial: want a duration between 1ns and 24h, got 0s`},
		{"backoff max", route + "    policies: {retry: {backoff: {max: 48h}}}\n", `max`, `routes[0].policies.retry.backoff.max: want a duration between 1ns and 24h, got 48h`},

		// Explicit zeros are judged, not replaced by the default.
		{"period 0s", route + "    policies: {rate_limit: {limit: 5, period: 0s}}\n", `period`, `routes[0].policies.rate_limit.period: want a period of at least 1ms, got 0s`},
		{"burst 0", route + "    policies: {rate_limit: {limit: 5, burst: 0}}\n", `burst`, `routes[0].policies.rate_limit.burst: want a burst of at least 1, got 0`},
		{"budget 0", route + "    policies: {retry: {budget: 0}}\n", `budget`, `routes[0].policies.retry.budget: want a fraction in (0, 1], got 0`},
		{"retry on []", route + "    policies: {retry: {on: []}}\n", `on`, `routes[0].policies.retry.on: want at least one of`},
		{"attempts 0", route + "    policies: {retry: {attempts: 0}}\n", `attempts`, `routes[0].policies.retry.attempts: want between 1 and 100 attempts, got 0`},
		{"min calls 0", route + "    policies: {circuit_breaker: {min_calls: 0}}\n", `min_calls`, `routes[0].policies.circuit_breaker.min_calls: want at least 1, got 0`},
		{"failure rate 0 alone", route + "    policies: {circuit_breaker: {failure_rate: 0}}\n", `failure_rate`, `routes[0].policies.circuit_breaker.failure_rate: the breaker could never open`},
		{"adaptive min 0", route + "    policies: {concurrency: {adaptive: {min: 0}}}\n", `adaptive`, `routes[0].policies.concurrency.adaptive: want 1 <= min <= initial <= max, got min 0`},
		{"sample 0", base + "log: {sample: 0}\n", `sample`, `log.sample: want a fraction in (0, 1], got 0`},
		{"path prefix empty", route + "    match: {path_prefix: \"\"}\n", `path_prefix`, `routes[0].match.path_prefix: want a path starting with /, got ""`},
		// A route's rate-limit keys are "name|ip|...", "name|h|..." or the
		// name alone: a '|' in a name would let one route's key be
		// another's ("a|h|x" with key: route is route a's key header x).
		{"route name with '|'", base + "  - {name: \"a|h|x\", upstream: a}\n", `name`, `routes[1].name: a route name has no '|'`},
		// {prefix:key}: a ':' would let two prefixes share keys.
		{"redis prefix with ':'", base + "store: {redis: {prefix: \"a:b\"}}\n", `prefix`, `store.redis.prefix: a key prefix has no ':', '{' or '}'`},
		{"redis prefix with a brace", base + "store: {redis: {prefix: \"a}\"}}\n", `prefix`, `store.redis.prefix: a key prefix has no ':', '{' or '}'`},
		{"redis addrs []", base + "store: {redis: {addrs: []}}\n", `addrs`, `store.redis.addrs: want at least one host:port`},
		{"algorithm empty", route + "    policies: {rate_limit: {limit: 5, algorithm: \"\"}}\n", `algorithm`, `routes[0].policies.rate_limit.algorithm: "" is not one of`},
		{"fallback content type empty", route + "    policies: {fallback: {content_type: \"\"}}\n", `content_type`, `routes[0].policies.fallback.content_type: want a media type`},

		// Values serve refused, or that would allocate without bound.
		{"period beyond the horizon", route + "    policies: {rate_limit: {limit: 1, burst: 10, period: 200000h}}\n", `period`, `routes[0].policies.rate_limit.period: limit 1 per 200000h with burst 10 cannot be kept: Period 200000h0m0s with capacity 10 reaches beyond 73 years`},
		{"count window huge", route + "    policies: {circuit_breaker: {window: {size: 1000000000}}}\n", `size`, `routes[0].policies.circuit_breaker.window.size: a count window's size is a number of calls from 1 to 100000`},
		{"min calls above the window", route + "    policies: {circuit_breaker: {min_calls: 50, window: {size: 10}}}\n", `min_calls`, `routes[0].policies.circuit_breaker.min_calls: min_calls 50 exceeds the window's 10 calls`},
		{"attempts huge", route + "    policies: {retry: {attempts: 100000}}\n", `attempts`, `routes[0].policies.retry.attempts: want between 1 and 100 attempts, got 100000`},
		{"fallback 1xx", route + "    policies: {fallback: {status: 101}}\n", `status`, `routes[0].policies.fallback.status: want a final status code (200 to 599), got 101`},

		// The admin API off loopback needs a token.
		{"admin on all interfaces", base + "admin: {listen: \":9901\"}\n", `listen`, `admin.listen: an admin listener on a non-loopback address needs admin.token`},
		{"admin on 0.0.0.0", base + "admin: {listen: 0.0.0.0:9901}\n", `listen`, `admin.listen: an admin listener on a non-loopback address needs admin.token`},
		{"admin on [::]", base + "admin: {listen: \"[::]:9901\"}\n", `listen`, `admin.listen: an admin listener on a non-loopback address needs admin.token`},
		{"admin on a name", base + "admin: {listen: \"admin.internal:9901\"}\n", `listen`, `admin.listen: an admin listener on a non-loopback address needs admin.token`},
		{"admin token with a space", base + "admin: {token: \"a b\"}\n", `token`, `admin.token: a bearer token has only`},

		// Header names are RFC 9110 tokens; host names have no spaces,
		// control characters or ports.
		{"match header name with a space", route + "    match: {headers: {\"X Bad\": v}}\n", `"X Bad"`, `routes[0].match.headers.X Bad: "X Bad" is not a header name`},
		{"match header name with a colon", route + "    match: {headers: {\"X:Y\": v}}\n", `"X:Y"`, `routes[0].match.headers.X:Y: "X:Y" is not a header name`},
		{"match header value with a comma", route + "    match: {headers: {X-Tier: \"small, big\"}}\n", `X-Tier`, `routes[0].match.headers.X-Tier: a comma makes X-Tier a list`},
		{"match header value with CR LF", route + "    match: {headers: {X-A: \"a\\r\\nB: c\"}}\n", `X-A`, `routes[0].match.headers.X-A: a header value has no control characters`},
		{"retry jitter", route + "    policies: {retry: {backoff: {jitter: half}}}\n", `jitter`, `routes[0].policies.retry.backoff.jitter: "half" is not one of full, equal, none`},
		{"rate-limit key header with a space", route + "    policies: {rate_limit: {limit: 1, key: \"header:X Key\"}}\n", `key`, `routes[0].policies.rate_limit.key: "X Key" is not a header name`},
		{"rate-limit key header with many separators", route + "    policies: {rate_limit: {limit: 1, key: \"header:A-b-c-d-e-f-g-h-i_j\"}}\n", `key`, `routes[0].policies.rate_limit.key: "A-b-c-d-e-f-g-h-i_j" has more than 8 '-' or '_'`},
		{"rate-limit IPv6 prefix", route + "    policies: {rate_limit: {limit: 1, ipv6_prefix: 16}}\n", `ipv6_prefix`, `routes[0].policies.rate_limit.ipv6_prefix: want a prefix length from 32 to 128, got 16`},
		{"match header with many separators", route + "    match: {headers: {A-b-c-d-e-f-g-h-i_j: v}}\n", `A-b-c-d-e-f-g-h-i_j`, `routes[0].match.headers.A-b-c-d-e-f-g-h-i_j: "A-b-c-d-e-f-g-h-i_j" has more than 8 '-' or '_'`},
		{"rate-limit key header with CR LF", route + "    policies: {rate_limit: {limit: 1, key: \"header:X\\r\\nY\"}}\n", `key`, `routes[0].policies.rate_limit.key: "X\r\nY" is not a header name`},
		{"host with CR LF", route + "    match: {host: \"a.example\\r\\nX: y\"}\n", `host`, `routes[0].match.host: a host name has no spaces or control characters`},
		{"host with a space", route + "    match: {host: \"a example\"}\n", `host`, `routes[0].match.host: a host name has no spaces or control characters`},
		{"host with a port", route + "    match: {host: \"example.com:8080\"}\n", `host`, `routes[0].match.host: the host is matched without the request's port`},
		{"host IPv6 without brackets", route + "    match: {host: \"::1\"}\n", `host`, `routes[0].match.host: an IPv6 address is written in brackets`},
		{"host wildcard", route + "    match: {host: \"*.example.com\"}\n", `host`, `routes[0].match.host: a host name has only letters, digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.src)
			}
			want := valuePos(t, tt.src, tt.key) + tt.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n%v\nwant it to begin with\n%s", err, want)
			}
		})
	}
}

// valuePos returns "c.yaml:line:col: " of the value of the last key in src.
func valuePos(t *testing.T, src, key string) string {
	t.Helper()
	i := strings.LastIndex(src, key+": ")
	if i < 0 {
		t.Fatalf("no key %s in:\n%s", key, src)
	}
	i += len(key) + 2
	line := strings.Count(src[:i], "\n") + 1
	col := i - strings.LastIndex(src[:i], "\n")
	return fmt.Sprintf("c.yaml:%d:%d: ", line, col)
}

// TestAccepted checks the values next to the refused ones: bounds are
// inclusive, a field that is absent or null gets its default, and loopback
// admin listeners need no token.
func TestAccepted(t *testing.T) {
	for _, src := range []string{
		`upstreams:
  a: {targets: ["http://127.0.0.1:1"], health: {path: /h, interval: 100ms, timeout: 1ms}}
routes: [{name: r, upstream: a}]
`,
		base + "server: {read_timeout: 24h, shutdown_timeout: 1ms}\n",
		base + "admin: {listen: \"localhost:9901\"}\n",
		base + "admin: {listen: \"127.0.0.2:9901\"}\n",
		base + "admin: {listen: \"[::1]:9901\"}\n",
		base + "admin: {listen: \"0.0.0.0:9901\", token: \"abc-DEF_1.2~3+4/5==\"}\n",
		base + "admin: {listen: \"off\"}\n",
		route + "    match: {host: Example.COM, headers: {\"X-Api_Key!#$%&'*+.^`|~\": \"a value\\twith tab\"}}\n",
		route + "    match: {host: \"[::1]\"}\n",
		route + "    match: {host: 10.0.0.1}\n",
		route + "    policies: {rate_limit: {limit: 1, period: 1ms, key: \"header:X-API-Key\"}}\n",
		route + "    policies: {rate_limit: {limit: 1, burst: 1, period: 100000h}}\n",
		route + "    policies: {circuit_breaker: {window: {size: 100000}, failure_rate: 0, consecutive_failures: 3}}\n",
		route + "    policies: {circuit_breaker: {window: {size: 5}}, retry: {attempts: 100}, timeout: 0s}\n",
		route + "    policies: {fallback: {status: 200}}\n",
		route + "    policies: {retry: {backoff: {initial: 1ns, max: 1ns}}}\n",
	} {
		if _, err := config.Parse("c.yaml", []byte(src)); err != nil {
			t.Errorf("refused:\n%s\n%v", src, err)
		}
	}
	c, err := config.Parse("c.yaml", []byte(route+"    policies: {rate_limit: {limit: 5, period: null, burst: ~}, circuit_breaker: {window: {size: 10}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Routes[0].Policies
	if p.RateLimit.Period.D().String() != "1s" || p.RateLimit.Burst != 5 {
		t.Errorf("null period and burst: %v, %d; want the defaults 1s and 5", p.RateLimit.Period.D(), p.RateLimit.Burst)
	}
	if p.CircuitBreaker.MinCalls != 10 {
		t.Errorf("min_calls of a 10-call window = %d, want 10 (the default 20, capped at the window)", p.CircuitBreaker.MinCalls)
	}
}

// TestSyntaxErrorPosition checks that a YAML syntax error names the line
// and column where the parser stopped, and where the construct it was in
// began.
func TestSyntaxErrorPosition(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"key: [unclosed", `s.yaml:1:6: invalid YAML: did not find expected ',' or ']' before the end of the file (while parsing a flow sequence that starts here)`},
		{"routes:\n  - name: r\n upstream: a\n", `s.yaml:3:2: invalid YAML: did not find expected key (while parsing a block mapping started at 1:1)`},
		{"a: b: c\n", `s.yaml:1:5: invalid YAML: mapping values are not allowed in this context`},
		{"listen: \"x\n", `s.yaml:1:9: invalid YAML: found unexpected end of stream (while scanning a quoted scalar that starts here)`},
	} {
		_, err := config.Parse("s.yaml", []byte(tt.src))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) = %v\nwant %s", tt.src, err, tt.want)
		}
	}
}
