package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gateway"
)

// TestRateLimit429 checks, for every algorithm, that the limit admits
// exactly its quota, then answers 429 with Retry-After, RateLimit-Policy,
// RateLimit and a JSON body, without calling the upstream; and that waiting
// Retry-After (on the fake clock) admits again.
func TestRateLimit429(t *testing.T) {
	for _, alg := range []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window", "sliding_log"} {
		t.Run(alg, func(t *testing.T) {
			up := startUpstream(t, "up", nil)
			gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: rl
    upstream: up
    policies:
      rate_limit: {algorithm: %s, limit: 3, period: 1m}
`, up.URL, alg))
			c := newClient(t)
			for i := range 3 {
				r := get(t, c, gw.URL+"/")
				if r.Code != 200 {
					t.Fatalf("request %d: status %d, want 200 (body %q)", i, r.Code, r.Body)
				}
				if got, want := r.Header.Get("RateLimit-Policy"), `"rl";q=3;w=60`; got != want {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, want)
				}
				if got, want := r.Header.Get("RateLimit"), fmt.Sprintf(`"rl";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
					t.Errorf("request %d: RateLimit %q, want prefix %q", i, got, want)
				}
			}
			r := get(t, c, gw.URL+"/")
			if r.Code != http.StatusTooManyRequests {
				t.Fatalf("4th request: status %d, want 429", r.Code)
			}
			if n := up.calls.Load(); n != 3 {
				t.Errorf("upstream got %d calls, want 3: a rejected request reached it", n)
			}
			ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > 120 {
				t.Fatalf("Retry-After %q, want whole seconds in [1, 120]", r.Header.Get("Retry-After"))
			}
			e := r.errorBody(t)
			if e.Error != "rate_limited" || e.RetryAfter != ra {
				t.Errorf("body %q, want rate_limited with retry_after %d", r.Body, ra)
			}
			if got := r.Header.Get("RateLimit-Policy"); got != `"rl";q=3;w=60` {
				t.Errorf("429: RateLimit-Policy %q", got)
			}
			if got := r.Header.Get("RateLimit"); !regexp.MustCompile(`^"rl";r=0;t=[1-9][0-9]*$`).MatchString(got) {
				t.Errorf("429: RateLimit %q, want r=0 and t>0", got)
			}
			gw.Clock.Advance(time.Duration(ra) * time.Second)
			if r := get(t, c, gw.URL+"/"); r.Code != 200 {
				t.Errorf("after waiting Retry-After (%ds): status %d, want 200", ra, r.Code)
			}
		})
	}
}

