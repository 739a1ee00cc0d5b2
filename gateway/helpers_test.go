package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/telemetry"
)

// waitLimit bounds every wait of these tests (server readiness, a request
// reaching an upstream, a polled condition). It is a safety net against a
// hung test, never a measured delay: a passing test never waits for it.
const waitLimit = 20 * time.Second

// testGateway is a gateway serving on a loopback listener of its own.
type testGateway struct {
	*gateway.Gateway
	URL      string // http://127.0.0.1:port
	Addr     string // 127.0.0.1:port
	Clock    *clock.Fake
	Registry *prometheus.Registry
	served   chan error
	stopped  atomic.Bool
}

// parseConfig parses YAML text, failing the test on error. %s verbs in text
// are filled from args first.
func parseConfig(t testing.TB, text string, args ...any) *config.Config {
	t.Helper()
	if len(args) > 0 {
		text = fmt.Sprintf(text, args...)
	}
	cfg, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\nerror: %v", text, err)
	}
	return cfg
}

// startGateway builds a gateway for cfg with a fake clock and serves it on
// 127.0.0.1:0. The gateway is shut down when the test ends.
func startGateway(t testing.TB, cfg *config.Config) *testGateway {
	t.Helper()
	return startGatewayClock(t, cfg, clock.NewFake(time.Time{}))
}

func startGatewayClock(t testing.TB, cfg *config.Config, fc *clock.Fake) *testGateway {
	t.Helper()
	checkLeaks(t)
	withH2Loops(cfg)
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
	opts := gateway.Options{Logger: log, Metrics: m}
	if fc != nil {
		opts.Clock = fc
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &testGateway{Gateway: g, Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(),
		Clock: fc, Registry: reg, served: make(chan error, 1)}
	go func() { tg.served <- g.Serve(ln) }()
	t.Cleanup(func() { tg.stop(t) })
	return tg
}

// stop shuts the gateway down (once) and checks that Serve returned nil.
func (tg *testGateway) stop(t testing.TB) {
	t.Helper()
	if tg.stopped.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := tg.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	} else {
		// Every connection's place under server.max_connections is
		// freed once its socket is closed, whatever path it took.
		eventually(t, "every connection's place freed", func() bool { return gateway.OpenSlots(tg.Gateway) == 0 })
	}
	select {
	case err := <-tg.served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-ctx.Done():
		t.Errorf("Serve did not return after Shutdown")
	}
}

// newClient returns an HTTP client that never uses a proxy from the
// environment and whose requests are bounded by waitLimit.
func newClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// result is a response read whole.
type result struct {
	Code   int
	Header http.Header
	Body   string
}

// errorBody is the gateway's JSON error body.
type errorBody struct {
	Error      string `json:"error"`
	RetryAfter int    `json:"retry_after"`
}

func (r result) errorBody(t testing.TB) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.Body, err)
	}
	return e
}

