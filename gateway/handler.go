package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/telemetry"
)

// route is one configured route with its policies built.
type route struct {
	name  string
	cfg   *config.Route
	match matcher
	pool  *pool
	life  *lifecycle  // what every engine drives a request through
	rules *routeRules // nil when the route changes nothing of its requests
	// loop reports whether event loops can serve the route: its policies
	// decide at once.
	loop     bool
	grpc     grpcMethods    // the gRPC calls that may be retried
	policies *routePolicies // for /status and reuse across reloads
	metrics  *telemetry.Route
	inflight atomic.Int64
}

// handle serves one client request.
func (g *Gateway) handle(ctx *fasthttp.RequestCtx) { g.handleIn(ctx, g.state.Load(), false) }

// handleIn serves one client request on configuration st; with
// bodyOver, its body is refused (413) whatever st's server.max_body_bytes
// (see expect).
func (g *Gateway) handleIn(ctx *fasthttp.RequestCtx, st *state, bodyOver bool) {
	start := time.Now()
	h := &ctx.Request.Header
	x := g.newExchange(nil, &ctx.Request)
	x.obs.begin(h.PeekBytes(hdrRequestID))
	if st.tracer != nil {
		x.obs.startTrace(st.tracer, h, h.Method(), ctx.Request.URI().Path(), clientIP(peerAddr(ctx), forwardedList(h), st.trusted))
	}
	code := http1.RefusedHead(h.Method(), h.RequestURI(), h.Protocol(), h.RawHeaders())
	if code == 0 && bytes.IndexByte(ctx.Request.URI().Path(), 0) >= 0 {
		code = fasthttp.StatusBadRequest // a NUL percent-encoded in the path, as nginx
	}
	if code != 0 {
		reason := http1.RefusalReason(code)
		writeError(ctx, code, reason, 0)
		// The connection closes: what follows the head cannot be trusted
		// to be framed as fasthttp read it. (After writeError, which
		// resets the response.)
		g.closeAfter(ctx)
		g.finish(ctx, nil, start, reason, &x.obs)
		g.exchanges.Put(x.reset())
		return
	}
	req := fastRequest{&ctx.Request}
	rt, ambiguous := st.route(req)
	if rt == nil {
		code, reason := fasthttp.StatusNotFound, "no_route"
		if ambiguous != "" {
			code, reason = fasthttp.StatusBadRequest, ambiguous
		}
		writeError(ctx, code, reason, 0)
		if ambiguous != "" {
			g.closeAfter(ctx) // a 400 closes, as nginx's does
		} else {
			g.closeUnread(ctx, 0, false)
		}
		g.finish(ctx, nil, start, reason, &x.obs)
		g.exchanges.Put(x.reset())
		return
	}
	x.rt = rt
	rt.inflight.Add(1) // given back by finish
	http10 := !ctx.Request.Header.IsHTTP11()
	if http10 {
		// prepare makes the request HTTP/1.1 for the upstream; the answer
		// to the client follows the client's own version.
		proto := string(ctx.Request.Header.Protocol())
		defer ctx.Request.Header.SetProtocol(proto)
	}
	if ctx.Request.Header.ConnectionClose() {
		// The request goes upstream without its Connection header; the
		// client's wish to close is kept on the response.
		defer ctx.SetConnectionClose()
	}
	peer, xff := peerAddr(ctx), forwardedList(&ctx.Request.Header)
	x.https = overTLS(ctx.Conn())
	var rl []byte       // the RateLimit header value, when the limit set one
	var limitKey string // the request's rate-limit key, when the route has a limit
	if rt.life.rate != nil {
		var ok bool
		if limitKey, ok = rt.life.rate.keyOf(req, rt, clientIP(peer, xff, st.trusted)); !ok {
			writeError(ctx, fasthttp.StatusBadRequest, reasonAmbiguousKey, 0)
			g.closeAfter(ctx) // a 400 closes, as nginx's does
			g.finish(ctx, rt, start, reasonAmbiguousKey, &x.obs)
			g.exchanges.Put(x.reset())
			return
		}
		v, ok := g.limitRate(ctx, rt, limitKey, x.rl[:0])
		if !ok {
			g.closeUnread(ctx, 0, false)
			g.finish(ctx, rt, start, string(sluice.RateLimited), &x.obs)
			g.exchanges.Put(x.reset())
			return
		}
		rl = v
	}
	x.xff = forwardedFor(x.xff[:0], peer, xff, st.trusted)
	x.trusted = st.trusted.contains(peer)
	if isWebSocket(h) {
		reason := g.serveWebSocket(ctx, rt, x.xff, x.trusted, &x.obs)
		g.finish(ctx, rt, start, reason, &x.obs)
		g.exchanges.Put(x.reset())
		return
	}
	if reason := x.readBody(ctx, st.cfg.Server.MaxBodyBytes, bodyOver, &g.held, int64(st.cfg.Server.MaxHeldBodyBytes)); reason != "" {
		if rt.life.rate != nil {
			rt.life.rate.setHeaders(&ctx.Response.Header, rl)
		}
		g.closeAfter(ctx) // the body was refused: what follows it is not read
		g.finish(ctx, rt, start, reason, &x.obs)
		g.exchanges.Put(x.reset())
		return
	}
	x.final = x.stream != nil || !http1.Idempotent(ctx.Method())
	direct := !ctx.Request.Header.ConnectionClose()
	if rt.life.rate != nil && (!direct || rt.life.group != nil) {
		// Set now: they belong on every answer, and the paths below keep
		// them. A direct response sets them once the upstream answered.
		rt.life.rate.setHeaders(&ctx.Response.Header, rl)
	}
	if rt.life.group != nil && x.body == nil && x.stream == nil && (ctx.IsGet() || ctx.IsHead()) {
		g.finish(ctx, rt, start, g.coalesced(ctx, rt, x, limitKey), &x.obs) // x is not reused: the group holds its attempt
		return
	}
	if direct {
		// The upstream's response is read straight into the client's, which
		// saves a response and a copy of its headers. (Not when the client
		// closes: the upstream connection, whose release looks at this
		// response's Connection, would be closed with it.)
		x.direct = &ctx.Response
	}
	watched := x.stream == nil // else the client's connection is the body's to read
	if watched {
		x.watch.arm(ctx.Conn())
	}
	goodKey := rt.life.lastGoodKey(&ctx.Request.Header, limitKey, x.body != nil || x.stream != nil)
	resp, err := x.run()
	resp, err, fellBack := x.toFallbackUpstream(resp, err)
	if watched {
		x.watch.stop()
	}
	x.take(resp)
	if x.direct != nil && rt.life.rate != nil {
		rt.life.rate.setHeaders(&ctx.Response.Header, rl)
	}
	reason, answered := answerLastGood(ctx, rt, goodKey, resp, err, fellBack != "")
	if !answered {
		reason = respond(ctx, rt, resp, err)
	}
	if errors.Is(err, errClientBody) {
		g.closeAfter(ctx) // the body was refused (413) or broke off: the rest is not read
	} else if b, ok := x.stream.(*clientBody); ok {
		g.closeUnread(ctx, b.read, b.ended) // an answer before the body was read, a 503 of a breaker's say
	}
	if fellBack != "" {
		reason = fellBack
	}
	if ctx.Response.IsBodyStream() {
		wt := st.cfg.Server.WriteTimeout.D()
		if http10 && ctx.Response.Header.ContentLength() < 0 && !ctx.IsHead() {
			g.sendUntilClose(ctx, wt)
		} else {
			paceClient(ctx.Response.BodyStream(), ctx.Conn(), wt)
		}
	}
	x.obs.bytesIn = x.bodySize()
	g.finish(ctx, rt, start, reason, &x.obs)
	g.exchanges.Put(x.reset()) // the chain has returned: nothing holds x any more
}

