// Package httpguard runs net/http handlers and round trips behind a
// sluice.Guard.
//
// Middleware guards a server's handlers. The handler writes straight to the
// client, so a response cannot be taken back: the middleware is meant for
// admission policies (rate limit, circuit breaker, concurrency limit) and a
// timeout. Options.Key keys each request for the guard's rate limits, as the
// gateway keys a route's: ByClientIP (behind trusted proxies, the right-most
// untrusted X-Forwarded-For address; an IPv6 client by its /64, or the
// prefix given to ByClientIPPrefix), ByHeader, ByPattern. A handler runs at
// most once per request; if a retry or hedge
// policy asks for another attempt after it ran, that attempt is Dropped with
// ErrNotReplayable and nothing is written twice.
//
// Transport guards a client's round trips. There every policy applies,
// retries included, for the requests that may be sent twice (Idempotent: an
// idempotent method or an Idempotency-Key header, with a body that can be
// replayed); a POST that reached the upstream is never sent again.
// Responses that a later attempt supersedes are drained and closed, and a
// response the guard counts as a failure (5xx by default) still reaches the
// caller as a response. NotRetryable, as a retry policy's AbortIf, returns
// the attempts that may not be repeated without a backoff wait; RetryIf, as
// its RetryIf, also retries only what the gateway retries by default
// (failures to connect, 502, 503, 504).
//
// WriteError and StatusFor map the guard's errors to HTTP: a rate limit to
// 429, an open circuit or overload to 503, a timeout to 504 and an
// unreachable upstream to 502, with Retry-After where it is known and a
// small JSON body naming the reason.
//
// Rate limiters report their decisions as RateLimit-Policy and RateLimit
// headers through HeaderSetter and RateLimitReporter (on a rejection) or
// AddHeaders (on an admitted request); Middleware does it for a
// ratelimit.Limiter in its guard, on every answer, as the gateway does.
package httpguard
