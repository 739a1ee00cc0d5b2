package gateway_test

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestPriorityShedsBestEffortFirst is the simulator's priority-3x scenario
// end to end: 3× overload, 25% of it critical (share 0.8), 75% best effort
// (share 0.2). Each round, 3×limit requests arrive one at a time, in the
// order b, b, b, c (each decided, admitted upstream or refused, before
// the next is sent), then the upstream answers every admitted request, and
// 100ms pass on the gateway's clock: the route serves limit requests per
// round, a third of what arrives. The limit is pinned (min = max) so that
// the capacity is known and the counts exact; which requests it admits is
// the adaptive limiter's priority rule, nothing else.
//
// At least 95% of the critical requests must be served, and best effort
// shed: it gets its share and nothing more while critical requests are
// refused.
func TestPriorityShedsBestEffortFirst(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		const (
			limit  = 8
			rounds = 20
		)
		var (
			mu      sync.Mutex
			release = make(chan struct{})
		)
		arrived := make(chan struct{}, 1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			rel := release
			mu.Unlock()
			arrived <- struct{}{}
			select {
			case <-rel:
			case <-r.Context().Done():
			}
		})
		tg := routedGateway(t, engine, up, `
  - name: r
    upstream: up
    policies:
      concurrency: {adaptive: {min: %d, initial: %d, max: %d}}
      priority:
        from: "header:X-Priority"
        default: best_effort
        shares: {critical: 0.8, normal: 0, best_effort: 0.2}
`, limit, limit, limit)
		c := newClient(t)

		served := map[string]int{}
		sent := map[string]int{}
		for round := range rounds {
			var wg sync.WaitGroup
			for i := range 3 * limit {
				class := "best_effort"
				if i%4 == 3 {
					class = "critical"
				}
				sent[class]++
				answered := make(chan result, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := http.Header{"X-Priority": {class}}
					res, err := tryDo(c, "GET", tg.URL+"/", h, nil)
					if err != nil {
						t.Errorf("round %d, %s: %v", round, class, err)
					}
					answered <- res
				}()
				// Decided: it reached the upstream, or it was answered.
				select {
				case <-arrived:
					served[class]++
				case res := <-answered:
					if res.Code != http.StatusServiceUnavailable || res.errorBody(t).Error != "overloaded" {
						t.Fatalf("round %d, refused %s request: %d %s, want 503 overloaded", round, class, res.Code, res.Body)
					}
				case <-time.After(waitLimit):
					t.Fatalf("round %d: a %s request neither reached the upstream nor was answered", round, class)
				}
			}
			mu.Lock()
			close(release)
			release = make(chan struct{})
			mu.Unlock()
			wg.Wait()
			tg.Clock.Advance(100 * time.Millisecond)
		}
		crit := float64(served["critical"]) / float64(sent["critical"])
		be := float64(served["best_effort"]) / float64(sent["best_effort"])
		t.Logf("%s: critical served %d of %d (%.1f%%), best effort %d of %d (%.1f%%)", engine,
			served["critical"], sent["critical"], 100*crit, served["best_effort"], sent["best_effort"], 100*be)
		if crit < 0.95 {
			t.Errorf("critical requests served: %.1f%%, want at least 95%%", 100*crit)
		}
		if total := served["critical"] + served["best_effort"]; total > rounds*limit {
			t.Errorf("%d requests served in %d rounds of %d slots", total, rounds, limit)
		}
		// Best effort is shed: of the capacity left by critical traffic
		// (a quarter of the rounds' slots), it gets no more than that.
		if max := rounds * limit / 4 * 3 / 2; served["best_effort"] > max {
			t.Errorf("best effort served %d requests, want at most %d", served["best_effort"], max)
		}
	})
}
