package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// load sends GET requests from several workers until stopped (or until
// each has sent max), and counts what happened.
type load struct {
	sent, ok, refused atomic.Int64
	mu                sync.Mutex
	failures          []string
	stop              chan struct{}
	wg                sync.WaitGroup
}

// startLoad starts workers sending GET url. A request refused at connect
// (nothing listens any more) ends its worker; any other error or a status
// other than 200 is a failure.
func startLoad(c *http.Client, url string, workers, max int) *load {
	l := &load{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for range max {
				select {
				case <-l.stop:
					return
				default:
				}
				l.sent.Add(1)
				r, err := tryDo(c, "GET", url, nil, nil)
				switch {
				case err != nil && isRefused(err):
					l.refused.Add(1)
					return
				case err != nil:
					l.fail(err.Error())
				case r.Code != 200:
					l.fail(fmt.Sprintf("%d %s", r.Code, r.Body))
				default:
					l.ok.Add(1)
				}
			}
		})
	}
	return l
}

func (l *load) fail(s string) {
	l.mu.Lock()
	l.failures = append(l.failures, s)
	l.mu.Unlock()
}

// finish stops the workers and reports failures.
func (l *load) finish(t testing.TB) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > 0 {
		t.Errorf("%d of %d requests failed; first: %s", len(l.failures), l.sent.Load(), l.failures[0])
	}
	t.Logf("%d requests sent, %d ok, %d refused after shutdown", l.sent.Load(), l.ok.Load(), l.refused.Load())
}

// awaitProgress waits until the load has completed n more requests.
func (l *load) awaitProgress(t testing.TB, n int64) {
	t.Helper()
	from := l.ok.Load() + int64(len(l.failures))
	eventually(t, "requests to complete", func() bool { return l.ok.Load() >= from+n })
}

const reloadConfig = `
upstreams:
  main: {targets: [%s], balance: %s}
  other: {targets: ["%s"]}
routes:
  - name: side
    match: {path_prefix: %s}
    upstream: other
    policies:
      rate_limit: {limit: %d, period: 1s}
  - name: main
    upstream: main
    policies:
      circuit_breaker: {consecutive_failures: 5}
      concurrency: {max: 64}
`