// limitRate takes one event of key from rt's rate limit. It returns the
// RateLimit header value (appended to dst) for the answer, and false once
// it has written the 429 into ctx when the limit refuses the request.
func (g *Gateway) limitRate(ctx *fasthttp.RequestCtx, rt *route, key string, dst []byte) ([]byte, bool) {
	ok, retryAfter, v := rt.life.rate.allow(key, rt, dst)
	rt.metrics.RateLimit(ok)
	if !ok {
		rt.life.rate.setHeaders(&ctx.Response.Header, v) // writeError keeps them
		writeError(ctx, fasthttp.StatusTooManyRequests, string(sluice.RateLimited), retryAfter)
	}
	return v, ok
}

// newExchange returns an exchange for req on rt (nil until the request's
// route is known), reusing a freed one.
func (g *Gateway) newExchange(rt *route, req *fasthttp.Request) *exchange {
	x, _ := g.exchanges.Get().(*exchange)
	if x == nil {
		x = &exchange{watch: &clientWatch{}}
		x.watch.init()
	}
	x.rt, x.req = rt, req
	return x
}

// respond writes the outcome of the route's chain: the upstream's response,
// the route's fallback, or an error naming the reason. It returns the reason
// for the log ("" when the upstream's response was sent).
func respond(ctx *fasthttp.RequestCtx, rt *route, resp *fasthttp.Response, err error) string {
	if err == nil {
		sendResponse(ctx, resp, rt.rules)
		return ""
	}
	static := rt.life.fallback != nil && rt.life.fallback.Static
	if serr := (*StatusError)(nil); errors.As(err, &serr) && resp != nil && !static {
		sendResponse(ctx, resp, rt.rules)
		return "upstream_status"
	}
	if resp != nil && resp != &ctx.Response {
		releaseResponse(resp)
	}
	code, reason := answer.Classify(err)
	retryAfter, _ := answer.RetryAfter(err)
	if static {
		writeFallback(ctx, rt.life.fallback)
		rt.metrics.Fallback(telemetry.FallbackStatic)
		return "fallback:" + reason
	}
	writeError(ctx, code, reason, retryAfter)
	return reason
}

