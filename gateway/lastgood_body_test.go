package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLastGoodNeverAnswersRequestsWithBodies checks, on both engines, that
// the last-good level never gives the answer to a GET with a body: the
// body is not in the key, so the answer to one body (a search, a query
// with its caller's terms) would go to a request with another, or with
// none. (It went: a GET with another body got the first body's answer.)
func TestLastGoodNeverAnswersRequestsWithBodies(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var failing atomic.Bool
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if failing.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintf(w, "answer to %q", b)
		})
		tg := routedGateway(t, engine, up, `
  - name: r
    upstream: up
    policies:
      fallback: {last_good: {}}
`)
		c := newClient(t)
		if res := do(t, c, "GET", tg.URL+"/search", nil, strings.NewReader("alice's query")); res.Code != 200 {
			t.Fatalf("upstream up: %d %q", res.Code, res.Body)
		}
		failing.Store(true)
		for _, body := range []string{"bob's query", ""} {
			res := do(t, c, "GET", tg.URL+"/search", nil, strings.NewReader(body))
			if res.Code != 503 || res.Body != "down\n" {
				t.Errorf("GET with body %q while down: %d %q, want the upstream's own 503", body, res.Code, res.Body)
			}
		}
	})
}