// TestRateLimitKeys checks key: header:NAME and key: route.
func TestRateLimitKeys(t *testing.T) {
	up := startUpstream(t, "up", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: by-key
    match: {path_prefix: /key}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: "header:X-API-Key"}
  - name: whole
    match: {path_prefix: /route}
    upstream: up
    policies:
      rate_limit: {limit: 2, period: 1h, key: route}
`, up.URL))
	c := newClient(t)
	steps := []struct {
		path, key string
		code      int
	}{
		{"/key", "a", 200}, {"/key", "a", 429}, {"/key", "b", 200}, {"/key", "", 200}, {"/key", "", 429},
		{"/route", "a", 200}, {"/route", "b", 200}, {"/route", "c", 429},
	}
	for i, s := range steps {
		h := http.Header{}
		if s.key != "" {
			h.Set("X-API-Key", s.key)
		}
		if r := do(t, c, "GET", gw.URL+s.path, h, nil); r.Code != s.code {
			t.Errorf("step %d (%s key %q): status %d, want %d", i, s.path, s.key, r.Code, s.code)
		}
	}
}

// TestBreakerOpensAndRecovers fails an upstream until the route's breaker
// opens: then requests get 503 circuit_open with Retry-After and the upstream
// is not called; once open_for has passed on the fake clock, a probe to the
// recovered upstream closes it.
func TestBreakerOpensAndRecovers(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "fine")
	})
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: cb
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 3, open_for: 10s, half_open_calls: 1}
`, up.URL))
	c := newClient(t)
	for i := range 3 {
		r := get(t, c, gw.URL+"/")
		if r.Code != 500 || !strings.Contains(r.Body, "boom") {
			t.Fatalf("failure %d: %d %q, want the upstream's 500", i, r.Code, r.Body)
		}
	}
	if s := gw.routeStatus(t, "cb").Breaker; s != "open" {
		t.Fatalf("breaker %q after 3 failures, want open", s)
	}
	for i := range 5 {
		r := get(t, c, gw.URL+"/")
		if r.Code != 503 {
			t.Fatalf("open breaker, request %d: status %d, want 503", i, r.Code)
		}
		if e := r.errorBody(t); e.Error != "circuit_open" {
			t.Fatalf("open breaker: body %q", r.Body)
		}
		if ra := r.Header.Get("Retry-After"); ra != "10" {
			t.Errorf("open breaker: Retry-After %q, want 10", ra)
		}
	}
	if n := up.calls.Load(); n != 3 {
		t.Fatalf("upstream got %d calls, want 3: the open breaker let requests through", n)
	}
	failing.Store(false)
	gw.Clock.Advance(9 * time.Second)
	if r := get(t, c, gw.URL+"/"); r.Code != 503 {
		t.Fatalf("1s before open_for ends: status %d, want 503", r.Code)
	}
	gw.Clock.Advance(time.Second)
	for i := range 3 {
		if r := get(t, c, gw.URL+"/"); r.Code != 200 || r.Body != "fine" {
			t.Fatalf("after open_for, request %d: %d %q, want 200", i, r.Code, r.Body)
		}
	}
	if s := gw.routeStatus(t, "cb").Breaker; s != "closed" {
		t.Fatalf("breaker %q after a good probe, want closed", s)
	}
	if m := gw.metricsText(t); !strings.Contains(m, `sluice_breaker_transitions_total{route="cb",to="open"} 1`) {
		t.Errorf("metrics lack the breaker's transition to open:\n%s", grepLines(m, "sluice_breaker"))
	}
}

// TestPassiveHealth checks the per-target breaker: a target that keeps
// failing is taken out, and the other target of the pool serves.
func TestPassiveHealth(t *testing.T) {
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad", http.StatusBadGateway)
	})
	good := startUpstream(t, "good", nil)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s", "%s"]}
routes:
  - {name: all, upstream: up}
`, bad.URL, good.URL))
	c := newClient(t)
	for range 20 {
		get(t, c, gw.URL+"/")
	}
	if n := bad.calls.Load(); n != 5 {
		t.Errorf("the failing target got %d calls, want 5 (then its breaker opens)", n)
	}
	for i := range 10 {
		if r := get(t, c, gw.URL+"/"); r.Code != 200 {
			t.Fatalf("request %d: %d, want 200 from the healthy target", i, r.Code)
		}
	}
	var st gateway.TargetStatus
	for _, u := range gw.Status().Upstreams {
		for _, ts := range u.Targets {
			if ts.URL == bad.URL {
				st = ts
			}
		}
	}
	if st.Breaker != "open" {
		t.Errorf("failing target's breaker %q in /status, want open", st.Breaker)
	}
}

// TestAdaptiveLimitFallsWhenUpstreamSlows makes every call take 6s on the
// fake clock (the upstream advances it while it answers): the AIMD limit
// falls to its minimum, and requests beyond it get 503 overloaded at once.
func TestAdaptiveLimitFallsWhenUpstreamSlows(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	var slow atomic.Bool
	g := newGate(4)
	var held atomic.Bool
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if held.Load() {
			g.wait(r)
		}
		if slow.Load() {
			fc.Advance(6 * time.Second)
		} else {
			fc.Advance(time.Millisecond)
		}
		fmt.Fprint(w, "ok")
	})
	gw := startGatewayClock(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: ai
    upstream: up
    policies:
      concurrency: {adaptive: {algorithm: aimd, min: 2, initial: 4, max: 8}}
`, up.URL), fc)
	c := newClient(t)
	for range 10 {
		if r := get(t, c, gw.URL+"/"); r.Code != 200 {
			t.Fatalf("fast: status %d", r.Code)
		}
	}
	if l := gw.routeStatus(t, "ai").ConcurrencyLimit; l != 4 {
		t.Fatalf("limit %d after fast calls, want it to stay at 4", l)
	}
	slow.Store(true)
	for range 10 {
		if r := get(t, c, gw.URL+"/"); r.Code != 200 {
			t.Fatalf("slow: status %d", r.Code)
		}
	}
	if l := gw.routeStatus(t, "ai").ConcurrencyLimit; l != 2 {
		t.Fatalf("limit %d after slow calls, want the minimum 2", l)
	}
	if m := gw.metricsText(t); !strings.Contains(m, `sluice_concurrency_limit{route="ai"} 2`) {
		t.Errorf("metrics do not show the fallen limit:\n%s", grepLines(m, "sluice_concurrency_limit"))
	}
	// Two requests in flight fill the limit; a third is shed.
	slow.Store(false)
	held.Store(true)
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			r, err := tryDo(c, "GET", gw.URL+"/", nil, nil)
			if err != nil {
				t.Error(err)
			}
			codes <- r.Code
		})
	}
	g.awaitArrivals(t, 2)
	r := get(t, c, gw.URL+"/")
	g.open()
	wg.Wait()
	if r.Code != 503 || r.errorBody(t).Error != "overloaded" {
		t.Errorf("beyond the limit: %d %q, want 503 overloaded", r.Code, r.Body)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("overloaded 503 without Retry-After")
	}
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("request within the limit: %d", code)
		}
	}
}

