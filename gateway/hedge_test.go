package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// racers is an upstream of two targets for hedging tests. The first
// attempt of each request (told apart by its id query parameter) is held
// until released or cancelled; a second attempt answers at once.
type racers struct {
	a, b *upstream

	mu   sync.Mutex
	reqs map[string]*race // by id
}

// race is what the upstream saw of one request's attempts.
type race struct {
	attempts  int
	firstOn   string        // the target the first attempt went to
	first     chan struct{} // closed when the first attempt arrives
	second    chan struct{} // closed when a second attempt arrives
	release   chan struct{} // closed to let the first attempt answer
	cancelled chan struct{} // closed when the first attempt's connection went away unanswered
}

func startRacers(t *testing.T) *racers {
	r := &racers{reqs: map[string]*race{}}
	h := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			rc := r.race(req.URL.Query().Get("id"))
			r.mu.Lock()
			rc.attempts++
			n := rc.attempts
			if n == 1 {
				rc.firstOn = name
			}
			r.mu.Unlock()
			if n > 1 {
				close(rc.second)
				fmt.Fprintf(w, "fast %s", name)
				return
			}
			close(rc.first)
			select {
			case <-rc.release:
				fmt.Fprintf(w, "slow %s", name)
			case <-req.Context().Done():
				close(rc.cancelled)
			}
		}
	}
	r.a, r.b = startUpstream(t, "a", h("a")), startUpstream(t, "b", h("b"))
	return r
}

func (r *racers) race(id string) *race {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc := r.reqs[id]
	if rc == nil {
		rc = &race{first: make(chan struct{}), second: make(chan struct{}), release: make(chan struct{}), cancelled: make(chan struct{})}
		r.reqs[id] = rc
	}
	return rc
}

