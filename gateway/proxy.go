package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/upstream"
)

// maxReplayBody is the largest request body kept in memory so that a retry
// can send it again. Larger bodies, and bodies of unknown length, stream
// through once and are never retried.
const maxReplayBody = 1 << 20

// errNotReplayable is the error of a retry that cannot run because the
// request's body was streamed to an earlier attempt.
var errNotReplayable = &answerError{msg: "gateway: request body already sent; not retried",
	code: 502, reason: answer.UpstreamError}

// UpstreamError is the error of an attempt that got no response from a
// target: it could not connect, the connection broke, or the attempt timed
// out (then it matches sluice.ErrTimeout).
type UpstreamError struct {
	Target  string
	Connect bool // the target could not be reached at all
	Err     error
}

func (e *UpstreamError) Error() string { return "upstream " + e.Target + ": " + e.Err.Error() }
func (e *UpstreamError) Unwrap() error { return e.Err }

// AnswerStatus implements answer.Statuser: what the error it wraps says
// when that is a Statuser (the client's body was refused), else 502,
// "upstream_unreachable" when the target could not be reached and
// "upstream_error" otherwise. (A timeout wraps sluice.ErrTimeout, which
// answer.Classify answers 504 first.)
func (e *UpstreamError) AnswerStatus() (int, string) {
	var st answer.Statuser
	if errors.As(e.Err, &st) {
		return st.AnswerStatus()
	}
	if e.Connect {
		return 502, answer.UpstreamUnreachable
	}
	return 502, answer.UpstreamError
}

// StatusError is the result of an attempt whose response status counts as a
// failure (5xx). The response is kept so that it can still be sent to the
// client when no retry or fallback replaces it.
type StatusError = answer.StatusError

// exchange is one client request on its way upstream on the goroutine
// engine: the call through its route's lifecycle, driven blocking (run),
// and the fasthttp messages its attempts send and read.
type exchange struct {
	rt      *route
	c       call
	req     *fasthttp.Request // the client's request, sent upstream as it is once prepared
	xff     []byte            // the X-Forwarded-For value to send
	https   bool              // the client came over TLS: X-Forwarded-Proto is https unless a trusted proxy said
	ready   bool              // req's headers are prepared for the upstream
	body    []byte            // the replayable body; nil when streamed
	held    *heldBodies       // counts body's length (reset releases it); nil when not held
	heldN   int64             // the length held counts
	stream  io.Reader         // the body when not replayable
	resumed *resumedBody      // stream's first bytes, read before held had no room (reset releases them); nil: none
	sent    bool              // stream was given to an attempt
	final   bool              // a failed attempt must not be retried
	trusted bool              // the client is a trusted proxy: its X-Forwarded-Proto and -Host stand
	prev    *fasthttp.Response
	// direct, when not nil, is the client's response, which attempts read
	// the upstream's response into instead of a response of their own.
	direct *fasthttp.Response
	rl     [64]byte     // room for the RateLimit header value
	watch  *clientWatch // cuts the attempts when the client leaves
	obs    observation  // the request's id, trace and counts
}

// reset clears x for reuse, keeping its buffers and watch. The watch's cut
// is cleared too: a request that is not watched (a streamed body, a
// coalesced call) must not find the cut of a client that left before.
func (x *exchange) reset() *exchange {
	if x.held != nil {
		x.held.release(x.heldN)
	}
	if x.resumed != nil {
		x.resumed.release()
	}
	*x = exchange{xff: x.xff[:0], watch: x.watch}
	x.watch.cut = upstream.Interrupt{}
	return x
}

// run drives the request's call through its route's lifecycle, blocking:
// an attempt, then, when the route's retry asks for another, a wait on the
// gateway's clock (cut short, without another attempt, when the client
// leaves) and the next. It returns the last attempt's response (its body
// not yet read) with the call's error: nil, a *StatusError with a 5xx
// response, or the error of a refusal or a failed attempt without one.
func (x *exchange) run() (*fasthttp.Response, error) {
	x.c.start(x.rt.life, fastRequest{x.req}, x.final, &x.obs)
	hedged := x.hedged()
	if hedged {
		x.rt.life.flow.hedgeBudget.Deposit()
	}
	for {
		var resp *fasthttp.Response
		var o sluice.Outcome
		if hedged {
			if resp, o = x.race(); o.Class == sluice.Dropped {
				return nil, o.Err // refused: never retried
			}
		} else {
			if x.stream != nil && x.sent {
				// A retry of a body that streamed to an earlier attempt: it
				// cannot be sent again, and no target or policy is charged.
				x.releasePrev()
				return nil, errNotReplayable
			}
			a, err := x.c.begin()
			if err != nil {
				x.releasePrev()
				return nil, err
			}
			resp, err = x.attempt(&a)
			var code int
			var retryAfter []byte
			if resp != nil {
				code, retryAfter = outcomeOf(resp)
			}
			o = x.c.settle(&a, code, retryAfter, err)
		}
		delay, again := x.c.next(o)
		err := o.Err
		if !again {
			return resp, err
		}
		if !x.sleep(delay) {
			x.c.cancelled(err)
			return resp, err
		}
	}
}

