package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// demoConfig is the gateway configuration of the demo; UPSTREAM is replaced
// by the fragile upstream's address.
const demoConfig = `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {level: error}
upstreams:
  inference: {targets: ["http://UPSTREAM"]}
routes:
  - name: infer
    match: {path_prefix: /v1/}
    upstream: inference
    policies:
      rate_limit: {algorithm: gcra, limit: 40, period: 1s, burst: 10, key: "header:X-API-Key"}
      retry: {attempts: 2, backoff: {initial: 20ms, max: 100ms}, on: [502, 503], budget: 0.1}
      circuit_breaker: {failure_rate: 0.5, window: {kind: time, size: 2s}, min_calls: 20, open_for: 1s, half_open_calls: 3}
      concurrency: {adaptive: {algorithm: default, min: 2, max: 64, initial: 32}}
      timeout: 1s
`

// demo runs a fragile "inference" upstream, the gateway in front of it and
// a bounded load, and prints once a second what each policy did.
func demo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 12*time.Second, "how long the load runs")
	rate := fs.Int("rate", 200, "requests per second sent by the well-behaved clients")
	outage := fs.Duration("outage", 0, "how long the upstream's outage lasts, from a third of the duration (0: a sixth of the duration)")
	printConfig := fs.Bool("print-config", false, "print the gateway configuration the demo uses and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printConfig {
		fmt.Fprint(stdout, demoConfig)
		return 0
	}
	if *outage <= 0 {
		*outage = *duration / 6
	}
	up, err := startFragileUpstream(*duration/3, *outage)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer up.close()
	cfg, err := config.Parse("demo.yaml", []byte(strings.ReplaceAll(demoConfig, "UPSTREAM", up.addr)))
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type started struct {
		addr net.Addr
		g    *gateway.Gateway
	}
	ready := make(chan started, 1)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	go func() {
		done <- runGateway(ctx, "", cfg, false, 0, log, func(gw, _ net.Addr, g *gateway.Gateway) { ready <- started{gw, g} })
	}()
	var s started
	select {
	case s = <-ready:
	case err := <-done:
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	fmt.Fprintf(stdout, `sluice demo: a fragile "inference" upstream (8 workers, ~40 ms a call, slower when queued;
an outage makes it fail 90%% of calls from %s to %s), the gateway in front of it at http://%s,
and load for %s: %d req/s from well-behaved clients plus one greedy client at 100 req/s.
Policies on the route: rate limit 40/s per API key (burst 10), retry once on 502/503 within a
10%% budget, circuit breaker at 50%% failures over 2 s, adaptive concurrency limit, 1 s timeout.

`, up.outageStart, up.outageEnd, s.addr, *duration, *rate)
	summary := runDemoLoad(ctx, stdout, "http://"+s.addr.String()+"/v1/infer", *duration, *rate, s.g)
	cancel()
	<-done
	fmt.Fprint(stdout, summary)
	return 0
}

// fragileUpstream is the demo's downstream: 8 workers, each call ~40 ms
// plus its wait for a worker, and an outage window in which 90% of calls
// fail: every call but each tenth.
type fragileUpstream struct {
	addr                   string
	srv                    *http.Server
	outageStart, outageEnd time.Duration
}

// startFragileUpstream starts the upstream with an outage of length
// outage from start, both measured from now.
func startFragileUpstream(start, outage time.Duration) (*fragileUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &fragileUpstream{addr: ln.Addr().String(), outageStart: start, outageEnd: start + outage}
	workers := make(chan struct{}, 8)
	begin := time.Now()
	var calls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		select {
		case workers <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-workers }()
		n := calls.Add(1)
		since := time.Since(begin)
		time.Sleep(time.Duration(30+rand.IntN(20)) * time.Millisecond)
		if since >= u.outageStart && since < u.outageEnd && n%10 != 0 {
			http.Error(w, `{"error":"model unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"answer":%d}`, n)
	})
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *fragileUpstream) close() { _ = u.srv.Close() }

// demoTally counts outcomes for one second of the demo, or for all of it.
type demoTally struct {
	mu        sync.Mutex
	outcomes  map[string]int
	latencies []time.Duration
}

func newTally() *demoTally { return &demoTally{outcomes: map[string]int{}} }

func (t *demoTally) add(outcome string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[outcome]++
	if outcome == "ok" {
		t.latencies = append(t.latencies, d)
	}
}

