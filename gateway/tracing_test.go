package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

// splitTraceparent splits a W3C traceparent into trace id, span id and
// flags, failing the test when it is malformed.
func splitTraceparent(t *testing.T, h string) (traceID, spanID, flags string) {
	t.Helper()
	f := strings.Split(h, "-")
	if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || len(f[3]) != 2 {
		t.Fatalf("traceparent %q is not 00-<32 hex>-<16 hex>-<2 hex>", h)
	}
	return f[1], f[2], f[3]
}

// TestTraceFollowsClientParent checks, at sample 0, that a request whose
// client's traceparent is sampled is traced as its child (a server span,
// an attempt span under it), that the upstream gets the trace context
// with the attempt's span as parent and the client's tracestate, and that
// a request without a parent is not recorded but still sends the
// upstream a (new, unsampled) trace context.
func TestTraceFollowsClientParent(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		up := startUpstream(t, "up", nil)
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s", sample: 0, service_name: edge}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`, engine, rcv.URL, up.URL))
		c := newClient(t)
		h := http.Header{"Traceparent": {"00-" + clientTrace + "-" + clientSpan + "-01"}, "Tracestate": {"vendor=x"}, "X-Request-Id": {"traced-1"}}
		if r := do(t, c, "GET", gw.URL+"/v1/items?q=1", h, nil); r.Code != 200 {
			t.Fatalf("status %d %q", r.Code, r.Body)
		}
		sent := up.lastRequest().Header
		flushTraces(t, gw, logs, 1)
		spans := rcv.WaitFor(t, 2, waitLimit)
		servers, attempts := spansBy(spans)
		server, ok := servers["traced-1"]
		if !ok || len(spans) != 2 {
			t.Fatalf("spans %+v, want a server span for request traced-1 and its attempt", spans)
		}
		if server.TraceID != clientTrace || server.ParentSpanID != clientSpan || server.Name != "GET api" || server.Service != "edge" || server.Error {
			t.Errorf("server span %+v, want GET api, a child of the client's span, of service edge", server)
		}
		for k, want := range map[string]any{
			"http.request.method": "GET", "url.path": "/v1/items", "url.scheme": "http", "client.address": "127.0.0.1",
			"sluice.route": "api", "http.response.status_code": int64(200), "sluice.outcome": "ok",
		} {
			if got := server.Attrs[k]; got != want {
				t.Errorf("server span %s = %#v, want %#v", k, got, want)
			}
		}
		as := attempts[server.SpanID]
		if len(as) != 1 {
			t.Fatalf("attempt spans under the server span: %+v, want 1", as)
		}
		a := as[0]
		if a.TraceID != clientTrace || a.Attrs["sluice.attempt"] != int64(1) || a.Attrs["sluice.target"] != up.URL ||
			a.Attrs["server.address"] != "127.0.0.1" || a.Attrs["http.response.status_code"] != int64(200) {
			t.Errorf("attempt span %+v, want attempt 1 to %s answered 200", a, up.URL)
		}
		traceID, spanID, flags := splitTraceparent(t, sent.Get("Traceparent"))
		if traceID != clientTrace || spanID != a.SpanID || flags != "01" || sent.Get("Tracestate") != "vendor=x" {
			t.Errorf("upstream got traceparent %q tracestate %q, want trace %s, parent %s (the attempt), sampled, vendor=x",
				sent.Get("Traceparent"), sent.Get("Tracestate"), clientTrace, a.SpanID)
		}

		// No parent, sample 0: nothing recorded, a context still sent.
		if r := get(t, c, gw.URL+"/"); r.Code != 200 {
			t.Fatalf("status %d", r.Code)
		}
		traceID, _, flags = splitTraceparent(t, up.lastRequest().Header.Get("Traceparent"))
		if traceID == clientTrace || flags != "00" {
			t.Errorf("upstream got traceparent %q for a request without one, want a new trace, unsampled", up.lastRequest().Header.Get("Traceparent"))
		}
		flushTraces(t, gw, logs, 2)
		if n := len(rcv.Spans()); n != 2 {
			t.Errorf("%d spans after an unsampled request, want still 2", n)
		}
	})
}