// sleep waits d on the route's clock before another attempt; it returns
// false when the client left meanwhile.
func (x *exchange) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := x.rt.life.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-x.watch.cut.Left():
		return false
	}
}

// outcomeOf returns what the lifecycle reads of an upstream response: its
// status code and, for a 5xx, its Retry-After value.
func outcomeOf(resp *fasthttp.Response) (int, []byte) {
	code := resp.StatusCode()
	if code < 500 {
		return code, nil
	}
	return code, resp.Header.Peek("Retry-After")
}

// attempt sends the request to a's target and returns its response with
// the body not yet read, or an *UpstreamError.
func (x *exchange) attempt(a *attempt) (*fasthttp.Response, error) {
	x.releasePrev()
	t := a.t
	req := x.prepare(t, a.span)
	resp := x.direct
	if resp == nil {
		resp = fasthttp.AcquireResponse()
	}
	err := t.RoundTrip(req, resp, attemptTrip(x.rt.life, a, &x.watch.cut))
	if err != nil {
		if resp != x.direct {
			fasthttp.ReleaseResponse(resp)
		}
		return nil, upstreamError(t, err)
	}
	x.prev = resp
	return resp, nil
}

// releasePrev frees the response of an earlier attempt that a retry
// supersedes.
func (x *exchange) releasePrev() {
	switch x.prev {
	case nil:
		return
	case x.direct:
		_ = x.prev.CloseBodyStream() // the next attempt resets the rest
	default:
		releaseResponse(x.prev)
	}
	x.prev = nil
}

// take hands the final response to the caller: it is no longer x's to free.
func (x *exchange) take(resp *fasthttp.Response) {
	if x.prev == resp {
		x.prev = nil
	}
	x.releasePrev()
}

// prepare makes the client's request the upstream request for target t:
// hop-by-hop headers go (once), X-Forwarded-* and X-Request-Id are set
// (once), Host and scheme name t, and the trace context names span, the
// attempt's (none when nil: tracing is off). Sending the client's request itself, rather than a copy,
// saves copying its headers; every change is the same on a retry.
func (x *exchange) prepare(t *target, span *tracing.Attempt) *fasthttp.Request {
	req := x.req
	rules := x.rt.rules
	if !x.ready {
		x.ready = true
		fwdHost, fwdProto := req.Header.Host(), valueHTTP
		if x.https {
			fwdProto = valueHTTPS
		}
		if x.trusted {
			// Cloned: removeHopRequest drops the headers they are in.
			if v := http1.OneList(req.Header.PeekAll("X-Forwarded-Host")); len(v) > 0 {
				fwdHost = bytes.Clone(v)
			}
			if v := http1.OneList(req.Header.PeekAll("X-Forwarded-Proto")); len(v) > 0 {
				fwdProto = bytes.Clone(v)
			}
		}
		removeHopRequest(&req.Header, x.trusted, x.obs.trace != nil)
		reannounceTrailers(req, t, rules) // an HTTP/2 request's, see trailedBody
		// No Content-Type the client did not send (fasthttp's default
		// for a body, which the loops do not add).
		req.Header.SetNoDefaultContentType(true)
		// The gateway speaks its own version upstream (RFC 9110 section
		// 6.2), whatever the client's.
		req.Header.SetProtocolBytes(http11)
		req.Header.SetCanonical(hdrForwardedFor, x.xff)
		// Set before SetHost below overwrites the client's Host; none
		// for a request without one (HTTP/1.0).
		if len(fwdHost) > 0 {
			req.Header.SetCanonical(hdrForwardedHost, fwdHost)
		}
		req.Header.SetCanonical(hdrForwardedProto, fwdProto)
		req.Header.SetCanonical(hdrRequestID, x.obs.id)
		if rules != nil {
			setRewrittenPath(req.URI(), rules)
			rules.request.apply(&req.Header)
		}
		switch {
		case x.stream != nil:
			req.SetBodyStream(x.stream, req.Header.ContentLength())
		case x.body != nil:
			req.SetBodyRaw(x.body)
		}
	}
	if x.stream != nil {
		x.sent = true
	}
	if tp, ts := span.Headers(); tp != nil {
		// Each attempt's own, unless the route's rules set or remove them.
		if rules == nil || !rules.request.drops(hdrTraceparent) {
			req.Header.SetCanonical(hdrTraceparent, tp)
		}
		if ts != "" && (rules == nil || !rules.request.drops(hdrTracestate)) {
			req.Header.SetCanonical(hdrTracestate, []byte(ts))
		}
	}
	if rules == nil || !rules.preserveHost {
		req.Header.SetHost(t.Client.Addr)
	}
	req.UseHostHeader = true
	if t.Client.IsTLS {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	return req
}

// removeHopRequest deletes the fields of the client's request that
// http1.Drop drops (trusted: the client is a trusted proxy; trace: the
// gateway sends its own trace context), which prepare then sets once where
// they are the gateway's: a client's X-Forwarded-*, X-Request-Id or trace
// context must not reach the upstream beside the gateway's values.
// removeHopResponse deletes the hop-by-hop fields of a response, including
// those its Connection header names. They look at each header once and
// delete only what they find, so that a message without such fields (most
// of them) costs one pass and no allocation. (Two functions: ranging over
// the headers of a concrete type lets the compiler keep the loop on the
// stack.)
func removeHopRequest(h *fasthttp.RequestHeader, trusted, trace bool) {
	var buf [128]byte
	names := buf[:0]
	drop := http1.Drop{Trusted: trusted, Connection: http1.OneList(h.PeekAll("Connection")), Trace: trace}
	for k := range h.All() {
		if drop.Drops(k) {
			names = append(append(names, k...), 0)
		}
	}
	for len(names) > 0 {
		var name []byte
		name, names = nextName(names)
		h.DelBytes(name)
	}
}

func removeHopResponse(h *fasthttp.ResponseHeader) {
	var buf [128]byte
	names := buf[:0]
	conn := http1.OneList(h.PeekAll("Connection"))
	for k := range h.All() {
		names = appendHop(names, k, conn)
	}
	for len(names) > 0 {
		var name []byte
		name, names = nextName(names)
		h.DelBytes(name)
	}
}

// appendHop appends header name k and a 0 byte to names if k is hop-by-hop.
func appendHop(names, k, conn []byte) []byte {
	if http1.IsHop(k, conn) {
		names = append(append(names, k...), 0)
	}
	return names
}

// nextName splits the first name off names that appendHop collected.
func nextName(names []byte) (name, rest []byte) {
	i := bytes.IndexByte(names, 0)
	return names[:i], names[i+1:]
}

// upstreamError wraps a client error from target t in an *UpstreamError.
func upstreamError(t *target, err error) *UpstreamError {
	ue := &UpstreamError{Target: t.URL, Err: err}
	var op *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrDialTimeout), errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		// connect_timeout: a timeout the target never saw the request of.
		ue.Err, ue.Connect = fmt.Errorf("%w: %v", sluice.ErrTimeout, err), true
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		ue.Err = fmt.Errorf("%w: %v", sluice.ErrTimeout, err)
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, fasthttp.ErrNoFreeConns):
		ue.Connect = true
	}
	return ue
}

