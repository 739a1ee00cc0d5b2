package gateway

import (
	"bytes"
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/ratelimit"
)

// rateLimit is a route's rate limit: a limiter and how to key a request.
type rateLimit struct {
	limiter *ratelimit.Limiter
	header  string   // key by this header; "" with byRoute false keys by IP
	names   []string // the names header is read under (http1.CGINames)
	one     bool     // a comma is part of header's one value (http1.OneValue); else it makes a list
	byRoute bool
	v6bits  int                   // the prefix length an IPv6 client is keyed by (appendClient)
	policy  []byte                // the RateLimit-Policy header value
	onError ratelimit.ErrorPolicy // what a store failure does
}

// allow takes one event of key (see key). It returns whether the request
// may go on and, if not, when to retry, and the RateLimit header value
// (IETF httpapi draft, structured-field form) appended to dst, for
// setHeaders (dst unchanged when the store failed: no header then).
func (l *rateLimit) allow(key string, rt *route, dst []byte) (bool, time.Duration, []byte) {
	d, err := l.limiter.Allow(context.Background(), key, 1)
	if err != nil {
		// The store failed (a Redis store applies its own on_error choice
		// first; this is what is left).
		if l.onError == ratelimit.FailClosed {
			return false, time.Second, dst
		}
		return true, 0, dst
	}
	return d.Allowed, d.RetryAfter, answer.AppendRateLimit(dst, rt.name, d.Remaining, d.ResetAfter)
}

// setHeaders sets RateLimit to value and RateLimit-Policy to the limit's
// policy; it does nothing when value is empty (no decision was made).
func (l *rateLimit) setHeaders(h *fasthttp.ResponseHeader, value []byte) {
	if len(value) == 0 {
		return
	}
	h.SetCanonical(hdrRateLimitPolicy, l.policy)
	h.SetCanonical(hdrRateLimit, value)
}

// The names of the headers the gateway sets on every request or response,
// in fasthttp's canonical form (as its Peek and Set normalize them):
// SetCanonical saves normalizing them each time.
var (
	hdrRateLimit       = []byte("Ratelimit")
	hdrRateLimitPolicy = []byte("Ratelimit-Policy")
	hdrForwardedFor    = []byte("X-Forwarded-For")
	hdrForwardedHost   = []byte("X-Forwarded-Host")
	hdrForwardedProto  = []byte("X-Forwarded-Proto")
	valueHTTP          = []byte("http")
	valueHTTPS         = []byte("https")
)

// resetResponse clears the response for an answer of the gateway's own,
// keeping the RateLimit and RateLimit-Policy headers the rate limit set:
// they belong on every answer, a 429 above all.
func resetResponse(ctx *fasthttp.RequestCtx) {
	kept := keepRateLimit(&ctx.Response.Header)
	ctx.Response.Reset()
	kept.restore(&ctx.Response.Header)
}

// rateLimitHeaders are the RateLimit and RateLimit-Policy values a response
// carried, the gateway's own, kept across a rewrite of its headers.
type rateLimitHeaders struct{ value, policy []byte }

// keepRateLimit copies h's RateLimit and RateLimit-Policy values.
func keepRateLimit(h *fasthttp.ResponseHeader) rateLimitHeaders {
	v, p := h.Peek("RateLimit"), h.Peek("RateLimit-Policy")
	if len(v) == 0 && len(p) == 0 {
		return rateLimitHeaders{}
	}
	return rateLimitHeaders{bytes.Clone(v), bytes.Clone(p)}
}

// restore sets the kept values on h again.
func (k rateLimitHeaders) restore(h *fasthttp.ResponseHeader) {
	if len(k.value) > 0 {
		h.SetCanonical(hdrRateLimit, k.value)
	}
	if len(k.policy) > 0 {
		h.SetCanonical(hdrRateLimitPolicy, k.policy)
	}
}

// policyHeader is the RateLimit-Policy value of a limit, for example
// `"infer";q=100;w=60`.
func policyHeader(name string, l ratelimit.Limit) []byte {
	return answer.AppendPolicy(nil, name, max(l.Limit, l.Burst), l.Period)
}
