package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/internal/upstream"
)

// errLost is the error of a hedged request's attempt that another attempt
// won: it was cut, its upstream connection closed. It says nothing about
// the upstream (classify: Ignored).
var errLost = fmt.Errorf("gateway: another attempt won: %w", context.Canceled)

// hedged reports whether x is run hedged: its route hedges, and the
// request may be sent twice (an idempotent method, a body in memory).
func (x *exchange) hedged() bool {
	return x.rt.life.flow.hedge != nil && !x.final
}

// race runs one attempt of a hedged request: the route's hedge starts an
// attempt, and another when the first has not answered after its delay
// (if the budget grants it); the first good answer wins and the other
// attempt is cut, its connection closed. Each attempt is admitted by the
// route's policies, goes to a target other than the previous attempt's,
// and sends a copy of the request, read into a response of its own. It
// returns the winner's response (or the last failed one's) and outcome,
// which the call's retry then judges as one attempt's.
func (x *exchange) race() (*fasthttp.Response, sluice.Outcome) {
	x.releasePrev()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	left := x.watch.cut.Left()
	go func() {
		select {
		case <-left:
			cancel(errClientGone)
		case <-done:
		}
	}()
	hr := &hedgeRace{x: x}
	r := x.rt.life.flow.hedge.Run(ctx, hr.attempt)
	resp, _ := r.Value.(*fasthttp.Response)
	hr.mu.Lock()
	hr.x = nil // x is the caller's again: a late attempt does not start
	for _, a := range hr.answered {
		if a.resp == resp && resp != nil {
			// The log's target, and the one whose in-flight count the
			// body holds: the answer's (the last to hold it: a response
			// is reused once freed).
			x.obs.target = a.t
		}
	}
	hr.mu.Unlock()
	x.prev = resp
	return resp, r.Outcome
}

// hedgeRace is one race of a hedged request. Its attempts use the
// exchange only to begin (under mu, while the race is on); then they work
// on copies of their own, so that a losing attempt may end after the race,
// and the request, are over.
type hedgeRace struct {
	mu sync.Mutex // protects x and answered, and serializes the attempts' use of x
	x  *exchange  // nil once the race is over
	// answered are the attempts that got a response, with their targets:
	// the race's answer is one of them.
	answered []hedgeAnswer
}

type hedgeAnswer struct {
	resp *fasthttp.Response
	t    *target
}

// attempt is one attempt of the race; ctx ends when it lost or the
// client left.
func (hr *hedgeRace) attempt(ctx context.Context) sluice.Result {
	hr.mu.Lock()
	x := hr.x
	if x == nil {
		hr.mu.Unlock()
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Ignored, Err: errLost}}
	}
	a, err := x.c.begin()
	c := x.c // settle reads the call's settings only
	lc := x.rt.life
	var req *fasthttp.Request
	if err == nil {
		req = fasthttp.AcquireRequest()
		x.prepare(a.t, a.span).CopyTo(req)
	}
	hr.mu.Unlock()
	if err != nil {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: err}}
	}
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	cut := &upstream.Interrupt{}
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), hedge.ErrLost) {
			cut.Fire(errLost)
		} else {
			cut.Fire(errClientGone)
		}
	})
	rerr := upstream.RoundTrip(a.t.Client, req, resp, attemptTrip(lc, &a, cut))
	stop()
	var code int
	var retryAfter []byte
	if rerr != nil {
		fasthttp.ReleaseResponse(resp)
		resp, rerr = nil, upstreamError(a.t, rerr)
	} else {
		code, retryAfter = outcomeOf(resp)
	}
	r := sluice.Result{Outcome: c.settle(&a, code, retryAfter, rerr)}
	if resp != nil {
		r.Value = resp
		hr.mu.Lock()
		hr.answered = append(hr.answered, hedgeAnswer{resp, a.t})
		hr.mu.Unlock()
	}
	return r
}