// http11 is the version the gateway speaks, to targets and clients alike
// (RFC 9110 section 6.2), whatever theirs.
var http11 = []byte("HTTP/1.1")

// releaseResponse closes a streamed body and frees the response.
func releaseResponse(resp *fasthttp.Response) {
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
}

// sendResponse sends an upstream response to the client: resp is either
// the client's response itself, which the upstream's was read into, or a
// response of its own, whose headers are copied and which is freed once its
// body has been sent. The body streams: a chunked or unbounded body is
// flushed as it arrives, and a slow client slows the reading from the
// upstream instead of filling memory.
func sendResponse(ctx *fasthttp.RequestCtx, resp *fasthttp.Response, rules *routeRules) {
	h := &ctx.Response.Header
	if resp == &ctx.Response {
		removeHopResponse(h)
		if rules != nil {
			kept := keepRateLimit(h) // the limit's own, set before: they stand
			rules.response.apply(h)
			kept.restore(h)
		}
		stream := resp.BodyStream()
		switch {
		case stream == nil:
		case http1.Bodiless(ctx.IsHead(), resp.StatusCode()):
			cl := h.ContentLength()
			_ = resp.CloseBodyStream()
			if ctx.IsHead() && cl >= 0 {
				h.SetContentLength(cl)
			}
		case h.ContentLength() < 0:
			h.SetContentLength(-1) // chunked to the client, flushed per read
		}
		// fasthttp closes the stream, and so frees the upstream
		// connection, once the body is sent (or the client is gone).
		return
	}
	kept := keepRateLimit(h) // the gateway's own headers, set before the call
	resp.Header.CopyTo(h)
	removeHopResponse(h)
	if rules != nil {
		rules.response.apply(h)
	}
	kept.restore(h)
	stream := resp.BodyStream()
	if stream == nil || http1.Bodiless(ctx.IsHead(), resp.StatusCode()) {
		cl := resp.Header.ContentLength()
		if stream == nil && !resp.SkipBody {
			ctx.Response.SetBody(resp.Body()) // a small body, read whole
		}
		releaseResponse(resp)
		if ctx.IsHead() && cl >= 0 {
			ctx.Response.Header.SetContentLength(cl)
		}
		return
	}
	size := resp.Header.ContentLength()
	if size < 0 {
		size = -1 // chunked to the client, flushed per read
	}
	ctx.Response.SetBodyStream(&upstreamBody{r: stream, resp: resp}, size)
}

// upstreamBody is an upstream response body on its way to the client;
// fasthttp closes it once the body is sent (or the client is gone).
type upstreamBody struct {
	r    io.Reader
	resp *fasthttp.Response
	held bool // Close does nothing: the body outlives its response (see hold)
	upstream.BodyEnd
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.Took(n, err)
	return n, err
}

func (b *upstreamBody) Close() error {
	if b.held {
		return nil
	}
	if b.resp != nil {
		releaseResponse(b.resp)
		b.resp = nil
	}
	b.End()
	return nil
}