// TestBulkheadOverload checks a static concurrency limit: with max 2 and no
// queue, a third concurrent request gets 503 overloaded with Retry-After.
func TestBulkheadOverload(t *testing.T) {
	g := newGate(2)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { g.wait(r) })
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: bh
    upstream: up
    policies:
      concurrency: {max: 2}
`, up.URL))
	c := newClient(t)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if r, err := tryDo(c, "GET", gw.URL+"/", nil, nil); err != nil || r.Code != 200 {
				t.Errorf("request within the limit: %v %d", err, r.Code)
			}
		})
	}
	g.awaitArrivals(t, 2)
	if s := gw.routeStatus(t, "bh"); s.ConcurrencyInFlight != 2 || s.ConcurrencyLimit != 2 {
		t.Errorf("status: in flight %d of %d, want 2 of 2", s.ConcurrencyInFlight, s.ConcurrencyLimit)
	}
	r := get(t, c, gw.URL+"/")
	g.open()
	wg.Wait()
	if r.Code != 503 || r.errorBody(t).Error != "overloaded" {
		t.Fatalf("third request: %d %q, want 503 overloaded", r.Code, r.Body)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("overloaded 503 without Retry-After")
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("upstream got %d calls, want 2", n)
	}
}

// TestCoalescing sends identical GETs at once: they share one upstream call.
// Requests that differ (path, Authorization, method) do not.
func TestCoalescing(t *testing.T) {
	const n = 16
	g := newGate(n)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			g.wait(r)
		}
		w.Header().Set("X-Answer", "42")
		fmt.Fprintf(w, "answer for %s %s", r.Method, r.URL.Path)
	})
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: co
    upstream: up
    policies: {coalesce: true}
`, up.URL))
	c := newClient(t)
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := tryDo(c, "GET", gw.URL+"/same", nil, nil)
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	g.awaitArrivals(t, 1)
	eventually(t, "every request to join the call under way", func() bool {
		return gateway.CoalesceShared(gw.Gateway, "co") == n-1
	})
	g.open()
	wg.Wait()
	close(results)
	for r := range results {
		if r.Code != 200 || r.Body != "answer for GET /same" || r.Header.Get("X-Answer") != "42" ||
			r.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("coalesced response: %d %q %v", r.Code, r.Body, r.Header)
		}
	}
	if got := up.calls.Load(); got != 1 {
		t.Fatalf("%d identical concurrent requests made %d upstream calls, want 1", n, got)
	}
	// Requests that are not identical are never merged (these run one after
	// the other, so they could not be anyway; they check the answers).
	for _, tt := range []struct {
		method, path string
		header       http.Header
	}{
		{"GET", "/a", nil}, {"GET", "/b", nil}, {"POST", "/a", nil}, {"GET", "/a", http.Header{"Authorization": {"Bearer x"}}},
	} {
		r := do(t, c, tt.method, gw.URL+tt.path, tt.header, nil)
		if want := "answer for " + tt.method + " " + tt.path; r.Code != 200 || r.Body != want {
			t.Errorf("%s %s: %d %q, want %q", tt.method, tt.path, r.Code, r.Body, want)
		}
	}
}

