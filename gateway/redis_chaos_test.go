package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/chaosproxy"
	"github.com/sluicehq/sluice/internal/redistest"
)

// Parameters of TestRedisChaos.
const (
	// chaosTimeout is store.redis.timeout: long enough that a healthy
	// Redis under the race detector on a loaded machine answers within it.
	chaosTimeout = 500 * time.Millisecond
	// chaosLimit is the route's limit per client.
	chaosLimit = 3
	// chaosWorkers send requests at once during a fault.
	chaosWorkers = 4
	// chaosThreshold and chaosOpenFor are the Redis store's defaults for
	// its circuit around Redis, which the configuration does not set.
	chaosThreshold = 5
	chaosOpenFor   = time.Second
	// chaosHang bounds each request's answer during a fault: a request
	// waits for at most two calls to Redis, its own and the one in flight
	// ahead of it (group commit), each cut at chaosTimeout; the rest is
	// slack for a loaded machine, not a measured figure.
	chaosHang = 2*chaosTimeout + 2*time.Second
)

// chaosRequests is how many requests each worker sends during a fault:
// SLUICE_CHAOS_REQUESTS, or 20 (scripts/chaos.sh sends more).
func chaosRequests(t *testing.T) int {
	v := os.Getenv("SLUICE_CHAOS_REQUESTS")
	if v == "" {
		return 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SLUICE_CHAOS_REQUESTS=%q, want a positive integer", v)
	}
	return n
}

// chaosFault is a way for Redis to fail, and its end.
type chaosFault struct {
	name        string
	start, heal func(srv *redistest.Server, p *chaosproxy.Proxy)
}

var chaosFaults = []chaosFault{
	{"blackhole", // a network path that drops everything, then heals
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Blackhole() },
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Pass() }},
	{"slow", // every answer later than the timeout
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Delay(4 * chaosTimeout) },
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Pass() }},
	{"reset", // connections reset, new ones refused
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Reset() },
		func(_ *redistest.Server, p *chaosproxy.Proxy) { p.Pass() }},
	{"killed", // redis-server killed, then restarted empty on its port
		func(srv *redistest.Server, _ *chaosproxy.Proxy) { srv.Stop() },
		func(srv *redistest.Server, _ *chaosproxy.Proxy) { srv.Restart() }},
}

// TestRedisChaos puts a TCP proxy between the gateway and redis-server and
// makes Redis fail in each way of chaosFaults, for each store.redis.on_error
// choice, on both engines. During the fault every request gets the answer
// the choice configures (open: 200; closed: 429 with Retry-After 1; local:
// the route's limit applied by this gateway alone), within chaosHang, and
// the store's circuit keeps all but a bounded number of them from waiting
// for Redis at all. When the fault ends, Redis decides again by itself,
// with no request lost on the way: the limit is exact again and shared
// with a second gateway that talks to Redis directly.
func TestRedisChaos(t *testing.T) {
	requests := chaosRequests(t)
	forEngines(t, func(t *testing.T, engine string) {
		for _, mode := range []string{"open", "closed", "local"} {
			for _, fault := range chaosFaults {
				t.Run(mode+"/"+fault.name, func(t *testing.T) {
					testRedisChaos(t, engine, mode, fault, requests)
				})
			}
		}
	})
}