// readBody prepares the request body: kept in memory when it is small
// enough to send again on a retry and held (of at most maxHeld bytes held
// across the gateway, counted as they arrive) has room for it, streamed
// otherwise (what was read before held had no room first). It writes the
// error response and returns its reason when the body is refused: its
// length is over maxBody (none when 0), or over is set.
func (x *exchange) readBody(ctx *fasthttp.RequestCtx, maxBody int, over bool, held *heldBodies, maxHeld int64) string {
	cl := ctx.Request.Header.ContentLength()
	if over || maxBody > 0 && cl > maxBody {
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, "body_too_large", 0)
		return "body_too_large"
	}
	stream := ctx.RequestBodyStream()
	switch {
	case cl == 0 || (cl == -2 && ctx.Request.Header.IsGet()):
		// No body (-2: no length and not chunked). A GET whose body has
		// no length (-1: chunked, or HTTP/2 DATA) streams, bounded, as
		// any other.
	case cl > 0 && cl <= maxReplayBody:
		buf, n, err := held.read(stream, cl, maxHeld)
		switch {
		case errors.Is(err, errNoRoom):
			x.resumed = newResumedBody(buf, stream, held, n)
			x.streamBody(ctx, x.resumed, maxBody)
		case err != nil || len(buf) < cl:
			held.release(n)
			writeError(ctx, fasthttp.StatusBadRequest, "body_unreadable", 0)
			return "body_unreadable"
		default:
			x.body, x.held, x.heldN = buf, held, n
		}
	default:
		x.streamBody(ctx, stream, maxBody)
	}
	return ""
}

// streamBody makes stream, the request's body (nil: none), the body the
// request streams upstream once, of at most maxBody bytes.
func (x *exchange) streamBody(ctx *fasthttp.RequestCtx, stream io.Reader, maxBody int) {
	if stream != nil {
		b := newClientBody(stream, maxBody)
		b.head = &ctx.Request.Header
		if x.rt.rules != nil {
			b.edit = &x.rt.rules.request
		}
		x.stream = b
	}
}