// pumpClock advances fc by step whenever something waits on it (retry
// backoffs), until the test ends.
func pumpClock(t *testing.T, fc *clock.Fake, step time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for fc.BlockUntil(ctx, 1) == nil {
			fc.Advance(step)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestRetriesStayInsideBudget sends requests to an upstream that fails
// every other call: each request would like a retry, and the retries made
// stay within budget·requests plus the budget's floor of 10 retries a
// second over its 10 s window.
func TestRetriesStayInsideBudget(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var calls atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1)%2 == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		gw := startRetrying(t, engine, fmt.Sprintf(`{targets: ["%s"]}`, up.URL), `{attempts: 3, on: [503], budget: 0.2, backoff: {initial: 1ns, max: 1ns, jitter: none}}`)
		c := newClient(t)
		const requests = 600
		ok := 0
		for range requests {
			r := get(t, c, gw.URL+"/")
			switch r.Code {
			case 200:
				ok++
			case 503:
			default:
				t.Fatalf("status %d %q", r.Code, r.Body)
			}
		}
		retries := int(up.calls.Load()) - requests
		budget := int(0.2*requests) + 10*10
		t.Logf("%d requests, %d retries (budget %d), %d answered 200", requests, retries, budget, ok)
		if retries > budget {
			t.Errorf("%d retries for %d requests: over the budget of %d", retries, requests, budget)
		}
		if retries < budget-1 {
			t.Errorf("%d retries for %d requests: the budget allowed %d and every request wanted one", retries, requests, budget)
		}
		// Calls alternate failing and succeeding, so a request is answered
		// 503 exactly when the budget refused its retry.
		m := gw.metricsText(t)
		for _, want := range []string{fmt.Sprintf(`sluice_retries_total{route="rt"} %d`, retries),
			fmt.Sprintf(`sluice_retry_budget_exhausted_total{route="rt"} %d`, requests-ok)} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "sluice_retr"))
			}
		}
	})
}

// TestRetryOnlyIdempotent checks that a POST is not retried while a GET is.
// The upstream fails the first attempt of every request.
func TestRetryOnlyIdempotent(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var mu sync.Mutex
		seen := map[string]bool{}
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			first := !seen[r.Header.Get("X-Id")]
			seen[r.Header.Get("X-Id")] = true
			mu.Unlock()
			if first {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		gw := startRetrying(t, engine, fmt.Sprintf(`{targets: ["%s"]}`, up.URL), `{attempts: 2, on: [503], backoff: {initial: 1ns, max: 1ns, jitter: none}}`)
		c := newClient(t)
		if r := do(t, c, "POST", gw.URL+"/", http.Header{"X-Id": {"p"}}, strings.NewReader("x")); r.Code != 503 {
			t.Errorf("POST: %d, want the upstream's 503 (not retried)", r.Code)
		}
		if r := do(t, c, "GET", gw.URL+"/", http.Header{"X-Id": {"g"}}, nil); r.Code != 200 {
			t.Errorf("GET: %d, want 200 after a retry", r.Code)
		}
		if n := up.calls.Load(); n != 3 {
			t.Errorf("upstream calls %d, want 3", n)
		}
	})
}

// TestUpstreamErrors checks the error statuses: 504 when the attempt times
// out, 502 when no target can be reached; each with a JSON body naming the
// reason.
func TestUpstreamErrors(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		g := newGate(1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) { g.wait(r) })
		gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: to
    upstream: up
    policies: {timeout: 1s}
`, up.URL))
		c := newClient(t)
		res := make(chan result, 1)
		go func() {
			r, err := tryDo(c, "GET", gw.URL+"/", nil, nil)
			if err != nil {
				t.Error(err)
			}
			res <- r
		}()
		g.awaitArrivals(t, 1)
		gw.Clock.Advance(time.Second)
		r := <-res
		g.open()
		if r.Code != 504 || r.errorBody(t).Error != "timeout" {
			t.Fatalf("%d %q, want 504 timeout", r.Code, r.Body)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: down, upstream: up}
`, closedAddr(t)))
		r := get(t, newClient(t), gw.URL+"/")
		if r.Code != 502 || r.errorBody(t).Error != "upstream_unreachable" {
			t.Fatalf("%d %q, want 502 upstream_unreachable", r.Code, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		})
		gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: fb
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 2, open_for: 1m}
      fallback: {status: 200, content_type: text/plain, body: "cached answer"}