func testRedisChaos(t *testing.T, engine, mode string, fault chaosFault, requests int) {
	srv := redistest.StartServer(t)
	proxy, err := chaosproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	up := startUpstream(t, "up", nil)
	// The gateway under test talks to Redis through the proxy, on the real
	// clock: Redis's timeout and the circuit around it run on it. The
	// control gateway talks to Redis directly and fails closed: its
	// admissions come from Redis alone.
	gw := startGatewayClock(t, chaosConfig(t, engine, proxy.Addr(), mode, chaosTimeout, up), nil)
	ctl := startGatewayClock(t, chaosConfig(t, engine, srv.Addr, "closed", upTimeout, up), nil)
	c := newClient(t)

	// The first call to Redis also dials it and loads the script: on a
	// loaded machine it may take longer than the timeout, so a client of
	// its own warms the store up until Redis has decided once (bounded).
	for i := 0; ; i++ {
		if r := do(t, c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {"warm-up"}}, nil); r.Code == 200 {
			break
		}
		if i == 20 {
			t.Fatal("Redis never decided for the gateway under test")
		}
	}
	// Redis decides: the limit, then 429 until Redis's far-off refill.
	expectRedisLimit(t, c, gw, "before")

	fault.start(srv, proxy)
	start := time.Now()
	var wg sync.WaitGroup
	slow := make([]int, chaosWorkers)
	for w := range chaosWorkers {
		wg.Go(func() {
			client := "down-" + strconv.Itoa(w)
			for i := range requests {
				began := time.Now()
				r, err := tryDo(c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {client}}, nil)
				took := time.Since(began)
				if err != nil {
					t.Errorf("%s request %d: %v", client, i, err)
					return
				}
				if took >= chaosTimeout {
					slow[w]++
				}
				if took > chaosHang {
					t.Errorf("%s request %d: answered after %v, want at most %v", client, i, took, chaosHang)
				}
				if want := degradedAnswer(mode, i); !want.matches(r) {
					t.Errorf("%s request %d during the fault: %d, Retry-After %q; want %s",
						client, i, r.Code, r.Header.Get("Retry-After"), want)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The circuit opens after chaosThreshold consecutive failures (calls
	// that fail together count as one) and then lets one probe through per
	// chaosOpenFor: a request waits for Redis only before it opens, or as a
	// probe, or behind one.
	waited := 0
	for _, n := range slow {
		waited += n
	}
	// scripts/chaos.sh reports this line.
	t.Logf("chaos %s: %d of %d requests waited for Redis's timeout over %v", t.Name(), waited, chaosWorkers*requests, elapsed)
	if most := chaosWorkers * (chaosThreshold + 2 + int(elapsed/chaosOpenFor)); waited > most {
		t.Errorf("want at most %d requests waiting for Redis: the circuit should answer the rest at once", most)
	}

	fault.heal(srv, proxy)
	recoverRedis(t, c, gw, ctl, mode)
	expectRedisLimit(t, c, gw, "after")
	// Shared with the control gateway: the client "after" is spent there too.
	r := do(t, c, http.MethodGet, ctl.URL+"/", http.Header{"X-Client": {"after"}}, nil)
	if r.Code != 429 || retryAfter(r) < 1000 {
		t.Errorf("control gateway after recovery: %d, Retry-After %q; want 429 from Redis", r.Code, r.Header.Get("Retry-After"))
	}
}

// upTimeout is store.redis.timeout where no test call waits for it (a
// Redis that is down refuses connections at once): long enough that a
// Redis that is up answers within it on a loaded machine, where
// chaosTimeout turned a late answer into a degraded one.
const upTimeout = 10 * time.Second

// TestRedisDownAtStart starts the gateway while redis-server is down: it
// serves all the same, answering as on_error says, and Redis decides once
// it is up, on both engines.
func TestRedisDownAtStart(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, mode := range []string{"open", "closed", "local"} {
			t.Run(mode, func(t *testing.T) {
				srv := redistest.StartServer(t)
				srv.Stop()
				up := startUpstream(t, "up", nil)
				gw := startGatewayClock(t, chaosConfig(t, engine, srv.Addr, mode, upTimeout, up), nil)
				c := newClient(t)
				for i := range chaosLimit + 1 {
					r := do(t, c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {"down"}}, nil)
					if want := degradedAnswer(mode, i); !want.matches(r) {
						t.Errorf("request %d with Redis down: %d, Retry-After %q; want %s",
							i, r.Code, r.Header.Get("Retry-After"), want)
					}
				}
				srv.Restart()
				ctl := startGatewayClock(t, chaosConfig(t, engine, srv.Addr, "closed", upTimeout, up), nil)
				recoverRedis(t, c, gw, ctl, mode)
				expectRedisLimit(t, c, gw, "after")
			})
		}
	})
}

// chaosConfig is the configuration of the chaos tests' gateways: a route
// to up limited to chaosLimit requests per client (X-Client) by GCRA on
// the Redis at redisAddr.
func chaosConfig(t *testing.T, engine, redisAddr, onError string, timeout time.Duration, up *upstream) *config.Config {
	t.Helper()
	return parseConfig(t, `
server: {engine: %s}
store:
  kind: redis
  redis: {addrs: ["%s"], on_error: %s, timeout: %s, prefix: chaos}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: rl
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: %d, period: %s, key: "header:X-Client"}
`, engine, redisAddr, onError, timeout, up.URL, chaosLimit, redisPeriod)
}

// expectRedisLimit checks that Redis decides for client on gw: chaosLimit
// requests admitted, then a 429 with Redis's far-off Retry-After.
func expectRedisLimit(t *testing.T, c *http.Client, gw *testGateway, client string) {
	t.Helper()
	for i := range chaosLimit + 1 {
		r := do(t, c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {client}}, nil)
		want := 200
		if i == chaosLimit {
			want = 429
		}
		if r.Code != want || want == 429 && retryAfter(r) < 1000 {
			t.Fatalf("client %q, request %d: %d, Retry-After %q; want %d decided by Redis",
				client, i, r.Code, r.Header.Get("Retry-After"), want)
		}
	}
}