// forwardedList returns the client's X-Forwarded-For list (see http1.OneList),
// so that its right-most address is always the one the nearest proxy
// added.
func forwardedList(h *fasthttp.RequestHeader) []byte {
	return http1.OneList(h.PeekAll("X-Forwarded-For"))
}

// forwardedFor appends to dst the X-Forwarded-For to send upstream: the
// client's list (xff) with the peer appended when the peer is a trusted
// proxy, else the peer alone (a client's own header is never believed).
func forwardedFor(dst []byte, peer netip.Addr, xff []byte, trusted trustedProxies) []byte {
	if len(xff) > 0 && trusted.contains(peer) {
		dst = append(append(dst, xff...), ", "...)
	}
	return peer.AppendTo(dst)
}

// writeError answers with a small JSON body naming the reason, and a
// Retry-After header (whole seconds, rounded up) when the hint is known.
func writeError(ctx *fasthttp.RequestCtx, code int, reason string, retryAfter time.Duration) {
	resetResponse(ctx)
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	var secs int64
	if retryAfter > 0 {
		secs = answer.RetryAfterSeconds(retryAfter)
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	ctx.SetBody(answer.AppendJSON(make([]byte, 0, 64), reason, secs))
}

func writeFallback(ctx *fasthttp.RequestCtx, f *config.Fallback) {
	resetResponse(ctx)
	ctx.SetStatusCode(f.Status)
	ctx.SetContentType(f.ContentType)
	ctx.SetBodyString(f.Body)
}

// finish records the request in the metrics, the log and its trace (o is
// its observation), on every engine: now, or, when its response's body
// streams from a target, once that body has been sent (or the client is
// gone), so that its duration covers the whole response. rt, when not
// nil, is the route whose in-flight count the request holds: it holds it
// until then, and so does the target of its last attempt while the body
// streams. (The target's count, which the attempt's end gave back at the
// response's head, is taken again for the body.)
func (g *Gateway) finish(ctx *fasthttp.RequestCtx, rt *route, start time.Time, reason string, o *observation) {
	code := ctx.Response.StatusCode()
	if ctx.Response.IsBodyStream() {
		if b, ok := ctx.Response.BodyStream().(streamedBody); ok {
			// The request and its connection outlive the body: fasthttp
			// (or the loop's stream) closes it before it reuses them. The
			// observation does not: its engine reuses it at once.
			od := o.detached()
			od.remote = ctx.RemoteAddr() // read here: a loop's connection is not the stream's to read
			t := od.target
			if t != nil {
				t.InFlight.Add(1)
			}
			b.AtEnd(func() {
				if t != nil {
					t.InFlight.Add(-1)
				}
				od.bytesOut = b.Sent()
				g.record(ctx, rt, start, code, reason, od)
			})
			return
		}
	}
	if o.bytesOut == 0 {
		o.bytesOut = responseBodySize(ctx)
	}
	g.record(ctx, rt, start, code, reason, o)
}

// record records a request that ended now with status code, and gives
// back its route's in-flight count (rt may be nil: no route).
func (g *Gateway) record(ctx *fasthttp.RequestCtx, rt *route, start time.Time, code int, reason string, o *observation) {
	name := ""
	now := time.Now()
	d := now.Sub(start)
	if rt != nil {
		name = rt.name
		rt.inflight.Add(-1)
		rt.metrics.Request(code, reason, d)
	} else {
		g.metrics.Request(name, code, reason, d)
	}
	o.end(name, code, reason, now) // first: once a request's line is logged, its spans are queued
	g.logRequest(ctx, name, code, reason, d, o)
}

// responseBodySize is the size of ctx's response body: its length when it
// is in memory, none for HEAD, its Content-Length when it streams without
// an upstream.BodyEnd (-1 when it has none).
func responseBodySize(ctx *fasthttp.RequestCtx) int64 {
	switch {
	case ctx.IsHead():
		return 0
	case ctx.Response.IsBodyStream():
		return int64(max(ctx.Response.Header.ContentLength(), -1))
	}
	return int64(len(ctx.Response.Body()))
}