// TestReloadUnderLoad applies 30 configurations, changing the routes, the
// pool of the loaded route and its balancer, while clients keep sending:
// no request fails.
func TestReloadUnderLoad(t *testing.T) {
	a1 := startUpstream(t, "a1", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	a2 := startUpstream(t, "a2", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	b := startUpstream(t, "b", nil)
	cfgs := []*config.Config{
		parseConfig(t, reloadConfig, `"`+a1.URL+`"`, "round_robin", b.URL, "/side/", 10),
		parseConfig(t, reloadConfig, `"`+a1.URL+`", "`+a2.URL+`"`, "least_inflight", b.URL, "/side2/", 20),
		parseConfig(t, reloadConfig, `"`+a2.URL+`"`, "p2c", b.URL, "/side/", 30),
	}
	gw := startGateway(t, cfgs[0])
	l := startLoad(newClient(t), gw.URL+"/main", 4, 20000)
	for i := 1; i <= 30; i++ {
		l.awaitProgress(t, 20)
		if err := gw.Apply(cfgs[i%len(cfgs)]); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	l.awaitProgress(t, 20)
	l.finish(t)
	if v := gw.Status().Version; v != 31 {
		t.Errorf("version %d after 30 reloads, want 31", v)
	}
	if a1.calls.Load() == 0 || a2.calls.Load() == 0 {
		t.Errorf("calls: a1 %d, a2 %d: the pool changes did not take effect", a1.calls.Load(), a2.calls.Load())
	}
}

// TestInvalidReloadRefused checks that a configuration that cannot be built,
// or that does not validate, is refused: the old one keeps serving, and the
// refusal is reported by Apply, POST /reload and /status.
func TestInvalidReloadRefused(t *testing.T) {
	up := startUpstream(t, "up", nil)
	good := fmt.Sprintf(`
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: old, match: {path_prefix: /old}, upstream: up}
`, up.URL)
	gw := startGateway(t, parseConfig(t, good))
	c := newClient(t)

	// A rate limit whose horizon no clock can hold fails to build. Config
	// validation refuses it in a file; a Config made in code can hold it.
	unbuildable := parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: new, match: {path_prefix: /new}, upstream: up}
  - name: huge
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, burst: 10}
`, up.URL)
	unbuildable.Routes[1].Policies.RateLimit.Period = config.Duration(200000 * time.Hour)
	if err := gw.Apply(unbuildable); err == nil {
		t.Fatal("Apply accepted a configuration that cannot be built")
	}
	st := gw.Status()
	if st.Version != 1 || st.LastReload.OK || !strings.Contains(st.LastReload.Error, "huge") {
		t.Errorf("status after a refused reload: version %d, last reload %+v", st.Version, st.LastReload)
	}
	if r := get(t, c, gw.URL+"/old"); r.Code != 200 {
		t.Errorf("old route after a refused reload: %d", r.Code)
	}
	if r := get(t, c, gw.URL+"/new"); r.Code != 404 {
		t.Errorf("route of the refused configuration: %d, want 404", r.Code)
	}

	// A file that does not validate, through POST /reload.
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	reload := func() error {
		cfg, err := config.Load(path)
		if err != nil {
			gw.Refuse(err)
			return err
		}
		return gw.Apply(cfg)
	}
	admin := httptest.NewServer(gw.AdminHandler(gateway.AdminOptions{Token: "s3cret", Reload: reload}))
	defer admin.Close()
	post := func() result {
		return do(t, c, "POST", admin.URL+"/reload", http.Header{"Authorization": {"Bearer s3cret"}}, nil)
	}
	if err := os.WriteFile(path, []byte(good+"  - {name: old, upstream: nowhere}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := post()
	if r.Code != http.StatusUnprocessableEntity {
		t.Fatalf("POST /reload of an invalid file: %d %s", r.Code, r.Body)
	}
	var rs gateway.ReloadStatus
	if err := json.Unmarshal([]byte(r.Body), &rs); err != nil || rs.OK {
		t.Fatalf("reload answer %q: %v", r.Body, err)
	}
	for _, want := range []string{path + ":6:", "routes[1].upstream", "nowhere", "used twice"} {
		if !strings.Contains(rs.Error, want) {
			t.Errorf("reload error %q does not mention %q", rs.Error, want)
		}
	}
	if r := get(t, c, gw.URL+"/old"); r.Code != 200 {
		t.Errorf("old route after a refused file: %d", r.Code)
	}
	// The same file, fixed, is applied.
	if err := os.WriteFile(path, []byte(strings.Replace(good, "/old", "/fixed", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := post(); r.Code != 200 {
		t.Fatalf("POST /reload of a valid file: %d %s", r.Code, r.Body)
	}
	if r := get(t, c, gw.URL+"/fixed"); r.Code != 200 {
		t.Errorf("route of the applied file: %d", r.Code)
	}
	if st := gw.Status(); st.Version != 2 || !st.LastReload.OK {
		t.Errorf("status after a good reload: %+v", st.LastReload)
	}
}

const stateConfig = `
upstreams:
  bad: {targets: ["%s"]}
  good: {targets: ["%s"]}
routes:
  - name: fragile
    match: {path_prefix: /fragile}
    upstream: bad
    policies:
      circuit_breaker: {consecutive_failures: 2, open_for: %s}
  - name: limited
    match: {path_prefix: /limited}
    upstream: good
    policies:
      rate_limit: {limit: 1, period: 1h}
  - name: unrelated
    match: {path_prefix: %s}
    upstream: good
`

// TestReloadKeepsPolicyState opens a breaker and uses up a rate limit, then
// reloads with only an unrelated route changed: the breaker is still open
// and the limit still used up. Changing the breaker's own settings starts a
// new breaker.
func TestReloadKeepsPolicyState(t *testing.T) {
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	good := startUpstream(t, "good", nil)
	gw := startGateway(t, parseConfig(t, stateConfig, bad.URL, good.URL, "1m", "/u1"))
	c := newClient(t)
	for range 2 {
		get(t, c, gw.URL+"/fragile")
	}
	if r := get(t, c, gw.URL+"/limited"); r.Code != 200 {
		t.Fatalf("limited: %d", r.Code)
	}
	check := func(when string, breakerOpen bool) {
		t.Helper()
		before := bad.calls.Load()
		r := get(t, c, gw.URL+"/fragile")
		if open := r.Code == 503 && bad.calls.Load() == before; open != breakerOpen {
			t.Errorf("%s: fragile answered %d (upstream called: %v), want breaker open=%v", when, r.Code, bad.calls.Load() != before, breakerOpen)
		}
		if r := get(t, c, gw.URL+"/limited"); r.Code != 429 {
			t.Errorf("%s: limited answered %d, want 429: the rate limit's state was lost", when, r.Code)
		}
	}
	check("before reload", true)
	if err := gw.Apply(parseConfig(t, stateConfig, bad.URL, good.URL, "1m", "/u2")); err != nil {
		t.Fatal(err)
	}
	if r := get(t, c, gw.URL+"/u2"); r.Code != 200 {
		t.Fatalf("changed route: %d", r.Code)
	}
	check("after an unrelated change", true)
	if err := gw.Apply(parseConfig(t, stateConfig, bad.URL, good.URL, "2m", "/u2")); err != nil {
		t.Fatal(err)
	}
	check("after the breaker's settings changed", false)
}

// TestGracefulShutdown holds requests at the upstream while other clients
// keep sending, then shuts down: /readyz turns 503, the held requests
// complete with 200, new connections are refused, and no request that the
// gateway accepted fails.
func TestGracefulShutdown(t *testing.T) {
	const held = 4
	g := newGate(held)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			g.wait(r)
		}
		fmt.Fprint(w, "done")
	})
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	admin := httptest.NewServer(gw.AdminHandler(gateway.AdminOptions{}))
	defer admin.Close()
	c := newClient(t)
	if r := get(t, c, admin.URL+"/readyz"); r.Code != 200 {
		t.Fatalf("readyz before shutdown: %d", r.Code)
	}
	results := make(chan error, held)
	for range held {
		go func() {
			r, err := tryDo(c, "GET", gw.URL+"/slow", nil, nil)
			if err == nil && (r.Code != 200 || r.Body != "done") {
				err = fmt.Errorf("status %d body %q", r.Code, r.Body)
			}
			results <- err
		}()
	}
	g.awaitArrivals(t, held)
	l := startLoad(newClient(t), gw.URL+"/fast", 4, 5000)
	l.awaitProgress(t, 50)

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		shutdown <- gw.Shutdown(ctx)
	}()
	eventually(t, "/readyz to report shutdown", func() bool {
		r, err := tryDo(c, "GET", admin.URL+"/readyz", nil, nil)
		return err == nil && r.Code == 503
	})
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) with requests in flight", err)
	default:
	}
	g.open()
	for range held {
		if err := <-results; err != nil {
			t.Errorf("request in flight at shutdown: %v", err)
		}
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	l.finish(t)
	if _, err := tryDo(newClient(t), "GET", gw.URL+"/fast", nil, nil); err == nil || !isRefused(err) {
		t.Errorf("request after shutdown: %v, want connection refused", err)
	}
	select {
	case err := <-gw.served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	default:
		t.Errorf("Serve has not returned after Shutdown")
	}
	gw.stopped.Store(true)
}

// TestAdminAPI checks /status, /metrics, /healthz, /readyz and the bearer
// token of POST /reload.
func TestAdminAPI(t *testing.T) {
	up := startUpstream(t, "up", nil)
	cfgText := `
upstreams:
  up: {targets: ["%s"], balance: least_inflight}
routes:
  - name: api
    upstream: up
    policies:
      rate_limit: {limit: 100, period: 1m}
      circuit_breaker: {}
      concurrency: {max: 8}
`
	gw := startGateway(t, parseConfig(t, cfgText, up.URL))
	reloads := 0
	admin := httptest.NewServer(gw.AdminHandler(gateway.AdminOptions{
		Token:    "tok",
		Gatherer: gw.Registry,
		Reload: func() error {
			reloads++
			return gw.Apply(parseConfig(t, cfgText, up.URL))
		},
	}))
	defer admin.Close()
	c := newClient(t)
	auth := http.Header{"Authorization": {"Bearer tok"}}
	for range 4 {
		if r := get(t, c, gw.URL+"/x"); r.Code != 200 {
			t.Fatalf("%d", r.Code)
		}
	}

	t.Run("status", func(t *testing.T) {
		r := do(t, c, "GET", admin.URL+"/status", auth, nil)
		if r.Code != 200 || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %v", r.Code, r.Header)
		}
		var st gateway.Status
		if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Routes) != 1 || st.Routes[0].Name != "api" || st.Routes[0].Breaker != "closed" ||
			st.Routes[0].ConcurrencyLimit != 8 || !strings.Contains(st.Routes[0].RateLimit, "100") {
			t.Errorf("routes: %+v", st.Routes)
		}
		if len(st.Upstreams) != 1 || len(st.Upstreams[0].Targets) != 1 || !st.Upstreams[0].Targets[0].Healthy ||
			st.Upstreams[0].Targets[0].Breaker != "closed" || st.Upstreams[0].Balance != "least_inflight" {
			t.Errorf("upstreams: %+v", st.Upstreams)
		}
		if st.Version != 1 || !st.LastReload.OK {
			t.Errorf("version %d, last reload %+v", st.Version, st.LastReload)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		// A request is counted once its answer is sent, so the client can
		// see the answer before the count.
		var r result
		eventually(t, "the four requests counted", func() bool {
			r = do(t, c, "GET", admin.URL+"/metrics", auth, nil)
			return strings.Contains(r.Body, `sluice_request_duration_seconds_count{route="api"} 4`)
		})
		for _, want := range []string{
			`sluice_requests_total{code="200",outcome="ok",route="api"} 4`,
			`sluice_request_duration_seconds_count{route="api"} 4`,
			"# TYPE sluice_requests_total counter",
		} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("metrics lack %q:\n%s", want, grepLines(r.Body, "sluice_"))
			}
		}
	})
	t.Run("healthz and readyz", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if r := get(t, c, admin.URL+p); r.Code != 200 {
				t.Errorf("%s: %d", p, r.Code)
			}
		}
	})
	t.Run("reload token", func(t *testing.T) {
		for _, tt := range []struct {
			auth string
			code int
		}{{"", 401}, {"Bearer wrong", 401}, {"tok", 401}, {"Basic tok", 401}, {"Bearer tok", 200}} {
			h := http.Header{}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			r := do(t, c, "POST", admin.URL+"/reload", h, nil)
			if r.Code != tt.code {
				t.Errorf("Authorization %q: %d, want %d", tt.auth, r.Code, tt.code)
			}
			if tt.code == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		}
		if reloads != 1 {
			t.Errorf("reload ran %d times, want once (only with the token)", reloads)
		}
		if r := get(t, c, admin.URL+"/reload"); r.Code != http.StatusMethodNotAllowed {
			t.Errorf("GET /reload: %d, want 405", r.Code)
		}
		if gw.Status().Version != 2 {
			t.Errorf("version %d after one reload", gw.Status().Version)
		}
		if r := do(t, c, "GET", admin.URL+"/metrics", auth, nil); !strings.Contains(r.Body, `sluice_config_reloads_total{result="ok"} 1`) {
			t.Errorf("metrics lack the reload:\n%s", grepLines(r.Body, "reload"))
		}
	})
}