// TestTraceOfRetriedRequest checks a request retried after a 503: two
// attempt spans under its server span, the second saying it is a resend
// and why, and each attempt's own span as the parent the upstream got.
func TestTraceOfRetriedRequest(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		var calls atomic.Int64
		parents := make(chan string, 2)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			parents <- r.Header.Get("Traceparent")
			if calls.Add(1) == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s"}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: api
    upstream: up
    policies: {retry: {attempts: 2, on: [503], backoff: {initial: 1ns, max: 1ns, jitter: none}}}
`, engine, rcv.URL, up.URL))
		if r := do(t, newClient(t), "GET", gw.URL+"/", http.Header{"X-Request-Id": {"retried"}}, nil); r.Code != 200 || r.Body != "ok" {
			t.Fatalf("%d %q, want the retry's 200", r.Code, r.Body)
		}
		flushTraces(t, gw, logs, 1)
		servers, attempts := spansBy(rcv.WaitFor(t, 3, waitLimit))
		server := servers["retried"]
		as := attempts[server.SpanID]
		if server.ParentSpanID != "" || len(as) != 2 {
			t.Fatalf("server span %+v with attempts %+v, want a root with 2 attempts", server, as)
		}
		if as[0].Attrs["sluice.attempt"] == int64(2) {
			as[0], as[1] = as[1], as[0]
		}
		first, second := as[0], as[1]
		if first.Attrs["sluice.attempt"] != int64(1) || first.Attrs["http.response.status_code"] != int64(503) || !first.Error || first.Attrs["error.type"] != "503" {
			t.Errorf("first attempt %+v, want attempt 1, 503, an error", first)
		}
		if second.Attrs["sluice.attempt"] != int64(2) || second.Attrs["http.request.resend_count"] != int64(1) ||
			second.Attrs["sluice.retry_reason"] != "503" || second.Attrs["http.response.status_code"] != int64(200) || second.Error {
			t.Errorf("second attempt %+v, want attempt 2, a resend for 503, answered 200", second)
		}
		for i, a := range []tracingtest.Span{first, second} {
			traceID, spanID, _ := splitTraceparent(t, <-parents)
			if traceID != server.TraceID || spanID != a.SpanID {
				t.Errorf("attempt %d: the upstream's parent is %s/%s, want the attempt's span %s/%s", i+1, traceID, spanID, server.TraceID, a.SpanID)
			}
		}
	})
}

// TestTraceOfPolicyDecisions checks that the gateway's own answers are on
// the request's span as events and its outcome: a rate-limited request,
// a breaker open, a fallback for an unreachable target.
func TestTraceOfPolicyDecisions(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		failing := startUpstream(t, "failing", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "broken", http.StatusInternalServerError)
		})
		up := startUpstream(t, "up", nil)
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s"}
upstreams:
  up: {targets: ["%s"]}
  failing: {targets: ["%s"]}
  dead: {targets: ["http://%s"]}
routes:
  - name: limited
    match: {path_prefix: /limited}
    upstream: up
    policies: {rate_limit: {limit: 1, period: 1h, key: route}}
  - name: breaker
    match: {path_prefix: /breaker}
    upstream: failing
    policies: {circuit_breaker: {consecutive_failures: 1, failure_rate: 0, open_for: 1h}}
  - name: fallback
    match: {path_prefix: /fallback}
    upstream: dead
    policies: {fallback: {status: 200, body: cached}}
`, engine, rcv.URL, up.URL, failing.URL, closedAddr(t)))
		c := newClient(t)
		for _, step := range []struct {
			id, path string
			code     int
		}{
			{"limited-1", "/limited", 200}, {"limited-2", "/limited", 429},
			{"breaker-1", "/breaker", 500}, {"breaker-2", "/breaker", 503},
			{"fallback", "/fallback", 200},
		} {
			if r := do(t, c, "GET", gw.URL+step.path, http.Header{"X-Request-Id": {step.id}}, nil); r.Code != step.code {
				t.Fatalf("%s: status %d %q, want %d", step.id, r.Code, r.Body, step.code)
			}
		}
		flushTraces(t, gw, logs, 5)
		// 5 server spans; attempts for limited-1, breaker-1 and fallback.
		servers, attempts := spansBy(rcv.WaitFor(t, 8, waitLimit))
		for _, want := range []struct {
			id, event, outcome string
			code, attempts     int64
		}{
			{"limited-1", "", "ok", 200, 1},
			{"limited-2", "rate_limited", "rate_limited", 429, 0},
			{"breaker-1", "", "upstream_status", 500, 1},
			{"breaker-2", "breaker_open", "circuit_open", 503, 0},
			{"fallback", "fallback", "fallback:upstream_unreachable", 200, 1},
		} {
			s, ok := servers[want.id]
			if !ok {
				t.Errorf("%s: no server span", want.id)
				continue
			}
			events := strings.Join(s.Events, ",")
			if events != want.event || s.Attrs["sluice.outcome"] != want.outcome || s.Attrs["http.response.status_code"] != want.code ||
				int64(len(attempts[s.SpanID])) != want.attempts {
				t.Errorf("%s: events %q, outcome %v, status %v, %d attempts; want %q, %s, %d, %d",
					want.id, events, s.Attrs["sluice.outcome"], s.Attrs["http.response.status_code"], len(attempts[s.SpanID]),
					want.event, want.outcome, want.code, want.attempts)
			}
		}
		if as := attempts[servers["fallback"].SpanID]; len(as) == 1 && (as[0].Attrs["error.type"] != "connect_error" || !as[0].Error) {
			t.Errorf("the fallback's attempt %+v, want an error of type connect_error", as[0])
		}
		if s := servers["breaker-1"]; !s.Error || s.Attrs["error.type"] != "500" {
			t.Errorf("a 500 passed through: span %+v, want an error of type 500", s)
		}
	})
}

