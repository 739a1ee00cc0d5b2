package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/internal/tracing"
)

// A gRPC call is hedged as an HTTP request is (see call.race) when its
// route hedges, its method is named in grpc.idempotent, and its request
// is one message (a unary or server-streaming call). The race lasts until
// an attempt's answer commits it: its first message (or the prefix of one
// too long to hold, past maxReplayBody) wins, the other attempt is cut
// (its upstream stream reset), and the rest of the answer streams to the
// client as the upstream produces it; an answer that ends without a
// message wins when its grpc-status is not a failure (see grpcStatus), as
// a held answer. An attempt so holds at most one message of its answer,
// and a server stream is delayed by nothing but its first message's race.
//
// Which request is one message is known only once it has ended. On a
// route that also retries, the request is read whole first (see
// readRequest) and a call of several messages is never hedged. On a route
// that only hedges, the request is not held back: it streams to the
// race's first attempt as it comes (a bidirectional call whose client
// waits for an answer before it sends more flows at once), and is kept
// meanwhile (see requestTee); the hedge, once its delay has passed, is
// sent only when the request has ended by then, or ends before the first
// attempt does, and is one message. A call of several messages, or one
// still streaming, is never hedged: it lasts as long as its client
// streams, so its latency says nothing of the upstream's.

// hedged reports whether the call is run hedged (see above).
func (c *grpcCall) hedged() bool {
	return c.rt.life.flow.hedge != nil && (c.tee != nil || (c.hold && oneGRPCMessage(c.body)))
}

// keepRequest makes the call's request stream to its first attempt, kept
// for a hedge (see requestTee): its route hedges and does not retry.
func (c *grpcCall) keepRequest() {
	c.tee = newRequestTee(c.in)
	c.rest = c.tee
}

// oneGRPCMessage reports whether b is exactly one length-prefixed gRPC
// message.
func oneGRPCMessage(b []byte) bool {
	return len(b) >= 5 && uint64(binary.BigEndian.Uint32(b[1:5])) == uint64(len(b)-5)
}

// race runs one attempt of a hedged call, on cl (see call.race). It
// returns the outcome the call's retry then judges as one attempt's; the
// winner's answer is passed on, or, when it ended without a message (or
// every attempt failed), held in c.held.
func (c *grpcCall) race(ctx context.Context, cl *call) sluice.Outcome {
	c.held = nil // a previous race's answer: the call's is this race's
	w, o := cl.race(ctx, grpcRacer{c})
	if c.tee != nil {
		c.tee.forget()
	}
	if w == nil {
		return o
	}
	switch v := w.v.(type) {
	case *grpcOpen:
		// Committed: the answer streams, and the call is final.
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

// grpcRacer is the racer of a gRPC call's race.
type grpcRacer struct{ c *grpcCall }

// ready waits, when the request streams to the first attempt (c.tee),
// until it has ended, and reports whether it is one message; it gives up
// when the first attempt ends first (refused, or its exchange over), or
// ctx does.
func (r grpcRacer) ready(ctx context.Context, first <-chan struct{}) bool {
	t := r.c.tee
	if t == nil {
		return true // read whole, and one message (see hedged)
	}
	select {
	case <-t.done:
	case <-first:
	case <-ctx.Done():
		return false
	}
	return oneGRPCMessage(t.whole())
}

// send sends an attempt: the request read whole, or, on a route that only
// hedges, as it streams (the first attempt) or as it was kept (a hedge).
// It reads the answer up to its first message (see fetchFirst), within
// the route's timeout from the attempt's start; an answer with more to
// come is open (grpcOpen).
func (r grpcRacer) send(a *attempt, first bool) func(context.Context) raceAnswer {
	c := r.c
	body := c.body
	if c.tee != nil && !first {
		body = c.tee.whole()
	}
	t, span, start := a.t, a.span, a.start
	return func(ctx context.Context) raceAnswer {
		cancel := context.CancelFunc(func() {})
		if d := c.rt.life.timeout; d > 0 {
			ctx, cancel = context.WithDeadline(ctx, start.Add(d))
		}
		h, err := c.fetchFirst(ctx, t, span, body)
		if err != nil && errors.Is(context.Cause(ctx), hedge.ErrLost) {
			err = errLost // cut by the winner: no verdict on the upstream
		}
		if h != nil && h.rest != nil {
			// Good so far: settled once passed on (or discarded).
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

// fetchFirst sends the call to t, span the attempt's span, with body (nil:
// the request streams), and reads its answer up to the end of its first
// message (see readFirstMessage). An answer that ended there is returned
// whole with its grpc-status as an error (see grpcStatus); one with more
// to come is returned open (its rest to read and close) with what was
// read of it, and no error. It returns the attempt's error alone when
// there is no answer.
func (c *grpcCall) fetchFirst(ctx context.Context, t *target, span *tracing.Attempt, body []byte) (*heldAnswer, error) {
	resp, err := c.roundTrip(ctx, t, span, body)
	if err != nil {
		return nil, err
	}
	b, more, err := readFirstMessage(resp.Body)
	switch {
	case err != nil:
		resp.Body.Close()
		return nil, transportError(ctx, t, err)
	case more:
		return &heldAnswer{body: b, rest: resp}, nil
	}
	resp.Body.Close()
	return &heldAnswer{header: resp.Header, trailer: resp.Trailer, body: b}, grpcStatus(resp.Header, resp.Trailer)
}

// readFirstMessage reads r, a gRPC answer's body, up to the end of its
// first message, or only that message's prefix when it is longer than
// maxReplayBody. more reports that r may have more to give: false when r
// ended before a whole message (with none: b is empty; or with part of
// one, passed on as it came).
func readFirstMessage(r io.Reader) (b []byte, more bool, err error) {
	b = make([]byte, 5)
	n, err := io.ReadFull(r, b)
	switch {
	case err == io.EOF:
		return nil, false, nil
	case err == io.ErrUnexpectedEOF:
		return b[:n], false, nil
	case err != nil:
		return nil, false, err
	}
	size := binary.BigEndian.Uint32(b[1:5])
	if size > maxReplayBody {
		return b, true, nil
	}
	b = append(b, make([]byte, size)...)
	n, err = io.ReadFull(r, b[5:])
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return b[:5+n], false, nil
	case err != nil:
		return nil, false, err
	}
	return b, true, nil
}

// grpcOpen is a raced attempt's answer with more to come, its attempt not
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