func (t *demoTally) quantile(q float64) time.Duration {
	if len(t.latencies) == 0 {
		return 0
	}
	s := slices.Clone(t.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// demoColumns are the outcomes shown, in order, with their headings.
var demoColumns = []struct{ key, head string }{
	{"ok", "ok"},
	{"rate_limited", "429 rate"},
	{"circuit_open", "503 open"},
	{"overloaded", "503 limit"},
	{"upstream_status", "5xx upstr"},
	{"timeout", "504"},
	{"other", "other"},
}

// runDemoLoad sends the load, prints a line a second and returns the
// summary.
func runDemoLoad(ctx context.Context, stdout io.Writer, url string, d time.Duration, rate int, g *gateway.Gateway) string {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}
	total := newTally()
	var cur atomic.Pointer[demoTally]
	cur.Store(newTally())
	var wg sync.WaitGroup
	send := func(key string) {
		defer wg.Done()
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("X-API-Key", key)
		outcome := "other"
		resp, err := client.Do(req)
		if err == nil {
			var body struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
			resp.Body.Close()
			gatewayReason := slices.ContainsFunc(demoColumns, func(c struct{ key, head string }) bool { return c.key == body.Error })
			switch {
			case resp.StatusCode == http.StatusOK:
				outcome = "ok"
			case gatewayReason:
				outcome = body.Error // the gateway's own answer names the policy
			case resp.StatusCode >= 500:
				outcome = "upstream_status" // the upstream's error, passed through
			}
		}
		lat := time.Since(start)
		cur.Load().add(outcome, lat)
		total.add(outcome, lat)
	}
	header := fmt.Sprintf("%4s", "t")
	for _, c := range demoColumns {
		header += fmt.Sprintf(" %9s", c.head)
	}
	header += fmt.Sprintf(" %8s %8s %9s %6s\n", "p50", "p99", "breaker", "limit")
	fmt.Fprint(stdout, header)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// Clients: numbered well-behaved keys share rate; "greedy" sends 100/s.
	interval := time.Second / time.Duration(rate+100)
	pace := time.NewTicker(interval)
	defer pace.Stop()
	deadline := time.After(d)
	second, n := 0, 0
	maxRequests := (rate + 100) * int(d/time.Second+1)
loop:
	for n < maxRequests {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-pace.C:
			key := fmt.Sprintf("client-%d", n%20)
			if n*100/(rate+100) != (n+1)*100/(rate+100) { // 100 of every rate+100, spread evenly
				key = "greedy"
			}
			n++
			wg.Add(1)
			go send(key)
		case <-tick.C:
			second++
			t := cur.Swap(newTally())
			printDemoLine(stdout, second, t, g)
		}
	}
	wg.Wait()
	printDemoLine(stdout, second+1, cur.Load(), g)
	return demoSummary(total)
}

func printDemoLine(w io.Writer, second int, t *demoTally, g *gateway.Gateway) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := fmt.Sprintf("%3ds", second)
	for _, c := range demoColumns {
		line += fmt.Sprintf(" %9d", t.outcomes[c.key])
	}
	st := g.Status()
	breakerState, limit := "-", 0
	if len(st.Routes) > 0 {
		breakerState, limit = st.Routes[0].Breaker, st.Routes[0].ConcurrencyLimit
	}
	line += fmt.Sprintf(" %8s %8s %9s %6d\n", t.quantile(0.5).Round(time.Millisecond), t.quantile(0.99).Round(time.Millisecond), breakerState, limit)
	fmt.Fprint(w, line)
}

func demoSummary(t *demoTally) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := 0
	for _, n := range t.outcomes {
		all += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nsummary: %d requests\n", all)
	explain := map[string]string{
		"ok":              "answered by the upstream",
		"rate_limited":    "rejected at once by the rate limit (the greedy client, mostly)",
		"circuit_open":    "rejected at once while the breaker was open: the upstream got time to recover",
		"overloaded":      "shed by the adaptive concurrency limit instead of queueing",
		"upstream_status": "upstream errors that a retry could not fix",
		"timeout":         "cut at the 1 s timeout",
		"other":           "anything else (client-side errors)",
	}
	for _, c := range demoColumns {
		fmt.Fprintf(&b, "  %-16s %6d  %s\n", c.key, t.outcomes[c.key], explain[c.key])
	}
	fmt.Fprintf(&b, "  latency of answered requests: p50 %s, p99 %s\n", t.quantile(0.5).Round(time.Millisecond), t.quantile(0.99).Round(time.Millisecond))
	return b.String()
}
