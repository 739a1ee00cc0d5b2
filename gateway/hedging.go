package gateway

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/internal/upstream"
)

// hedged reports whether x is run hedged: its route hedges, and the
// request may be sent twice (an idempotent method, a body in memory).
func (x *exchange) hedged() bool {
	return x.rt.life.flow.hedge != nil && !x.final
}

// race runs one attempt of a hedged request (see call.race): each attempt
// sends a copy of the request, read into a response of its own, and the
// loser's upstream connection is closed. It returns the winner's response
// (or the last failed one's) and outcome, which the call's retry then
// judges as one attempt's.
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
	w, o := x.c.race(ctx, httpRacer{x})
	var resp *fasthttp.Response
	if w != nil {
		resp = w.v.(*fasthttp.Response)
	}
	x.prev = resp
	return resp, o
}

// httpRacer is the racer of an exchange's race: every attempt sends the
// request, whose body is in memory; an attempt's request, prepared for
// its target, is copied (under the race's lock), then sent on a
// connection of its own, cut when the attempt loses or the client leaves.
type httpRacer struct{ x *exchange }

func (httpRacer) ready(context.Context, <-chan struct{}) bool { return true }

func (r httpRacer) send(a *attempt, _ bool) func(context.Context) raceAnswer {
	x := r.x
	lc := x.rt.life
	req := fasthttp.AcquireRequest()
	x.prepare(a.t, a.span).CopyTo(req)
	t, trip := a.t, attemptTrip(lc, a, nil)
	return func(ctx context.Context) raceAnswer {
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
		trip.Cut = cut
		err := t.RoundTrip(req, resp, trip)
		stop()
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			return raceAnswer{err: upstreamError(t, err)}
		}
		code, retryAfter := outcomeOf(resp)
		return raceAnswer{v: resp, code: code, retryAfter: retryAfter}
	}
}