// TestTracingOffLeavesContextAlone checks that without a tracing section
// the client's trace context reaches the upstream as it came, and none is
// made up when the client sent none.
func TestTracingOffLeavesContextAlone(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := gatewayTo(t, engine, up.addr())
		c := newClient(t)
		tp := "00-" + clientTrace + "-" + clientSpan + "-01"
		do(t, c, "GET", gw.URL+"/", http.Header{"Traceparent": {tp}, "Tracestate": {"vendor=x"}}, nil)
		if h := up.lastRequest().Header; h.Get("Traceparent") != tp || h.Get("Tracestate") != "vendor=x" {
			t.Errorf("upstream got traceparent %q tracestate %q, want the client's %q, vendor=x", h.Get("Traceparent"), h.Get("Tracestate"), tp)
		}
		get(t, c, gw.URL+"/")
		if h := up.lastRequest().Header; h.Get("Traceparent") != "" {
			t.Errorf("upstream got traceparent %q, want none", h.Get("Traceparent"))
		}
	})
}

// TestTracingReload checks that a reload that changes the tracing section
// takes effect at once and flushes the tracer it replaces, and that one
// that removes it turns tracing off.
func TestTracingReload(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		up := startUpstream(t, "up", nil)
		text := `
server: {engine: %s}
%s
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`
		gw, logs := startObserved(t, parseConfig(t, text, engine, fmt.Sprintf(`tracing: {endpoint: "%s", service_name: before}`, rcv.URL), up.URL))
		c := newClient(t)
		do(t, c, "GET", gw.URL+"/", http.Header{"X-Request-Id": {"before"}}, nil)
		logs.requests(t, 1) // the request has ended (its client may have had the answer first)
		if err := gw.Apply(parseConfig(t, text, engine, fmt.Sprintf(`tracing: {endpoint: "%s", service_name: after}`, rcv.URL), up.URL)); err != nil {
			t.Fatal(err)
		}
		// The replaced tracer was flushed by the reload, with no flush of
		// the test's.
		spans := rcv.WaitFor(t, 2, waitLimit)
		if servers, _ := spansBy(spans); servers["before"].Service != "before" {
			t.Errorf("spans after the reload %+v, want the request before it, of service before", spans)
		}
		do(t, c, "GET", gw.URL+"/", http.Header{"X-Request-Id": {"after"}}, nil)
		flushTraces(t, gw, logs, 2)
		if servers, _ := spansBy(rcv.WaitFor(t, 4, waitLimit)); servers["after"].Service != "after" {
			t.Errorf("the request after the reload: span %+v, want service after", servers["after"])
		}
		if err := gw.Apply(parseConfig(t, text, engine, "", up.URL)); err != nil {
			t.Fatal(err)
		}
		do(t, c, "GET", gw.URL+"/", nil, nil)
		if tp := up.lastRequest().Header.Get("Traceparent"); tp != "" {
			t.Errorf("tracing removed, the upstream still got traceparent %q", tp)
		}
		if n := len(rcv.Spans()); n != 4 {
			t.Errorf("%d spans, want 4 (none once tracing is off)", n)
		}
	})
}

// TestTraceOfShedAndCoalesced checks the two decisions that need requests
// at once: a request the concurrency limit sheds while another holds its
// slot, and one answered by an identical request's upstream call.
func TestTraceOfShedAndCoalesced(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		g := newGate(2)
		t.Cleanup(g.open)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			g.wait(r)
			fmt.Fprint(w, "ok")
		})
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s"}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: limited
    match: {path_prefix: /limited}
    upstream: up
    policies: {concurrency: {max: 1}}
  - name: co
    match: {path_prefix: /co}
    upstream: up
    policies: {coalesce: true}
