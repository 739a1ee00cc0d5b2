package httpguard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/chain"
	"github.com/sluicehq/sluice/httpguard"
	"github.com/sluicehq/sluice/retry"
)

// full is an admission policy that is always full, standing in for a
// concurrency limit.
type full struct{}

func (full) Acquire(context.Context) (sluice.Permit, error) {
	return sluice.Permit{}, &sluice.Rejection{Reason: sluice.Overloaded, RetryAfter: 2 * time.Second}
}

func (f full) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, f, next)
}

func ExampleMiddleware() {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	guard := sluice.New(full{})
	srv := httptest.NewServer(httpguard.Middleware(guard, httpguard.Options{})(hello))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"))
	fmt.Print(string(body))
	// Output:
	// 503 2
	// {"error":"overloaded","retry_after":2}
}

func ExampleTransport() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "warming up", http.StatusServiceUnavailable)
	}))
	defer upstream.Close()

	// The guard counts the 503 as a failure; the caller still gets the
	// response itself.
	client := &http.Client{Transport: httpguard.Transport(sluice.New(), nil, httpguard.Options{})}
	resp, err := client.Get(upstream.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"))
	fmt.Print(string(body))
	// Output:
	// 503 30
	// warming up
}

func ExampleWriteError() {
	rec := httptest.NewRecorder()
	httpguard.WriteError(rec, &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 1500 * time.Millisecond})
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	fmt.Print(rec.Body.String())
	// Output:
	// 429 2
	// {"error":"rate_limited","retry_after":2}
}

func ExampleSetRateLimitHeaders() {
	h := http.Header{}
	httpguard.SetRateLimitHeaders(h, "default", 100, 42, time.Minute, 30*time.Second)
	fmt.Println("RateLimit-Policy:", h.Get("RateLimit-Policy"))
	fmt.Println("RateLimit:", h.Get("RateLimit"))
	// Output:
	// RateLimit-Policy: "default";q=100;w=60
	// RateLimit: "default";r=42;t=30
}

// A rate limiter reports its decision on admitted requests with AddHeaders.
func ExampleAddHeaders() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpguard.AddHeaders(r.Context(), httpguard.RateLimitHeaders{
			Policy: "per-key", Limit: 10, Remaining: 9, Window: time.Second, Reset: 100 * time.Millisecond,
		})
		io.WriteString(w, "ok")
	})
	rec := httptest.NewRecorder()
	httpguard.Middleware(sluice.New(), httpguard.Options{})(h).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	fmt.Println(rec.Header().Get("RateLimit"))
	// Output:
	// "per-key";r=9;t=1
}

// Behind a proxy on 10.0.0.0/8, each client address in X-Forwarded-For has
// its own limit; what a client wrote to the left of the proxy's entry is
// never read.
func ExampleByClientIP() {
	key := httpguard.ByClientIP(netip.MustParsePrefix("10.0.0.0/8"))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.7:51234"
	r.Header.Set("X-Forwarded-For", "192.0.2.1, 203.0.113.9")
	fmt.Println(key(r))
	// Output:
	// 203.0.113.9
}

// A client whose guard retries what the gateway retries: the GET is sent
// again after a 503, the POST is not (it carries no Idempotency-Key).
func ExampleRetryIf() {
	calls := map[string]int{}
	var mu sync.Mutex
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.Method]++
		n := calls[r.Method]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer upstream.Close()

	g, err := chain.New().
		Retry(retry.Options{RetryIf: httpguard.RetryIf}).
		Breaker(breaker.Options{Name: "upstream"}).
		Guard()
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: httpguard.Transport(g, nil, httpguard.Options{})}
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, upstream.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(method, resp.StatusCode, "after", calls[method], "request(s)")
	}
	// Output:
	// GET 200 after 2 request(s)
	// POST 503 after 1 request(s)
}
