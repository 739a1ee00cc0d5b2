package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/ratelimit"
)

// rateLimit is a route's rate limit: a limiter and how to key a request.
type rateLimit struct {
	limiter *ratelimit.Limiter
	header  string // key by this header; "" with byRoute false keys by IP
	byRoute bool
	policy  []byte // the RateLimit-Policy header value
	onError string // open | closed | local: what a store failure does
}

// key returns whose limit the request counts against.
func (l *rateLimit) key(ctx *fasthttp.RequestCtx, rt *route, client netip.Addr) string {
	switch {
	case l.byRoute:
		return rt.name
	case l.header != "":
		return rt.name + "|h|" + string(ctx.Request.Header.Peek(l.header))
	}
	return rt.name + "|ip|" + client.String()
}

// allow takes one event of the request's key. It sets the RateLimit and
// RateLimit-Policy headers (IETF httpapi draft, structured-field form) and
// returns whether the request may go on and, if not, when to retry.
func (l *rateLimit) allow(ctx *fasthttp.RequestCtx, rt *route, client netip.Addr) (bool, time.Duration) {
	d, err := l.limiter.Allow(context.Background(), l.key(ctx, rt, client), 1)
	if err != nil {
		// The store failed (a Redis store applies its own on_error choice
		// first; this is what is left) or is full: never over-admit.
		if errors.Is(err, ratelimit.ErrFull) || l.onError == "closed" {
			return false, time.Second
		}
		return true, 0
	}
	h := &ctx.Response.Header
	h.SetBytesV("RateLimit-Policy", l.policy)
	v := make([]byte, 0, 48)
	v = append(v, '"')
	v = append(v, rt.name...)
	v = append(v, `";r=`...)
	v = strconv.AppendInt(v, int64(max(d.Remaining, 0)), 10)
	v = append(v, ";t="...)
	v = strconv.AppendInt(v, int64(ceilSeconds(d.ResetAfter)), 10)
	h.SetBytesV("RateLimit", v)
	return d.Allowed, d.RetryAfter
}

// resetResponse clears the response for an answer of the gateway's own,
// keeping the RateLimit and RateLimit-Policy headers the rate limit set:
// they belong on every answer, a 429 above all.
func resetResponse(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	rl, pol := h.Peek("RateLimit"), h.Peek("RateLimit-Policy")
	if len(rl) == 0 && len(pol) == 0 {
		ctx.Response.Reset()
		return
	}
	rl, pol = bytes.Clone(rl), bytes.Clone(pol)
	ctx.Response.Reset()
	h.SetBytesV("RateLimit", rl)
	h.SetBytesV("RateLimit-Policy", pol)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// policyHeader is the RateLimit-Policy value of a limit, for example
// `"infer";q=100;w=60`.
func policyHeader(name string, l ratelimit.Limit) []byte {
	q := l.Limit
	if l.Burst > q {
		q = l.Burst
	}
	return []byte(`"` + name + `";q=` + strconv.Itoa(q) + ";w=" + strconv.FormatInt(max(ceilSeconds(l.Period), 1), 10))
}