`, up.URL))
		c := newClient(t)
		for i := range 4 {
			r := get(t, c, gw.URL+"/")
			if r.Code != 200 || r.Body != "cached answer" || r.Header.Get("Content-Type") != "text/plain" {
				t.Errorf("request %d: %d %q, want the fallback", i, r.Code, r.Body)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream calls %d, want 2 (then the breaker opens)", n)
		}
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestActiveHealthChecks checks that a target failing its health check gets
// no traffic, and gets it back once a later check (on the fake clock's
// interval) passes.
func TestActiveHealthChecks(t *testing.T) {
	var sick atomic.Bool
	sick.Store(true)
	a := startUpstream(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && sick.Load() {
			http.Error(w, "sick", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "a")
	})
	b := startUpstream(t, "b", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "b") })
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s", "%s"], health: {path: /healthz, interval: 10s, timeout: 5s}}
routes:
  - {name: all, upstream: up}
`, a.URL, b.URL))
	healthy := func(url string) bool {
		for _, ts := range gw.Status().Upstreams[0].Targets {
			if ts.URL == url {
				return ts.Healthy
			}
		}
		return false
	}
	eventually(t, "the first check to mark a unhealthy", func() bool { return !healthy(a.URL) })
	c := newClient(t)
	for i := range 10 {
		if r := get(t, c, gw.URL+"/"); r.Body != "b" {
			t.Fatalf("request %d went to %q while a is unhealthy", i, r.Body)
		}
	}
	sick.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := gw.Clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the health checks are not waiting for their next interval")
	}
	gw.Clock.Advance(10 * time.Second)
	eventually(t, "the next check to mark a healthy", func() bool { return healthy(a.URL) })
	seen := map[string]int{}
	for range 10 {
		seen[get(t, c, gw.URL+"/").Body]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("after a recovered: %v, want both targets used", seen)
	}
}

// TestRetryReplaysBody checks that a retried PUT sends its body again, and
// that HEAD and query strings pass through.
func TestRetryReplaysBody(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var mu sync.Mutex
		bodies := map[string]int{}
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies[string(b)]++
			first := bodies[string(b)] == 1
			mu.Unlock()
			if r.Method == "PUT" && first {
				http.Error(w, "try again", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Length", "11")
			if r.Method != "HEAD" {
				fmt.Fprintf(w, "%-11s", r.URL.RawQuery)
			}
		})
		gw := startRetrying(t, engine, fmt.Sprintf(`{targets: ["%s"]}`, up.URL), `{attempts: 2, on: [503], backoff: {initial: 1ns, max: 1ns, jitter: none}}`)
		c := newClient(t)
		payload := strings.Repeat("p", 64<<10)
		if r := do(t, c, "PUT", gw.URL+"/doc?a=1&b=%20x", nil, strings.NewReader(payload)); r.Code != 200 || r.Body != "a=1&b=%20x " {
			t.Errorf("PUT: %d %q", r.Code, r.Body)
		}
		mu.Lock()
		if n := bodies[payload]; n != 2 {
			t.Errorf("the upstream got the body %d times, want 2 (first attempt and retry)", n)
		}
		mu.Unlock()
		req, _ := http.NewRequest("HEAD", gw.URL+"/doc", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ContentLength != 11 {
			t.Errorf("HEAD: %d, Content-Length %d, want 200 and 11", resp.StatusCode, resp.ContentLength)
		}
	})
}

