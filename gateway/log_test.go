package gateway_test

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/requestid"
)

// requestLogKeys are the fields of every request's log line, in text and
// JSON alike, on both engines.
var requestLogKeys = []string{"time", "level", "msg", "route", "method", "path", "status", "outcome", "request_id",
	"target", "attempts", "bytes_in", "bytes_out", "duration", "remote"}

// TestRequestLog checks the request log line on both engines in both
// formats: the same fields; the client's X-Request-Id kept when well formed
// and sent upstream, else one made and sent; the target and the number of
// attempts of a retried request; the body bytes in and out; the duration a
// number of seconds; and a rejected request's line without target or
// attempt.
func TestRequestLog(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, format := range []string{"json", "text"} {
			t.Run(format, func(t *testing.T) {
				var calls atomic.Int64
				up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					if calls.Add(1) == 1 {
						http.Error(w, "busy", http.StatusServiceUnavailable)
						return
					}
					fmt.Fprint(w, "0123456789")
				})
				gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
log: {format: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: api
    upstream: up
    policies:
      rate_limit: {limit: 3, period: 1h, key: route}
      retry: {attempts: 2, on: [503], backoff: {initial: 1ns, max: 1ns, jitter: none}}
`, engine, format, up.URL))
				c := newClient(t)
				sentIDs, bodies := []string{}, []string{}
				for _, id := range []string{"req-42", "", "bad id", strings.Repeat("x", requestid.MaxLen+1)} {
					h := http.Header{}
					if id != "" {
						h.Set("X-Request-Id", id)
					}
					r := do(t, c, "PUT", gw.URL+"/doc?v=1", h, strings.NewReader("hello"))
					if want := map[bool]int{true: 429, false: 200}[len(bodies) == 3]; r.Code != want {
						t.Fatalf("request %q: status %d %q, want %d", id, r.Code, r.Body, want)
					}
					bodies = append(bodies, r.Body)
					sentIDs = append(sentIDs, up.lastRequest().Header.Get("X-Request-Id"))
				}
				lines := logs.requests(t, 4)
				for i, l := range lines {
					if keys := slices.Sorted(maps.Keys(l)); !slices.Equal(keys, slices.Sorted(slices.Values(requestLogKeys))) {
						t.Errorf("line %d has fields %v, want %v", i, keys, slices.Sorted(slices.Values(requestLogKeys)))
					}
					if d, ok := l["duration"].(float64); !ok || d <= 0 || d > 60 {
						t.Errorf("line %d: duration %#v, want a number of seconds", i, l["duration"])
					}
				}
				want := map[string]any{"route": "api", "method": "PUT", "path": "/doc", "status": 200.0, "outcome": "ok",
					"request_id": "req-42", "target": up.URL, "attempts": 2.0, "bytes_in": 5.0, "bytes_out": 10.0}
				for k, v := range want {
					if lines[0][k] != v {
						t.Errorf("retried request: %s = %#v, want %#v", k, lines[0][k], v)
					}
				}
				if sentIDs[0] != "req-42" {
					t.Errorf("upstream got X-Request-Id %q, want the client's req-42", sentIDs[0])
				}
				for i := 1; i < 3; i++ {
					id, _ := lines[i]["request_id"].(string)
					if len(id) != requestid.Len || id == "bad id" || !requestid.Valid(id) || sentIDs[i] != id {
						t.Errorf("request %d: logged id %q, upstream got %q; want one id made by the gateway, the same", i, id, sentIDs[i])
					}
				}
				if lines[1]["request_id"] == lines[2]["request_id"] {
					t.Errorf("two requests logged with the id %v", lines[1]["request_id"])
				}
				rejected := lines[3]
				for k, v := range map[string]any{"status": 429.0, "outcome": "rate_limited", "target": "", "attempts": 0.0, "bytes_out": float64(len(bodies[3]))} {
					if rejected[k] != v {
						t.Errorf("rate-limited request: %s = %#v, want %#v", k, rejected[k], v)
					}
				}
				if id, _ := rejected["request_id"].(string); len(id) != requestid.Len {
					t.Errorf("rate-limited request with a too long id: logged %q, want one made by the gateway", id)
				}
			})
		}
	})
}

// TestLogFieldsDocumented checks that docs/tracing.md names every field of
// the request log line (trace_id, which only sampled requests carry,
// included).
func TestLogFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/tracing.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Concat(requestLogKeys[3:], []string{"trace_id"}) { // time, level and msg are slog's own
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/tracing.md does not name the log field %s", k)
		}
	}
}

// TestRequestIDUnderRouteRules checks that a route's request header rules
// have the last word over the headers the gateway adds, on both engines:
// a removed X-Request-Id is not sent, a set one is sent as set.
func TestRequestIDUnderRouteRules(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - {name: removed, match: {path_prefix: /removed}, upstream: up, headers: {request: {remove: [X-Request-Id]}}}
  - {name: set, match: {path_prefix: /set}, upstream: up, headers: {request: {set: {X-Request-Id: fixed}}}}
`)
		c := newClient(t)
		do(t, c, "GET", gw.URL+"/removed", http.Header{"X-Request-Id": {"client"}}, nil)
		if h := up.lastRequest().Header; len(h.Values("X-Request-Id")) != 0 {
			t.Errorf("removed by the route: upstream got X-Request-Id %q", h.Values("X-Request-Id"))
		}
		do(t, c, "GET", gw.URL+"/set", http.Header{"X-Request-Id": {"client"}}, nil)
		if h := up.lastRequest().Header; !slices.Equal(h.Values("X-Request-Id"), []string{"fixed"}) {
			t.Errorf("set by the route: upstream got X-Request-Id %q, want [fixed]", h.Values("X-Request-Id"))
		}
	})
}

// TestStreamedResponseLogged checks that a response whose body streams is
// logged, once its body has been sent, with its own request id, although
// its engine has served the connection's next request meanwhile.
func TestStreamedResponseLogged(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		big := strings.Repeat("x", 256<<10) // streamed, not read whole
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				_, _ = io.WriteString(w, big)
				return
			}
			fmt.Fprint(w, "small")
		})
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: api, upstream: up}
`, engine, up.URL))
		c := newClient(t)
		if r := do(t, c, "GET", gw.URL+"/big", http.Header{"X-Request-Id": {"streamed"}}, nil); len(r.Body) != len(big) {
			t.Fatalf("body of %d bytes, want %d", len(r.Body), len(big))
		}
		do(t, c, "GET", gw.URL+"/small", http.Header{"X-Request-Id": {"next"}}, nil)
		byID := map[any]map[string]any{}
		for _, l := range logs.requests(t, 2) {
			byID[l["request_id"]] = l
		}
		if l := byID["streamed"]; l == nil || l["path"] != "/big" || l["bytes_out"] != float64(len(big)) {
			t.Errorf("log lines %v, want one for request streamed, /big, %d bytes out", byID, len(big))
		}
		if l := byID["next"]; l == nil || l["path"] != "/small" {
			t.Errorf("log lines %v, want one for request next, /small", byID)
		}
	})
}