func (r *racers) attempts(id string) int {
	rc := r.race(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	return rc.attempts
}

// hedgeGateway starts a gateway on engine with one route to rs whose
// policies are the YAML flow mapping's entries policies.
func hedgeGateway(t *testing.T, engine string, rs *racers, policies string) *testGateway {
	return hedgeGatewayTo(t, engine, rs.a, rs.b, policies)
}

// hedgeGatewayTo is hedgeGateway to the targets a and b.
func hedgeGatewayTo(t *testing.T, engine string, a, b *upstream, policies string) *testGateway {
	return startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s", "%s"]}
routes:
  - name: r
    upstream: up
    policies: {%s}
`, engine, a.URL, b.URL, policies))
}

// awaitClosed waits for ch to close, failing the test after waitLimit.
func awaitClosed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// send sends GET /?id=id on a goroutine; the response arrives on the
// channel returned.
func send(t *testing.T, c *http.Client, tg *testGateway, method, id string) chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := tryDo(c, method, tg.URL+"/?id="+id, nil, strings.NewReader(""))
		if err != nil {
			t.Errorf("request %s: %v", id, err)
		}
		ch <- res
	}()
	return ch
}

// hedgeTimer waits for the hedge's timer, one more than the base timers
// the gateway's fake clock had before the request, then advances the
// clock by d.
func hedgeTimer(t *testing.T, tg *testGateway, base int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := tg.Clock.BlockUntil(ctx, base+1); err != nil {
		t.Fatalf("no hedge timer: %v", err)
	}
	tg.Clock.Advance(d)
}

// TestHedgeFasterAnswerWins checks, on both engines, that a second attempt
// goes to the other target once the delay has passed on the gateway's
// clock (not before), that its answer is served, and that the first
// attempt is cancelled: its upstream connection closed. The lost attempt
// is no failure: a breaker that opens on one failure stays closed.
func TestHedgeFasterAnswerWins(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rs := startRacers(t)
		tg := hedgeGateway(t, engine, rs, "hedge: {delay: 50ms, budget: 1}, circuit_breaker: {consecutive_failures: 1, failure_rate: 0}")
		c := newClient(t)
		base := tg.Clock.Timers()
		answered := send(t, c, tg, "GET", "1")
		rc := rs.race("1")
		awaitClosed(t, rc.first, "the first attempt")
		hedgeTimer(t, tg, base, 49*time.Millisecond)
		if h := tg.routeStatus(t, "r").Hedge; h.Hedges != 0 {
			t.Fatalf("a hedge before the delay: %+v", *h)
		}
		tg.Clock.Advance(time.Millisecond)
		awaitClosed(t, rc.second, "the hedge")
		res := <-answered
		if res.Code != 200 || !strings.HasPrefix(res.Body, "fast ") {
			t.Fatalf("answer %d %q, want the hedge's", res.Code, res.Body)
		}
		if rs.mu.Lock(); res.Body == "fast "+rc.firstOn {
			t.Errorf("the hedge went to %s, the first attempt's target", rc.firstOn)
		}
		rs.mu.Unlock()
		awaitClosed(t, rc.cancelled, "the first attempt's cancellation")
		// The loser settles after the answer: wait for it to leave the
		// target before judging the breaker.
		eventually(t, "the lost attempt settled", func() bool {
			for _, u := range tg.Status().Upstreams {
				for _, tt := range u.Targets {
					if tt.InFlight != 0 {
						return false
					}
				}
			}
			return true
		})
		st := tg.routeStatus(t, "r")
		if h := st.Hedge; h.Requests != 1 || h.Hedges != 1 || h.Wins != 1 || h.Denied != 0 {
			t.Errorf("status %+v, want 1 request, 1 hedge, 1 win", *h)
		}
		if st.Breaker != "closed" {
			t.Errorf("breaker %s after a lost attempt, want closed", st.Breaker)
		}
	})
}

// TestHedgeBudget checks that the budget bounds the hedges: with budget
// 0.1, of 20 requests whose first attempt is slow, exactly two (the 10th
// and the 20th, once the budget holds a whole hedge) get a second attempt;
// the others are answered by their first.
func TestHedgeBudget(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rs := startRacers(t)
		tg := hedgeGateway(t, engine, rs, "hedge: {delay: 50ms, budget: 0.1}")
		c := newClient(t)
		hedged := 0
		for i := 1; i <= 20; i++ {
			id := fmt.Sprint(i)
			base := tg.Clock.Timers()
			answered := send(t, c, tg, "GET", id)
			rc := rs.race(id)
			awaitClosed(t, rc.first, "the first attempt of request "+id)
			hedgeTimer(t, tg, base, 50*time.Millisecond)
			eventually(t, "the hedge decided", func() bool {
				h := tg.routeStatus(t, "r").Hedge
				return h.Hedges+h.Denied == uint64(i)
			})
			want := "slow "
			if h := tg.routeStatus(t, "r").Hedge; h.Hedges > uint64(hedged) {
				hedged++
				want = "fast "
			} else {
				close(rc.release)
			}
			if res := <-answered; res.Code != 200 || !strings.HasPrefix(res.Body, want) {
				t.Fatalf("request %d: %d %q, want %s...", i, res.Code, res.Body, want)
			}
		}
		if hedged != 2 {
			t.Errorf("%d of 20 requests hedged with budget 0.1, want 2", hedged)
		}
		if h := tg.routeStatus(t, "r").Hedge; h.Requests != 20 || h.Denied != 18 {
			t.Errorf("status %+v, want 20 requests, 18 denied", *h)
		}
	})
}

// TestHedgeOnlyIdempotent checks that a request that may not be sent twice
// (a POST) is never hedged.
func TestHedgeOnlyIdempotent(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rs := startRacers(t)
		tg := hedgeGateway(t, engine, rs, "hedge: {delay: 50ms, budget: 1}")
		c := newClient(t)
		answered := send(t, c, tg, "POST", "p")
		rc := rs.race("p")
		awaitClosed(t, rc.first, "the POST")
		tg.Clock.Advance(time.Second)
		close(rc.release)
		if res := <-answered; res.Code != 200 || !strings.HasPrefix(res.Body, "slow ") {
			t.Fatalf("POST: %d %q", res.Code, res.Body)
		}
		if n := rs.attempts("p"); n != 1 {
			t.Errorf("POST sent %d times, want once", n)
		}
		if h := tg.routeStatus(t, "r").Hedge; h.Requests != 0 {
			t.Errorf("status %+v: a POST ran through the hedge", *h)
		}
	})
}

// TestHedgeWinnerLogged checks, on both engines, that the log line of a
// hedged request names the target whose answer was sent: here the first
// attempt's, which answers once the hedge has arrived (the line named the
// last attempt begun, the hedge's).
func TestHedgeWinnerLogged(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var mu sync.Mutex
		var first string // the target of the first attempt, by its upstream's name
		arrived, hedged := make(chan struct{}), make(chan struct{})
		h := func(name string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				isFirst := first == ""
				if isFirst {
					first = name
				}
				mu.Unlock()
				if isFirst {
					close(arrived)
					awaitClosed(t, hedged, "the hedge")
					fmt.Fprintf(w, "first %s", name)
					return
				}
				close(hedged)
				<-r.Context().Done() // the hedge loses
			}
		}
		a, b := startUpstream(t, "a", h("a")), startUpstream(t, "b", h("b"))
		tg, logs := startObservedStep(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s", "%s"]}
routes:
  - name: r
    upstream: up
    policies: {hedge: {delay: 50ms, budget: 1}}
`, engine, a.URL, b.URL), 0)
		answered := send(t, newClient(t), tg, "GET", "1")
		awaitClosed(t, arrived, "the first attempt")
		hedgeTimer(t, tg, 0, 50*time.Millisecond)
		res := <-answered
		mu.Lock()
		want := map[string]string{"a": a.URL, "b": b.URL}[first]
		mu.Unlock()
		if res.Code != 200 || res.Body != "first "+first {
			t.Fatalf("answer %d %q, want the first attempt's", res.Code, res.Body)
		}
		if l := logs.requests(t, 1)[0]; l["target"] != want || l["attempts"] != 2.0 {
			t.Errorf("logged target %v after %v attempts, want %s (the first attempt's, which answered) after 2", l["target"], l["attempts"], want)
		}
	})
}

