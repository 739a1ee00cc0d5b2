package gateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/hedge"
)

// errLost is the error of a hedged request's attempt that another attempt
// won: it was cut, its upstream connection closed (its stream reset). It
// says nothing about the upstream (classify: Ignored).
var errLost = fmt.Errorf("gateway: another attempt won: %w", context.Canceled)

// A race is one attempt of a hedged call (HTTP's, see exchange.race;
// gRPC's, see grpcCall.race): the route's hedge starts an attempt, and
// another when the first has not answered after its delay (if the budget
// grants it); the first good answer wins and the other attempt is cut.
// Each attempt is admitted by the route's policies and goes to a target
// other than the previous attempt's. The race's driver (call.race) is the
// same for every protocol: a protocol says only how an admitted attempt
// is sent and what its answer is (a racer).

// racer sends the attempts of a protocol's hedged call.
type racer interface {
	// ready is called before a hedge (an attempt after the race's first)
	// begins, outside the race's lock: false means the hedge is not sent,
	// and the race goes on without it (its result, Dropped, does not
	// replace another attempt's). It may wait, until ctx ends; first is
	// closed once the race's first attempt has ended (refused included).
	ready(ctx context.Context, first <-chan struct{}) bool
	// send is called under the race's lock, once attempt a is admitted
	// and its target chosen (first: the race's first attempt): it takes
	// from the request what the attempt sends (the request is the
	// caller's again once the lock is let go) and returns the exchange,
	// run outside the lock on ctx, which ends when the attempt lost or the
	// client left.
	send(a *attempt, first bool) func(ctx context.Context) raceAnswer
}

// errNotHedged is the result of a hedge its racer did not send (see
// racer.ready): the request cannot be sent twice after all. Its hedge
// budget's token is given back (hedge.ErrNotSent), as a hedge's that the
// route's policies refused or that came once the race was over.
var errNotHedged = fmt.Errorf("gateway: the request cannot be sent twice: %w", hedge.ErrNotSent)

// raceAnswer is how a raced attempt's exchange ended: with an answer v
// (nil when it got none) whose outcome is the upstream's status code and
// Retry-After value, or err. When open, the answer is good so far but not
// whole (its rest streams): its attempt is settled once it is passed on
// (raced.settle) or discarded (raced.discard), not when the exchange
// returns.
type raceAnswer struct {
	v          any // *fasthttp.Response, *heldAnswer or *grpcOpen
	code       int
	retryAfter []byte
	err        error
	open       bool
}

// raced is the Value of a raced attempt's result that got an answer: the
// answer, its attempt, and, while the attempt is not settled (an open
// answer), a copy of the call to settle it on.
type raced struct {
	v  any
	a  attempt
	cl *call // nil once a is settled
}

// hedgeRace is one race of a hedged call. Its attempts use the call only
// to begin (under mu, while the race is on); each settles on a copy of
// it, so that a losing attempt may end after the race, and the call, are
// over.
type hedgeRace struct {
	r       racer
	mu      sync.Mutex    // protects cl and started, and serializes the attempts' begin on cl (and send's use of the request)
	cl      *call         // nil once the race is over
	started bool          // an attempt has come: the others are hedges
	first   chan struct{} // closed once the first attempt has ended
}

// race runs one attempt of the hedged call c, its attempts sent by r,
// on ctx (which ends when the client left). It returns the winner's answer
// (or the last failed one's; nil when none got one) and the outcome the
// call's retry then judges as one attempt's. The log's target is the
// answer's. An open answer is the caller's to settle (raced.settle).
func (c *call) race(ctx context.Context, r racer) (*raced, sluice.Outcome) {
	hr := &hedgeRace{cl: c, r: r, first: make(chan struct{})}
	res := c.lc.flow.hedge.Run(ctx, hr.attempt)
	hr.mu.Lock()
	hr.cl = nil // c is the caller's again: a late attempt does not start
	hr.mu.Unlock()
	w, _ := res.Value.(*raced)
	if w != nil {
		c.obs.target = w.a.t
	}
	return w, res.Outcome
}

// attempt is one attempt of the race; ctx ends when it lost or the
// client left.
func (hr *hedgeRace) attempt(ctx context.Context) sluice.Result {
	hr.mu.Lock()
	first := !hr.started
	hr.started = true
	hr.mu.Unlock()
	if first {
		defer close(hr.first)
	} else if !hr.r.ready(ctx, hr.first) {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: errNotHedged}}
	}
	hr.mu.Lock()
	if hr.cl == nil { // a hedge, after the race
		hr.mu.Unlock()
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: fmt.Errorf("%w: %w", errLost, hedge.ErrNotSent)}}
	}
	// The admission may wait (a concurrency queue), under the lock: it
	// gives up once ctx ends (the race is over, or the client left), so
	// that a queued hedge never keeps the lock from the winner, which
	// takes it before its answer goes, while the winner holds the slot
	// the hedge waits for.
	a, err := hr.cl.beginOn(concurrency.WithPriority(ctx, concurrency.PriorityFrom(hr.cl.ctx)))
	cl := *hr.cl // settle reads the call's settings only
	var exchange func(context.Context) raceAnswer
	if err == nil {
		exchange = hr.r.send(&a, first)
	}
	hr.mu.Unlock()
	if err != nil && !first {
		err = fmt.Errorf("%w: %w", err, hedge.ErrNotSent) // a hedge the policies refused is not sent
	}
	if err != nil {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: err}}
	}
	ans := exchange(ctx)
	if ans.open {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Success}, Value: &raced{v: ans.v, a: a, cl: &cl}}
	}
	r := sluice.Result{Outcome: cl.settle(&a, ans.code, ans.retryAfter, ans.err)}
	if ans.v != nil {
		r.Value = &raced{v: ans.v, a: a}
	}
	return r
}

// settle settles the attempt of an open answer, once passed on, with the
// upstream's status code and Retry-After value, or err, and returns its
// outcome (see call.settle).
func (w *raced) settle(code int, retryAfter []byte, err error) sluice.Outcome {
	cl := w.cl
	w.cl = nil
	return cl.settle(&w.a, code, retryAfter, err)
}

// discard frees an answer that lost the race (hedge.Options.Discard): a
// response is released, an open answer's stream closed and its attempt
// settled without a verdict.
func (w *raced) discard() {
	switch v := w.v.(type) {
	case *fasthttp.Response:
		releaseResponse(v)
	case *grpcOpen:
		v.close()
	}
	if w.cl != nil {
		w.settle(0, nil, errLost)
	}
}
