package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/gateway"
)

// browserLimit bounds the browser test as a whole: the page is sampled once
// a second of real time, and the test waits for a handful of samples.
const browserLimit = 90 * time.Second

// chromium returns the path of a Chromium to drive, skipping the test when
// there is none, unless SLUICE_REQUIRE_BROWSER=1 (CI), which fails it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("SLUICE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium found, and SLUICE_REQUIRE_BROWSER=1")
	}
	t.Skip("no Chromium found (apt-get install chromium); SLUICE_REQUIRE_BROWSER=1 makes this a failure")
	return ""
}

// TestDashboardInBrowser opens the dashboard of a gateway under a little
// load in headless Chromium, on each engine: it signs in with the admin
// token, sees every route, sees the adaptive limit's chart move, and sees
// the breaker of a route and its target's open (with their transitions
// listed) once that route's upstream starts failing.
func TestDashboardInBrowser(t *testing.T) {
	path := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserLimit)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	forEngines(t, func(t *testing.T, engine string) {
		// A browser context of its own: no session cookie of the other
		// engine's gateway (cookies do not tell ports apart).
		tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		defer cancelTab()
		browseDashboard(t, tab, engine)
	})
}

func browseDashboard(t *testing.T, tab context.Context, engine string) {
	var failing atomic.Bool
	good := startUpstream(t, "good", nil)
	flaky := startUpstream(t, "flaky", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	// The real clock: the sampler's second is the page's.
	tg := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  good: {targets: ["%s"]}
  flaky: {targets: ["%s"]}
routes:
  - name: flaky
    upstream: flaky
    match: {path_prefix: /flaky}
    policies: {circuit_breaker: {consecutive_failures: 5, open_for: 1m}}
  - name: limited
    upstream: good
    match: {path_prefix: /limited}
    policies: {rate_limit: {limit: 5, period: 1s, key: route}}
  - name: api
    upstream: good
    policies: {concurrency: {adaptive: {algorithm: aimd, initial: 2, min: 1, max: 64}}}
`, engine, good.URL, flaky.URL), nil)
	admin := httptest.NewServer(tg.AdminHandler(gateway.AdminOptions{Token: "s3cret", Gatherer: tg.Registry}))
	t.Cleanup(admin.Close)
	defer chromedp.Do(tab, chromedp.Navigate("about:blank")) // closes the event stream before the servers stop

	if err := chromedp.Do(tab,
		chromedp.Navigate(admin.URL+"/"), // redirected to the dashboard, which asks for the token
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "s3cret"),
		chromedp.Click(chromedp.ID("sign-in")),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}
	for _, route := range []string{"flaky", "limited", "api"} {
		if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`section.route[data-route="`+route+`"]`))); err != nil {
			t.Fatalf("route %s not shown: %v", route, err)
		}
	}

	// A little load, from now on: four clients on api, one on each other
	// route, each until the test ends or a bound on its requests.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	c := newClient(t)
	for _, p := range []string{"/", "/", "/", "/", "/flaky", "/limited"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200_000 {
				select {
				case <-stop:
					return
				default:
				}
				if r, err := tryDo(c, "GET", tg.URL+p, nil, nil); err != nil || r.Code == 0 {
					return
				}
			}
		}()
	}

	const served = `Number(document.querySelector('section.route[data-route="api"] tr[data-outcome="served"] td.n').textContent) > 0`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](served, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("api's served requests per second never above 0: %v", err)
	}
	// The limit chart moved: its line has points at more than one height.
	const moved = `new Set(document.querySelector('section.route[data-route="api"] polyline.limit')
		.getAttribute("points").trim().split(" ").filter(Boolean).map(p => p.split(",")[1])).size > 1`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](moved, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("api's limit chart never moved: %v", err)
	}

	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`section.route[data-route="flaky"] .breaker[data-state="closed"]`))); err != nil {
		t.Fatalf("flaky's breaker not shown closed: %v", err)
	}
	failing.Store(true)
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`section.route[data-route="flaky"] .breaker[data-state="open"]`))); err != nil {
		t.Fatalf("flaky's breaker not shown open: %v", err)
	}
	const transition = `[...document.querySelectorAll('section.route[data-route="flaky"] ul.transitions li')]
		.some(li => li.textContent.endsWith("closed → open"))`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](transition, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("flaky's transition to open not listed: %v", err)
	}
	// The same five failures in a row opened the target's passive-health
	// breaker.
	targetTransition := `[...document.querySelectorAll('tr[data-target="` + flaky.URL + `"] ul.transitions li')]
		.some(li => li.textContent.endsWith("closed → open"))`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](targetTransition, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("flaky's target's transition to open not listed: %v", err)
	}
}

// TestDashboardRouteNamesInBrowser shows the dashboard of routes named as
// the properties every JavaScript object has ("constructor", "__proto__",
// "toString") in headless Chromium, on each engine: every route is shown.
// (The page looked up its routes' rates, transitions and points in plain
// objects, found the inherited properties there, and threw before it drew
// any route.)
func TestDashboardRouteNamesInBrowser(t *testing.T) {
	path := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserLimit)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	names := []string{"constructor", "__proto__", "toString", "api"}
	forEngines(t, func(t *testing.T, engine string) {
		tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		defer cancelTab()
		up := startUpstream(t, "up", nil)
		tg := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: constructor, upstream: up, match: {path_prefix: /a}, policies: {circuit_breaker: {consecutive_failures: 3}}}
  - {name: __proto__, upstream: up, match: {path_prefix: /b}}
  - {name: toString, upstream: up, match: {path_prefix: /c}}
  - {name: api, upstream: up}
`, engine, up.URL), nil)
		admin := httptest.NewServer(tg.AdminHandler(gateway.AdminOptions{Gatherer: tg.Registry}))
		t.Cleanup(admin.Close)
		defer chromedp.Do(tab, chromedp.Navigate("about:blank")) // closes the event stream before the servers stop
		for _, p := range []string{"/a", "/b", "/c", "/"} {
			if r := get(t, newClient(t), tg.URL+p); r.Code != 200 {
				t.Fatalf("GET %s: %d", p, r.Code)
			}
		}
		if err := chromedp.Do(tab, chromedp.Navigate(admin.URL+"/dashboard")); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			wctx, wcancel := context.WithTimeout(tab, 10*time.Second) // the page draws every second
			err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(`section.route[data-route="`+name+`"]`)))
			wcancel()
			if err != nil {
				t.Fatalf("route %q not shown: %v", name, err)
			}
		}
	})
}
