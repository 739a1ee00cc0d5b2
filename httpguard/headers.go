package httpguard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/answer"
)

// HeaderSetter sets response headers that describe a policy's decision, such
// as a rate limiter's RateLimit-Policy and RateLimit headers.
//
// A rejection error that implements HeaderSetter (anywhere in its chain) sets
// its headers on the response WriteError writes. For an admitted request, a
// policy passes a HeaderSetter to AddHeaders. SetHeaders may be called from
// the goroutine that writes the response, never concurrently with itself for
// one response.
type HeaderSetter interface {
	SetHeaders(h http.Header)
}

// RateLimitReporter is implemented by a rate limiter's rejection error when
// its package cannot import httpguard (packages below httpguard must not):
// WriteError formats what it reports with SetRateLimitHeaders. A HeaderSetter
// found in the same error chain takes precedence.
//
// policy names the limit ("" means "default"), limit is the quota per window,
// remaining what is left of it now, window the length of the window and
// reset how long until the quota is back in full.
type RateLimitReporter interface {
	RateLimitReport() (policy string, limit, remaining int, window, reset time.Duration)
}

// RateLimitHeaders is a rate limiter's decision as a HeaderSetter: pass it to
// AddHeaders, or embed it in a rejection error. Its fields are
// SetRateLimitHeaders's arguments.
type RateLimitHeaders struct {
	Policy    string        // the policy's name; "" means "default"
	Limit     int           // the quota per window (q)
	Remaining int           // units left in the quota now (r)
	Window    time.Duration // the window's length (w); zero leaves w out
	Reset     time.Duration // time until the quota is restored (t)
}

// SetHeaders adds r's RateLimit-Policy and RateLimit headers to h.
func (r RateLimitHeaders) SetHeaders(h http.Header) {
	SetRateLimitHeaders(h, r.Policy, r.Limit, r.Remaining, r.Window, r.Reset)
}

// SetRateLimitHeaders adds one rate limit's headers to h in the structured
// field form of the IETF httpapi ratelimit-headers draft:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=30
//
// policy is the policy's name ("" means "default"; characters a structured
// string cannot hold are dropped); limit is the quota q; remaining the units
// r left; window the window w and reset the delay t until the quota is
// restored, both in seconds rounded up. Negative numbers count as zero; w is
// left out when window is zero or less.
//
// The headers are added, not set: calling it once per policy gives a list
// naming every policy that applies, as the draft allows.
func SetRateLimitHeaders(h http.Header, policy string, limit, remaining int, window, reset time.Duration) {
	h.Add("RateLimit-Policy", string(answer.AppendPolicy(nil, policy, limit, window)))
	h.Add("RateLimit", string(answer.AppendRateLimit(nil, policy, remaining, reset)))
}

// setHeadersFrom sets the headers of the first HeaderSetter, or else the
// first RateLimitReporter, in err's chain.
func setHeadersFrom(h http.Header, err error) {
	var hs HeaderSetter
	if errors.As(err, &hs) {
		hs.SetHeaders(h)
		return
	}
	var rr RateLimitReporter
	if errors.As(err, &rr) {
		policy, limit, remaining, window, reset := rr.RateLimitReport()
		SetRateLimitHeaders(h, policy, limit, remaining, window, reset)
	}
}

// hooksKey is the context key under which Middleware stores its
// *responseWriter for AddHeaders.
type hooksKey struct{}

// AddHeaders arranges for hs to set its headers on the response to the
// request whose context is ctx, or an ancestor of it, when that request runs
// inside Middleware. The headers are set just before the response headers
// are written: by the handler, by the rejection, or when the handler returns
// without writing. A rate limiter that admitted a request calls it to report
// its quota.
//
// AddHeaders reports whether hs will be applied: false when ctx does not
// come from Middleware or the response headers are already written. It is
// safe for concurrent use.
func AddHeaders(ctx context.Context, hs HeaderSetter) bool {
	rw, ok := ctx.Value(hooksKey{}).(*responseWriter)
	if !ok || hs == nil {
		return false
	}
	return rw.addHook(hs)
}