// recoverRedis waits until Redis decides for gw again, checking that every
// answer until then is the configured one. Each poll spends a new client's
// whole quota in Redis through the control gateway, then asks gw: only
// Redis answers it with a 429 and a far-off Retry-After (a degraded answer
// is 200, or 429 with Retry-After 1), and a call that reached Redis late,
// after a timeout, cannot make it so.
func recoverRedis(t *testing.T, c *http.Client, gw, ctl *testGateway, mode string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("Redis does not decide for the gateway %v after the fault ended", waitLimit)
		}
		client := "recover-" + strconv.Itoa(i)
		spent := true
		for range chaosLimit {
			r, err := tryDo(c, http.MethodGet, ctl.URL+"/", http.Header{"X-Client": {client}}, nil)
			if err != nil {
				t.Fatalf("control gateway: %v", err)
			}
			spent = spent && r.Code == 200 // the control gateway may still be reconnecting
		}
		if !spent {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r, err := tryDo(c, http.MethodGet, gw.URL+"/", http.Header{"X-Client": {client}}, nil)
		if err != nil {
			t.Fatalf("request %d after the fault: %v", i, err)
		}
		if r.Code == 429 && retryAfter(r) >= 1000 {
			return
		}
		if want := degradedAnswer(mode, 0); !want.matches(r) {
			t.Fatalf("request %d after the fault: %d, Retry-After %q; want %s or Redis's 429",
				i, r.Code, r.Header.Get("Retry-After"), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answer is an expected status and, for a 429, the range of Retry-After.
type answer struct {
	code     int
	min, max int // Retry-After in seconds, for a 429
}

func (a answer) matches(r result) bool {
	if r.Code != a.code {
		return false
	}
	ra := retryAfter(r)
	return a.code != 429 || ra >= a.min && ra <= a.max
}

func (a answer) String() string {
	if a.code != 429 {
		return strconv.Itoa(a.code)
	}
	return fmt.Sprintf("429 with Retry-After %d to %d", a.min, a.max)
}

// degradedAnswer is the answer to a client's i-th request (from 0) while
// Redis cannot answer, as on_error says: open admits; closed rejects until
// the circuit's probe (Retry-After 1); local applies the limit in this
// gateway's memory, whose refill is as far off as Redis's.
func degradedAnswer(mode string, i int) answer {
	switch mode {
	case "closed":
		return answer{code: 429, min: 1, max: 1}
	case "local":
		if i >= chaosLimit {
			return answer{code: 429, min: 1000, max: 2 * redisPeriodSeconds}
		}
	}
	return answer{code: 200}
}

// retryAfter is the response's Retry-After in seconds, or -1.
func retryAfter(r result) int {
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil {
		return -1
	}
	return n
}
