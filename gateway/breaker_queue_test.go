package gateway_test

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestQueuedRequestsPassBreakerAgain queues requests behind one that holds
// the route's only concurrency slot; that request fails and opens the
// breaker. The queued requests, handed the slot in turn, pass the breaker
// again and get 503 circuit_open instead of reaching the upstream. (They
// used to pass the breaker only before they waited.) A call's outcome
// reaches the breaker before its slot is handed on, so all three are
// turned away.
func TestQueuedRequestsPassBreakerAgain(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		release := make(chan struct{})
		var calls atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				<-release
				http.Error(w, "boom", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		gw := routedGateway(t, engine, up, `
  - name: q
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 1, open_for: 1h}
      concurrency: {max: 1, queue: 3}
`)
		c := newClient(t)
		codes := make(chan int, 4)
		send := func() {
			go func() {
				r, err := tryDo(c, http.MethodGet, gw.URL+"/", nil, nil)
				if err != nil {
					t.Errorf("request: %v", err)
				}
				codes <- r.Code
			}()
		}
		send()
		eventually(t, "the first request at the upstream", func() bool { return calls.Load() == 1 })
		for range 3 {
			send()
		}
		eventually(t, "three requests queued", func() bool { return gw.routeStatus(t, "q").ConcurrencyQueued == 3 })
		close(release)
		count := map[int]int{}
		for range 4 {
			count[<-codes]++
		}
		if count[500] != 1 || count[503] != 3 {
			t.Fatalf("statuses %v; want one 500 and three 503", count)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the upstream got %d calls; want only the first", n)
		}
	})
}