// do sends a request and reads the whole response. header may be nil.
func do(t testing.TB, c *http.Client, method, url string, header http.Header, body io.Reader) result {
	t.Helper()
	r, err := tryDo(c, method, url, header, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func tryDo(c *http.Client, method, url string, header http.Header, body io.Reader) (result, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return result{}, err
	}
	for k, vs := range header {
		for _, v := range vs {
			if strings.EqualFold(k, "Host") {
				req.Host = v
				continue
			}
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, fmt.Errorf("reading body: %w", err)
	}
	return result{Code: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

func get(t testing.TB, c *http.Client, url string) result {
	t.Helper()
	return do(t, c, http.MethodGet, url, nil, nil)
}

// upstream is an httptest server that counts its requests and records the
// last one's headers.
type upstream struct {
	*httptest.Server
	calls atomic.Int64

	mu   sync.Mutex
	last *http.Request // headers and URL of the last request (body not kept)
}

// startUpstream starts an upstream on 127.0.0.1 answering with h (nil: 200
// and the body "NAME PATH").
func startUpstream(t testing.TB, name string, h http.HandlerFunc) *upstream {
	t.Helper()
	checkLeaks(t)
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s", name, r.URL.Path)
		}
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		u.mu.Lock()
		u.last = r.Clone(context.Background())
		u.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// gatewayTo starts a gateway on engine whose one route, without
// policies, sends everything to the plain-HTTP target at addr (host:port).
func gatewayTo(t testing.TB, engine, addr string) *testGateway {
	t.Helper()
	return serverGateway(t, engine, "", "http://"+addr)
}

// proxyTo starts a gateway with one route, without policies, to up.
func proxyTo(t testing.TB, up *upstream) *testGateway {
	return startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    upstream: up
`, up.URL))
}

func (u *upstream) lastRequest() *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

// addr is the upstream's host:port.
func (u *upstream) addr() string { return strings.TrimPrefix(u.URL, "http://") }

// gate holds requests at an upstream until released: arrived receives one
// value per request that reached the handler.
type gate struct {
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(n int) *gate {
	return &gate{arrived: make(chan struct{}, n), release: make(chan struct{})}
}

// wait is called by a handler: it announces the request and blocks until
// open (or the client went away).
func (g *gate) wait(r *http.Request) {
	g.arrived <- struct{}{}
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// awaitArrivals waits for n requests to reach the gate.
func (g *gate) awaitArrivals(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-g.arrived:
		case <-deadline.C:
			t.Fatalf("only %d of %d requests reached the upstream", i, n)
		}
	}
}

// eventually polls cond until it holds, failing the test after waitLimit.
// It is used only to wait for a state that goroutines reach on their own
// (a request queued, a server listening), never to measure time.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// rawRequest writes req as is on a new connection to addr and returns the
// status line and headers of the response.
func rawRequest(t testing.TB, addr, req string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading response to %q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// metricsText returns the gateway's Prometheus registry in text format, as
// the admin API's /metrics serves it. (Not from an AdminHandler: its
// dashboard's sampler keeps a timer on the gateway's clock, which would
// keep a pumped fake clock moving.)
func (tg *testGateway) metricsText(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(tg.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	r := get(t, newClient(t), srv.URL+"/metrics")
	if r.Code != 200 {
		t.Fatalf("/metrics: %d %s", r.Code, r.Body)
	}
	return r.Body
}

// routeStatus returns the /status entry of a route.
func (tg *testGateway) routeStatus(t testing.TB, name string) gateway.RouteStatus {
	t.Helper()
	for _, r := range tg.Status().Routes {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no route %q in status", name)
	return gateway.RouteStatus{}
}

// isRefused reports whether err is a refused connection (nothing listens).
func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// checkLeaks fails t if goroutines that were not running when it was first
// called for t are still running once t's other cleanups (the gateway's
// shutdown, the upstreams' close) have run. The helpers that start servers
// call it first, so it checks after everything they started has stopped.
// The gateway tests run one at a time, so whatever is left is the test's
// own. Goroutines of fasthttp and gnet that outlive a server by design and
// end by themselves (idle-pool cleaners, the shared date and address
// caches) are not counted.
func checkLeaks(t testing.TB) {
	if _, seen := leakChecked.LoadOrStore(t, true); seen {
		return
	}
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		leakChecked.Delete(t)
		if t.Failed() {
			return // a failed test may leave what it waited for
		}
		if err := goleak.Find(append(lingering, before)...); err != nil {
			t.Errorf("goroutines left running: %v", err)
		}
	})
}

var leakChecked sync.Map // testing.TB → true: checkLeaks registered for it

var lingering = []goleak.Option{ // never appended to in place: len == cap
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*goWorker).run.func1"),
}

// forEngines runs test once on each engine (server.engine).
func forEngines(t *testing.T, test func(t *testing.T, engine string)) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) { test(t, engine) })
	}
}
