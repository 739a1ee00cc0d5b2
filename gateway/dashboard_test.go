package gateway_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/gateway"
)

// events is a client's open dashboard event stream.
type events struct {
	resp *http.Response
	r    *bufio.Reader
}

// openEvents opens the event stream at url with header (may be nil),
// failing the test unless it answers 200 as text/event-stream. The stream
// is closed when the test ends.
func openEvents(t testing.TB, c *http.Client, url string, header http.Header) *events {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &events{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads the next event: its name and its data.
func (e *events) next(t testing.TB) (string, string) {
	t.Helper()
	var name, data string
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if name != "" || data != "" {
				return name, data
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// sample reads the next event, which must be a sample.
func (e *events) sample(t testing.TB) gateway.DashboardFrame {
	t.Helper()
	name, data := e.next(t)
	if name != "sample" {
		t.Fatalf("event %q, want sample", name)
	}
	var f gateway.DashboardFrame
	if err := json.Unmarshal([]byte(data), &f); err != nil {
		t.Fatalf("sample %s: %v", data, err)
	}
	return f
}

// TestDashboardEvents reads the dashboard's event stream of a gateway
// whose routes see a second of traffic on the fake clock: the history
// first (the sample taken when the admin API was made), then a sample of
// the state (routes, targets, last reload) without rates, then, once the
// clock moved a second, one whose rates are that second's requests by
// outcome, with latencies, rate-limit decisions, the route breaker that
// opened and its transition, and the target breaker that opened and its
// transition.
func TestDashboardEvents(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		good := startUpstream(t, "good", nil)
		bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  good: {targets: ["%s"]}
  bad: {targets: ["%s"]}
  sick: {targets: ["%s"]}
routes:
  - name: limited
    upstream: good
    match: {path_prefix: /limited}
    policies: {rate_limit: {limit: 1, period: 1m, key: route}}
  - name: broken
    upstream: bad
    match: {path_prefix: /broken}
    policies: {circuit_breaker: {consecutive_failures: 2, open_for: 1m}}
  - name: sick
    upstream: sick
    match: {path_prefix: /sick}
  - name: adaptive
    upstream: good
    policies: {concurrency: {adaptive: {algorithm: aimd, initial: 4, min: 1, max: 50}}}
`, engine, good.URL, bad.URL, bad.URL))
		admin := httptest.NewServer(tg.AdminHandler(gateway.AdminOptions{Token: "s3cret", Gatherer: tg.Registry}))
		t.Cleanup(admin.Close)
		c := newClient(t)
		s := openEvents(t, c, admin.URL+"/dashboard/events", http.Header{"Authorization": {"Bearer s3cret"}})
		var history []gateway.DashboardPoint
		if name, data := s.next(t); name != "history" || json.Unmarshal([]byte(data), &history) != nil ||
			len(history) != 1 || len(history[0].Routes) != 4 || history[0].Time != tg.Clock.Now().UnixMilli() {
			t.Fatalf("first event %q %s, want the history of the sample taken at start", name, data)
		}
		f := s.sample(t)
		if f.Rates != nil {
			t.Errorf("the first sample has rates: %+v", f.Rates)
		}
		var names []string
		for _, r := range f.Routes {
			names = append(names, r.Name)
		}
		if strings.Join(names, " ") != "limited broken sick adaptive" {
			t.Errorf("routes %v", names)
		}
		if !f.LastReload.OK || f.Version != 1 || len(f.Upstreams) != 3 || len(f.Upstreams[1].Targets) != 1 ||
			f.Upstreams[1].Targets[0].URL != good.URL || !f.Upstreams[1].Targets[0].Healthy {
			t.Errorf("state: reload %+v, version %d, upstreams %+v", f.LastReload, f.Version, f.Upstreams)
		}
		if p := f.Point.Routes["adaptive"]; p.Limit != 4 {
			t.Errorf("adaptive point %+v, want the initial limit 4", p)
		}

		for i, want := range []int{200, 429, 429} {
			if r := get(t, c, tg.URL+"/limited"); r.Code != want {
				t.Fatalf("limited request %d: %d, want %d", i+1, r.Code, want)
			}
		}
		for i, want := range []int{500, 500, 503} {
			if r := get(t, c, tg.URL+"/broken"); r.Code != want {
				t.Fatalf("broken request %d: %d, want %d", i+1, r.Code, want)
			}
		}
		for range 2 {
			if r := get(t, c, tg.URL+"/"); r.Code != 200 {
				t.Fatalf("adaptive request: %d", r.Code)
			}
		}
		// Five failures in a row open the target's passive-health breaker
		// (sick has no breaker of its own).
		for i := range 5 {
			if r := get(t, c, tg.URL+"/sick"); r.Code != 500 {
				t.Fatalf("sick request %d: %d, want 500", i+1, r.Code)
			}
		}
		// A request is recorded once its answer is sent: the client may
		// read it first.
		eventually(t, "the 13 requests recorded", func() bool { return recorded(t, tg.Registry) == 13 })
		tg.Clock.Advance(time.Second)
		f = s.sample(t)
		for route, want := range map[string]map[string]float64{
			"limited":  {"served": 1, "rate_limited": 2},
			"broken":   {"upstream_error": 2, "breaker_open": 1},
			"adaptive": {"served": 2},
		} {
			r := f.Rates[route]
			if r == nil {
				t.Errorf("%s: no rates", route)
				continue
			}
			for class, n := range r.Requests {
				if n != want[class] {
					t.Errorf("%s %s: %v/s, want %v", route, class, n, want[class])
				}
			}
			if r.P50 == nil || r.P99 == nil || *r.P50 > *r.P99 {
				t.Errorf("%s: p50 %v, p99 %v", route, r.P50, r.P99)
			}
		}
		if r := f.Rates["limited"]; r != nil && (r.Allowed != 1 || r.Rejected != 2) {
			t.Errorf("limited: %v allowed, %v rejected a second, want 1 and 2", r.Allowed, r.Rejected)
		}
		if b := f.Routes[1].Breaker; b != "open" {
			t.Errorf("broken's breaker %q, want open", b)
		}
		if tr, at := f.Transitions["broken"], f.Time.Add(-time.Second); len(tr) != 1 || tr[0].From != "closed" || tr[0].To != "open" || !tr[0].At.Equal(at) {
			t.Errorf("broken's transitions %+v, want one from closed to open at %v", tr, at)
		}
		if p := f.Point.Routes["broken"]; p.Served != 0 || p.Refused != 3 {
			t.Errorf("broken point %+v, want 3 refused", p)
		}
		if tr, at := f.TargetTransitions["sick"][bad.URL], f.Time.Add(-time.Second); len(tr) != 1 || tr[0].From != "closed" || tr[0].To != "open" || !tr[0].At.Equal(at) {
			t.Errorf("sick's target's transitions %+v (all: %+v), want one from closed to open at %v", tr, f.TargetTransitions, at)
		}
		if tr := f.TargetTransitions["bad"][bad.URL]; tr != nil {
			t.Errorf("bad's target, the same URL in another upstream, has transitions %+v", tr)
		}
	})
}

// TestDashboardAuth: with a token, the page and its stream need the bearer
// token or the session cookie that the login form sets for the right
// token; that cookie opens nothing else, carries no token and cannot be
// forged; / redirects to the page for anyone. Without a token everything
// is open.
func TestDashboardAuth(t *testing.T) {
	checkLeaks(t)
	cfg := parseConfig(t, `upstreams: {up: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: r, upstream: up}]
`)
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := g.AdminHandler(gateway.AdminOptions{Token: "s3cret", Gatherer: prometheus.NewRegistry(), Reload: func() error { return nil }})
	serve := func(method, path string, header http.Header, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		if method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	if w := serve("GET", "/", nil, ""); w.Code != http.StatusFound || w.Header().Get("Location") != "/dashboard" {
		t.Errorf("GET /: %d to %q, want 302 to /dashboard", w.Code, w.Header().Get("Location"))
	}
	w := serve("GET", "/dashboard", nil, "")
	if w.Code != 401 || !strings.Contains(w.Body.String(), `<form method="post" action="/dashboard/login">`) ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || w.Header().Get("Content-Security-Policy") == "" {
		t.Errorf("GET /dashboard without credentials: %d %q, want 401 and the login form", w.Code, w.Body.String())
	}
	if w := serve("GET", "/dashboard/events", nil, ""); w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("GET /dashboard/events without credentials: %d", w.Code)
	}
	w = serve("GET", "/dashboard", http.Header{"Authorization": {"Bearer s3cret"}}, "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "new EventSource(") ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Errorf("GET /dashboard with the token: %d, CSP %q", w.Code, w.Header().Get("Content-Security-Policy"))
	}

	for _, bad := range []string{"token=s3cre", "token=S3CRET", "token=", "tok=s3cret", "token=" + strings.Repeat("x", 5000)} {
		w := serve("POST", "/dashboard/login", nil, bad)
		if w.Code == http.StatusSeeOther || len(w.Result().Cookies()) != 0 {
			t.Errorf("login with %.20q: %d, cookies %v", bad, w.Code, w.Result().Cookies())
		}
	}
	w = serve("POST", "/dashboard/login", nil, url.Values{"token": {"s3cret"}}.Encode())
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard" || len(cookies) != 1 {
		t.Fatalf("login: %d to %q, cookies %v", w.Code, w.Header().Get("Location"), cookies)
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/dashboard" || strings.Contains(ck.Value, "s3cret") {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/dashboard, without the token", ck)
	}
	session := http.Header{"Cookie": {ck.Name + "=" + ck.Value}}
	if w := serve("GET", "/dashboard", session, ""); w.Code != 200 {
		t.Errorf("GET /dashboard with the session: %d", w.Code)
	}
	for _, ep := range []struct{ method, path string }{{"GET", "/status"}, {"GET", "/metrics"}, {"POST", "/reload"}} {
		if w := serve(ep.method, ep.path, session, ""); w.Code != 401 {
			t.Errorf("%s %s with the dashboard session: %d, want 401", ep.method, ep.path, w.Code)
		}
	}
	for _, forged := range []string{"s3cret", ck.Value[:len(ck.Value)-1] + "A", ""} {
		if w := serve("GET", "/dashboard", http.Header{"Cookie": {ck.Name + "=" + forged}}, ""); w.Code != 401 {
			t.Errorf("GET /dashboard with cookie %q: %d, want 401", forged, w.Code)
		}
	}

	// The stream with the session cookie, over HTTP.
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := openEvents(t, newClient(t), srv.URL+"/dashboard/events", session)
	if name, _ := s.next(t); name != "history" {
		t.Errorf("first event %q, want history", name)
	}
	s.resp.Body.Close()

	open := g.AdminHandler(gateway.AdminOptions{})
	for _, tt := range []struct {
		method, path string
		code         int
	}{{"GET", "/dashboard", 200}, {"POST", "/dashboard/login", http.StatusSeeOther}} {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		w := httptest.NewRecorder()
		open.ServeHTTP(w, req)
		if w.Code != tt.code || len(w.Result().Cookies()) != 0 {
			t.Errorf("without a token, %s %s: %d, cookies %v; want %d and none", tt.method, tt.path, w.Code, w.Result().Cookies(), tt.code)
		}
	}
}

// recorded returns how many requests reg's sluice_requests_total counts.
func recorded(t testing.TB, reg prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "sluice_requests_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
