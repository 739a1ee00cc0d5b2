package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"

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

// race runs one attempt of a hedged call, on cl (see call.race). It
// returns the outcome the call's retry then judges as one attempt's; the
// winner's answer (or the last failed one's) is held in c.held, or, when
// too long to hold, passed on.
func (c *grpcCall) race(ctx context.Context, cl *call) sluice.Outcome {
	c.held = nil // a previous race's answer: the call's is this race's
	w, o := cl.race(ctx, c.raceAttempt)
	if w == nil {
		return o
	}
	switch v := w.v.(type) {
	case *grpcOpen:
		// The winner, too long to hold: it streams, and the call is final.
		err := c.pass(ctx, w.a.t, v.h.rest, v.h.body)
		v.close()
		if err != nil {
			err = &finalError{err}
		}
		return w.settle(http.StatusOK, nil, err)
	case *heldAnswer:
		c.held = v
	}
	return o
}

// raceAttempt is the racer of c's race: an attempt reads its answer whole
// (see fetch), within the route's timeout from its start; an answer too
// long to hold is open (grpcOpen). The call's request is read whole
// before the race and not changed by it.
func (c *grpcCall) raceAttempt(a *attempt) func(context.Context) raceAnswer {
	t, span, start := a.t, a.span, a.start
	return func(ctx context.Context) raceAnswer {
		cancel := context.CancelFunc(func() {})
		if d := c.rt.life.timeout; d > 0 {
			ctx, cancel = context.WithDeadline(ctx, start.Add(d))
		}
		h, err := c.fetch(ctx, t, span)
		if err != nil && errors.Is(context.Cause(ctx), hedge.ErrLost) {
			err = errLost // cut by the winner: no verdict on the upstream
		}
		if h != nil && h.rest != nil {
			// Good so far, and too long to hold: settled once passed on
			// (or discarded).
			return raceAnswer{v: &grpcOpen{h: h, cancel: cancel}, open: true}
		}
		cancel()
		ans := raceAnswer{code: http.StatusOK, err: err}
		if h != nil {
			ans.v = h
		}
		return ans
	}
}

// grpcOpen is a raced attempt's answer too long to hold, its attempt not
// yet settled.
type grpcOpen struct {
	h      *heldAnswer
	cancel context.CancelFunc // ends the attempt's context (its deadline)
}

// close ends the answer's stream and its attempt's context.
func (o *grpcOpen) close() {
	o.h.rest.Body.Close()
	o.cancel()
}
