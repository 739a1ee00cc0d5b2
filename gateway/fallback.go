package gateway

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/telemetry"
)

// The levels of a route's fallback before its static answer (see
// config.Fallback): another upstream, then the last good answer. They run
// on the goroutine engine; the loops hand their routes over (loopFlow).

// lastGoodKey returns the key of the request req for the route's last
// good answers, "" when the route keeps none, req is not a GET or it has a
// body (hasBody): the body is not in the key, and the answer to one body
// must not go to a request with another. It is taken before the request
// is prepared for its upstream, which changes its Host; limitKey is its
// rate-limit key.
func (lc *lifecycle) lastGoodKey(req *fasthttp.RequestHeader, limitKey string, hasBody bool) string {
	if lc.flow.lastGood == nil || !req.IsGet() || hasBody {
		return ""
	}
	return requestKey(req, limitKey, nil)
}

// toFallbackUpstream sends a request whose call failed (with resp, the
// last attempt's response or nil, and err) to the fallback's upstream, if
// the route has one and the request may be sent twice. The upstream's
// answer replaces the failure unless it is a 5xx or it could not be
// reached; then the failure stands, and the next levels see it. When it
// answered, the reason returned, for the log, names the level and the
// failure ("fallback:upstream:timeout"). The attempt passes the target's
// active and passive health, not the route's policies, which guard the
// route's own upstream. A target they took out is not tried: unlike the
// route's own targets, tried anyway when every one is out, the failure is
// already there and the next levels answer at once. The attempt is bounded
// by that upstream's response_header_timeout and the route's timeout, and
// cut when the client leaves.
func (x *exchange) toFallbackUpstream(resp *fasthttp.Response, err error) (*fasthttp.Response, error, string) {
	p := x.rt.life.flow.fallbackTo
	if p == nil || err == nil || x.final {
		return resp, err, ""
	}
	t := p.Choose(nil)
	if !t.Healthy() {
		return resp, err, ""
	}
	permit, perr := t.Acquire()
	if perr != nil {
		return resp, err, "" // taken out: the next levels answer at once
	}
	t.InFlight.Add(1)
	start := time.Now()
	tr := upstream.Trip{Wait: t.Wait, Cut: &x.watch.cut}
	d := x.rt.life.timeout
	if d > 0 {
		tr.Deadline = start.Add(d)
	}
	if t.Wait > 0 && (d <= 0 || t.Wait < d) {
		d = t.Wait
	}
	if d > 0 {
		tr.Head = start.Add(d)
	}
	fresp := fasthttp.AcquireResponse()
	span := x.obs.beginAttempt(t, "fallback")
	ferr := t.RoundTrip(x.prepare(t, span), fresp, tr)
	t.InFlight.Add(-1)
	var code int
	var retryAfter []byte
	if ferr != nil {
		ferr = upstreamError(t, ferr)
	} else {
		code, retryAfter = outcomeOf(fresp)
	}
	endAttempt(span, code, ferr)
	o, _ := attemptResult(code, retryAfter, ferr)
	permit.Done(o)
	t.Metrics.Attempt(o.Class, time.Since(start))
	if o.Class != sluice.Success {
		releaseResponse(fresp)
		return resp, err, ""
	}
	x.releasePrev() // the failed attempt's response
	x.prev = fresp
	x.rt.metrics.Fallback(telemetry.FallbackUpstream)
	_, reason := answer.Classify(err)
	return fresp, nil, "fallback:upstream:" + reason
}

// answerLastGood answers a failed request (err is its call's error) with
// the last good answer kept for key, if there is one: it returns the
// reason for the log and true when it did. A good answer (err nil) is kept
// instead, unless fellBack says it came from the fallback's upstream.
func answerLastGood(ctx *fasthttp.RequestCtx, rt *route, key string, resp *fasthttp.Response, err error, fellBack bool) (string, bool) {
	lg := rt.life.flow.lastGood
	if lg == nil || key == "" {
		return "", false
	}
	if err == nil {
		if sr := keepable(resp, &ctx.Request.Header); sr != nil && !fellBack {
			lg.keep(key, sr)
		}
		return "", false
	}
	sr, age := lg.answer(key, &ctx.Request.Header)
	if sr == nil {
		return "", false
	}
	if resp != nil && resp != &ctx.Response {
		releaseResponse(resp)
	}
	_, reason := answer.Classify(err)
	writeLastGood(ctx, sr, age, rt.rules)
	rt.metrics.Fallback(telemetry.FallbackLastGood)
	return "fallback:last_good:" + reason, true
}