// TestRetryConnectError checks that a request whose target cannot be
// reached is retried on another target, a POST too (the target never saw
// it), and on the event-loop engine without leaving the loops.
func TestRetryConnectError(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		dead := closedAddr(t)
		up := startUpstream(t, "up", nil)
		gw := startRetrying(t, engine, fmt.Sprintf(`{targets: ["http://%s", "%s"], balance: round_robin}`, dead, up.URL),
			`{attempts: 2, on: [connect_error], backoff: {initial: 1ns, max: 1ns}}`)
		c := newClient(t)
		const gets, posts = 20, 5
		for i := range gets + posts {
			method := "GET"
			var body io.Reader
			if i >= gets {
				method, body = "POST", strings.NewReader("x")
			}
			if r := do(t, c, method, gw.URL+"/", nil, body); r.Code != 200 {
				t.Fatalf("%s %d: status %d %q", method, i, r.Code, r.Body)
			}
		}
		if n := up.calls.Load(); n != gets+posts {
			t.Errorf("the live target got %d calls, want %d", n, gets+posts)
		}
		if m := gw.metricsText(t); !strings.Contains(m, `sluice_retries_total{route="rt"}`) {
			t.Errorf("no retries counted:\n%s", grepLines(m, "sluice_retries"))
		}
		if engine == "loop" {
			if st := gw.Status(); st.Engine.Handovers != 0 || !gw.routeStatus(t, "rt").Loop {
				t.Errorf("hand-overs %d, route on the loops %v: the retries left the loops", st.Engine.Handovers, gw.routeStatus(t, "rt").Loop)
			}
		}
	})
}

// startRetrying starts a gateway on engine whose one route, rt, sends to
// upstream up (its YAML) and retries as retry (its YAML) says, on a fake
// clock that moves on by itself so that the waits between attempts end.
func startRetrying(t *testing.T, engine, up, retry string) *testGateway {
	fc := clock.NewFake(time.Time{})
	gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: %s
routes:
  - name: rt
    upstream: up
    policies:
      retry: %s
`, engine, up, retry), fc)
	pumpClock(t, fc, time.Nanosecond)
	return gw
}

// TestRetryOnTimeout checks that an attempt cut by the route's timeout is
// retried when retry.on names timeout, and that the retry's answer is the
// client's: the first attempt hangs, the second answers.
func TestRetryOnTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(1)
		t.Cleanup(g.open)
		var calls atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				g.wait(r)
				return
			}
			fmt.Fprint(w, "second attempt")
		})
		gw := routedGateway(t, engine, up, `
  - name: rt
    upstream: up
    policies:
      timeout: 1s
      retry: {attempts: 2, on: [timeout], backoff: {initial: 1ms, max: 1ms, jitter: none}}
`)
		res := make(chan result, 1)
		go func() {
			r, err := tryDo(newClient(t), "GET", gw.URL+"/", nil, nil)
			if err != nil {
				t.Error(err)
			}
			res <- r
		}()
		g.awaitArrivals(t, 1)
		gw.Clock.Advance(time.Second) // the first attempt times out
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := gw.Clock.BlockUntil(ctx, 1); err != nil { // the wait before the retry
			t.Fatal(err)
		}
		gw.Clock.Advance(time.Millisecond)
		if r := <-res; r.Code != 200 || r.Body != "second attempt" {
			t.Fatalf("%d %q, want the second attempt's 200", r.Code, r.Body)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("upstream calls %d, want 2", n)
		}
	})
}

// TestClientLeavesDuringRetryWait checks that a client that leaves while
// its request waits before a retry ends the wait at once, on each engine:
// no other attempt is made, and no timer is left on the gateway's clock.
// (The goroutine engine slept on; the loops waited for their timer.)
func TestClientLeavesDuringRetryWait(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var calls atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		})
		fc := clock.NewFake(time.Time{})
		gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: rt
    upstream: up
    policies:
      retry: {attempts: 2, on: ["502"], backoff: {initial: 1h, max: 1h, jitter: none}}
`, engine, up.URL), fc)
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// The retry is decided (and counted) before its wait starts.
		eventually(t, "the retry", func() bool {
			return strings.Contains(gw.metricsText(t), `sluice_retries_total{route="rt"} 1`)
		})
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := fc.BlockUntil(ctx, 1); err != nil { // the wait before the retry
			t.Fatal(err)
		}
		conn.Close()
		eventually(t, "the wait to end", func() bool { return fc.Timers() == 0 })
		if n := calls.Load(); n != 1 {
			t.Errorf("upstream calls %d, want 1", n)
		}
	})
}