`, engine, rcv.URL, up.URL))
		c := newClient(t)
		codes := make(chan int, 3)
		send := func(id, path string) {
			r, err := tryDo(c, "GET", gw.URL+path, http.Header{"X-Request-Id": {id}}, nil)
			if err != nil {
				t.Error(err)
			}
			codes <- r.Code
		}
		go send("held", "/limited")
		go send("leader", "/co")
		g.awaitArrivals(t, 2) // one request of each route at the upstream
		go send("joined", "/co")
		eventually(t, "the second /co request to join the first", func() bool { return gateway.CoalesceShared(gw.Gateway, "co") == 1 })
		if r := do(t, c, "GET", gw.URL+"/limited", http.Header{"X-Request-Id": {"shed"}}, nil); r.Code != 503 {
			t.Errorf("a request over the concurrency limit: %d, want 503", r.Code)
		}
		g.open()
		for range 3 {
			if code := <-codes; code != 200 {
				t.Errorf("status %d, want 200", code)
			}
		}
		flushTraces(t, gw, logs, 4)
		// 4 server spans; attempts of held and leader.
		servers, attempts := spansBy(rcv.WaitFor(t, 6, waitLimit))
		for _, want := range []struct {
			id, event, outcome string
			attempts           int
		}{
			{"held", "", "ok", 1},
			{"shed", "shed", "overloaded", 0},
			{"leader", "", "ok", 1},
			{"joined", "coalesced", "ok", 0},
		} {
			s := servers[want.id]
			if events := strings.Join(s.Events, ","); events != want.event || s.Attrs["sluice.outcome"] != want.outcome || len(attempts[s.SpanID]) != want.attempts {
				t.Errorf("%s: span %+v with %d attempts, want event %q, outcome %s, %d attempts", want.id, s, len(attempts[s.SpanID]), want.event, want.outcome, want.attempts)
			}
		}
	})
}

// TestTracingShutdownFlushes checks that the spans of the last requests
// reach the collector when the gateway shuts down, without waiting for
// the next batch.
func TestTracingShutdownFlushes(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		up := startUpstream(t, "up", nil)
		gw, _ := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s"}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`, engine, rcv.URL, up.URL))
		get(t, newClient(t), gw.URL+"/")
		gw.stop(t)
		if spans := rcv.Spans(); len(spans) != 2 {
			t.Errorf("%d spans after shutdown, want 2 (the request's and its attempt's)", len(spans))
		}
	})
}

// TestTraceOfHedgedRequest checks a hedged request: both attempts are
// spans under the request's, on a target each: the hedge a resend
// without a retry reason, the one that lost an error, the other answered.
func TestTraceOfHedgedRequest(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		rs := startRacers(t)
		gw, logs := startObservedStep(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s"}
upstreams:
  up: {targets: ["%s", "%s"]}
routes:
  - name: r
    upstream: up
    policies: {hedge: {delay: 1ms, budget: 1}}
`, engine, rcv.URL, rs.a.URL, rs.b.URL), time.Millisecond)
		rc := rs.race("h")
		if r := do(t, newClient(t), "GET", gw.URL+"/?id=h", http.Header{"X-Request-Id": {"hedged"}}, nil); r.Code != 200 || !strings.HasPrefix(r.Body, "fast ") {
			t.Fatalf("%d %q, want the hedge's answer", r.Code, r.Body)
		}
		awaitClosed(t, rc.cancelled, "the first attempt's cancellation")
		logs.requests(t, 1)
		var spans []tracingtest.Span
		eventually(t, "the request's and both attempts' spans", func() bool { // the loser's may end after the request
			flushTraces(t, gw, logs, 1)
			spans = rcv.Spans()
			return len(spans) >= 3
		})
		servers, attempts := spansBy(spans)
		server := servers["hedged"]
		as := attempts[server.SpanID]
		if len(as) != 2 {
			t.Fatalf("attempt spans %+v, want 2 under the request's", as)
		}
		// Which attempt reaches the upstream first, and is held there,
		// depends on their connections: the winner is the one answered.
		if as[0].Error {
			as[0], as[1] = as[1], as[0]
		}
		won, lost := as[0], as[1]
		if won.Error || won.Attrs["http.response.status_code"] != int64(200) || !lost.Error || lost.Attrs["http.response.status_code"] != nil {
			t.Errorf("attempts %+v and %+v, want one answered 200, the other an error without a status", won, lost)
		}
		first, hedge := won, lost
		if hedge.Attrs["sluice.attempt"] != int64(2) {
			first, hedge = hedge, first
		}
		if first.Attrs["sluice.attempt"] != int64(1) || hedge.Attrs["http.request.resend_count"] != int64(1) || hedge.Attrs["sluice.retry_reason"] != nil {
			t.Errorf("the hedge: %+v, want attempt 2, resend count 1, no retry reason", hedge)
		}
		if first.Attrs["sluice.target"] == hedge.Attrs["sluice.target"] {
			t.Errorf("both attempts to %v, want one per target", first.Attrs["sluice.target"])
		}
	})
}
