package httpguard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/httpguard"
	"github.com/sluicehq/sluice/ratelimit"
)

// The middleware with sluice's real rate limiter: the request over the limit
// gets 429 with Retry-After and the RateLimit headers the limiter reports.
func TestMiddlewareWithRealRateLimiter(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	lim, err := ratelimit.New(ratelimit.Options{
		Name:  "api",
		Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: 2, Period: time.Minute},
		Clock: fc,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := httpguard.Middleware(sluice.New(lim), httpguard.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	codes := []int{}
	var last *http.Response
	for i := 0; i < 3; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		last = resp
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("codes = %v, want [200 200 429]", codes)
	}
	if last.Header.Get("Retry-After") != "60" {
		t.Errorf("Retry-After = %q, want 60", last.Header.Get("Retry-After"))
	}
	if got := last.Header.Get("RateLimit-Policy"); got != `"api";q=2;w=60` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if got := last.Header.Get("RateLimit"); got != `"api";r=0;t=60` {
		t.Errorf("RateLimit = %q", got)
	}
}

// The middleware with sluice's real breaker: 5xx answers open it, and then
// requests are refused with 503 without reaching the handler.
func TestMiddlewareWithRealBreaker(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	br, err := breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 2, OpenDuration: 5 * time.Second, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := httpguard.Middleware(sluice.New(br), httpguard.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusInternalServerError)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var codes []int
	for i := 0; i < 3; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if i == 2 && resp.Header.Get("Retry-After") != "5" {
			t.Errorf("Retry-After = %q, want 5", resp.Header.Get("Retry-After"))
		}
	}
	if codes[0] != 500 || codes[1] != 500 || codes[2] != 503 || calls != 2 {
		t.Fatalf("codes = %v, handler calls = %d; want [500 500 503] and 2", codes, calls)
	}
}
