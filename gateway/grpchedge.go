package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hedge"
)

// A gRPC call is hedged as an HTTP request is (see exchange.race) when
// its route hedges, its method is named in grpc.idempotent, and its
// request, read whole, is one message: a unary call. A call whose request
// is several messages (client or bidirectional streaming) or too long to
// hold is never hedged: it lasts as long as its client streams, so its
// latency says nothing of the upstream's (every long stream would be
// hedged, its load doubled), and a bidirectional call's first answers
// would wait for its client's last message. A server-streaming call,
// whose request is one message too, cannot be told from a unary one: it
// is hedged, its answer held, as a unary call's. The attempts of a race
// hold their answers whole, so that the loser's never reaches the client;
// the first answer that is not a failure (see grpcStatus) wins, and the
// other attempt is cut, its upstream stream reset. An answer too long to
// hold (past maxReplayBody) wins when it comes first, and streams.

// hedged reports whether the call is run hedged (see above).
func (c *grpcCall) hedged() bool {
	return c.rt.life.flow.hedge != nil && c.hold && oneGRPCMessage(c.body)
}

// oneGRPCMessage reports whether b is exactly one length-prefixed gRPC
// message.
func oneGRPCMessage(b []byte) bool {
	return len(b) >= 5 && uint64(binary.BigEndian.Uint32(b[1:5])) == uint64(len(b)-5)
}

// race runs one attempt of a hedged call, on cl: the route's hedge starts
// an attempt, and another when the first has not answered after its delay
// (if the budget grants it); each is admitted by the route's policies and
// goes to a target other than the previous attempt's. It returns the
// outcome the call's retry then judges as one attempt's; the winner's
// answer (or the last failed one's) is held in c.held, or, when too long
// to hold, passed on.
func (c *grpcCall) race(ctx context.Context, cl *call) sluice.Outcome {
	c.held = nil // a previous race's answer: the call's is this race's
	hr := &grpcRace{c: c, cl: cl}
	r := c.rt.life.flow.hedge.Run(ctx, hr.attempt)
	hr.mu.Lock()
	hr.cl = nil // cl is the caller's again: a late attempt does not start
	hr.mu.Unlock()
	switch v := r.Value.(type) {
	case *grpcOpen:
		// The winner, too long to hold: it streams, and the call is final.
		err := c.pass(ctx, v.a.t, v.h.rest, v.h.body)
		v.h.rest.Body.Close()
		v.cancel()
		if err != nil {
			err = &finalError{err}
		}
		return v.c.settle(&v.a, http.StatusOK, nil, err)
	case *heldAnswer:
		c.held = v
	}
	return r.Outcome
}

// grpcRace is one race of a hedged call. Its attempts use the call only to
// begin (under mu, while the race is on); each settles on a copy of it, so
// that a losing attempt may end after the race, and the call, are over.
type grpcRace struct {
	c  *grpcCall
	mu sync.Mutex // protects cl, and serializes the attempts' begin on it
	cl *call      // nil once the race is over
}

// attempt is one attempt of the race; ctx ends when it lost or the
// client left.
func (hr *grpcRace) attempt(ctx context.Context) sluice.Result {
	hr.mu.Lock()
	if hr.cl == nil {
		hr.mu.Unlock()
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Ignored, Err: errLost}}
	}
	a, err := hr.cl.begin()
	cl := *hr.cl // settle reads the call's settings only
	hr.mu.Unlock()
	if err != nil {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: err}}
	}
	c := hr.c
	cancel := context.CancelFunc(func() {})
	if d := c.rt.life.timeout; d > 0 {
		ctx, cancel = context.WithDeadline(ctx, a.start.Add(d))
	}
	h, err := c.fetch(ctx, a.t, a.span)
	if err != nil && errors.Is(context.Cause(ctx), hedge.ErrLost) {
		err = errLost // cut by the winner: no verdict on the upstream
	}
	if h != nil && h.rest != nil {
		// Good so far, and too long to hold: settled once passed on (or
		// discarded, see grpcOpen.discard).
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Success}, Value: &grpcOpen{h: h, a: a, c: &cl, cancel: cancel}}
	}
	cancel()
	r := sluice.Result{Outcome: cl.settle(&a, http.StatusOK, nil, err)}
	if h != nil {
		r.Value = h
	}
	return r
}

// grpcOpen is a raced attempt's answer too long to hold, its attempt not
// yet settled.
type grpcOpen struct {
	h      *heldAnswer
	a      attempt
	c      *call              // a copy of the call, to settle a on
	cancel context.CancelFunc // ends the attempt's context (its deadline)
}

// discard ends an answer that lost the race after it was read: its stream
// is closed, its attempt settled without a verdict.
func (o *grpcOpen) discard() {
	o.h.rest.Body.Close()
	o.cancel()
	o.c.settle(&o.a, http.StatusOK, nil, errLost)
}