// TestHedgeRefusedKeepsUpstreamAnswer checks, on both engines, that a
// 5xx answering the first attempt while the hedge waits for admission
// is the answer when admission then refuses the hedge, as if no hedge had
// been tried: here the hedge waits in the concurrency limit's queue
// behind another request, which takes the slot the first attempt frees
// and holds it, until the hedge's max_wait passes. (The answer was the
// refusal's 503.) The refused hedge is not counted as sent (it was).
func TestHedgeRefusedKeepsUpstreamAnswer(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		arrived, release, releaseC := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var calls sync.Map // by id
		h := func(w http.ResponseWriter, r *http.Request) {
			id := r.URL.Query().Get("id")
			if _, again := calls.LoadOrStore(id, true); again {
				w.WriteHeader(http.StatusTeapot) // a hedge: never expected
				return
			}
			switch id {
			case "a":
				close(arrived)
				awaitClosed(t, release, "the release")
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, "a failed")
			case "c":
				awaitClosed(t, releaseC, "the release of c")
				fmt.Fprint(w, "c ok")
			}
		}
		a, b := startUpstream(t, "a", h), startUpstream(t, "b", h)
		tg := hedgeGatewayTo(t, engine, a, b, "hedge: {delay: 50ms, budget: 1}, concurrency: {max: 1, queue: 2, max_wait: 1s}")
		c := newClient(t)
		queued := func(n int) func() bool {
			return func() bool { return tg.routeStatus(t, "r").ConcurrencyQueued == n }
		}
		base := tg.Clock.Timers()
		answeredA := send(t, c, tg, "GET", "a")
		awaitClosed(t, arrived, "the first attempt")
		answeredC := send(t, c, tg, "POST", "c") // not hedged: waits first in the queue
		eventually(t, "the POST queued", queued(1))
		hedgeTimer(t, tg, base+1, 50*time.Millisecond) // the hedge's timer, and the POST's wait
		eventually(t, "the hedge queued", queued(2))
		close(release) // the 5xx; its slot goes to the POST
		eventually(t, "the POST admitted", queued(1))
		tg.Clock.Advance(time.Second) // the hedge's wait ends: refused
		if res := <-answeredA; res.Code != 500 || res.Body != "a failed" {
			t.Errorf("answer %d %q, want the upstream's 500", res.Code, res.Body)
		}
		close(releaseC)
		if res := <-answeredC; res.Code != 200 || res.Body != "c ok" {
			t.Errorf("POST: %d %q", res.Code, res.Body)
		}
		if h := tg.routeStatus(t, "r").Hedge; h.Hedges != 0 {
			t.Errorf("hedge status %+v, want no hedge sent", *h)
		}
	})
}
