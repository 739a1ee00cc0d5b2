package gateway

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/lru"
)

// lastGood keeps the last good answer to each GET request of a route, for
// its fallback (config.LastGood): at most maxEntries answers of at most
// maxBytes in all, the least recently used dropped first, each given for
// maxAge after it was received. Requests are told apart by requestKey
// (credentials and the rate-limit key included; not their conditions,
// which a whole answer satisfies as a fallback), and an
// answer is given only where it would be shared (sharedResponse.sharesWith:
// the headers its Vary names). It is safe for concurrent use.
type lastGood struct {
	mu      sync.Mutex                  // protects answers
	answers *lru.Cache[*sharedResponse] // by key, costed in bytes
}

// goodAnswerOverhead is what an answer is counted for beyond its bytes:
// its entry, its map slot and its response's fields.
const goodAnswerOverhead = 256

// stringOverhead is what a string is counted for beyond its bytes: its
// header in the slice that holds it.
const stringOverhead = 16

func newLastGood(lc *config.LastGood, c clock.Clock) *lastGood {
	return &lastGood{answers: lru.New[*sharedResponse](lru.Options{MaxEntries: lc.MaxEntries, MaxCost: lc.MaxBytes,
		MaxAge: lc.MaxAge.D(), Clock: c})}
}

// keepable returns resp, the answer to the GET request req, as an answer
// to keep, or nil when it is not one: not a 2xx or a 206, streamed rather
// than read whole, private (see sharedResponse.note), or the answer to a
// request whose Cache-Control says no-store (RFC 9111 section 5.2.1.5;
// or private, which no request says, taken alike). The gateway's
// own RateLimit headers, which belong to the request that got the answer,
// are not kept.
func keepable(resp *fasthttp.Response, req *fasthttp.RequestHeader) *sharedResponse {
	code := resp.StatusCode()
	if code < 200 || code > 299 || code == fasthttp.StatusPartialContent || resp.BodyStream() != nil || !req.IsGet() {
		return nil
	}
	for _, v := range req.PeekAll("Cache-Control") {
		if privateCacheControl(v) {
			return nil
		}
	}
	sr := &sharedResponse{status: code}
	conn := resp.Header.Peek("Connection")
	for k, v := range resp.Header.All() {
		if http1.IsHop(k, conn) || http1.EqualName(k, "RateLimit") || http1.EqualName(k, "RateLimit-Policy") {
			continue
		}
		sr.note(k, v)
		sr.headers = append(sr.headers, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
	}
	if sr.private {
		return nil
	}
	sr.keepVaried(req)
	sr.body = bytes.Clone(resp.Body())
	return sr
}

// keep records sr as the last good answer to the requests of key. An
// answer larger than maxBytes is not kept (and the one kept for key is
// dropped: it is no longer the last).
func (l *lastGood) keep(key string, sr *sharedResponse) {
	size := goodAnswerOverhead + len(key) + len(sr.body) + len(sr.varied)
	for _, kv := range sr.headers {
		size += len(kv[0]) + len(kv[1])
	}
	for _, name := range sr.vary {
		size += len(name) + stringOverhead // kept apart from the Vary header
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers.Put(key, sr, size)
}

// answer returns the answer kept for key if it may go to req and is at
// most maxAge old, with its age; an older one is dropped.
func (l *lastGood) answer(key string, req *fasthttp.RequestHeader) (*sharedResponse, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sr, age, ok := l.answers.Peek(key)
	if !ok || !sr.sharesWith(req) {
		return nil, 0
	}
	l.answers.Touch(key)
	return sr, age
}

// writeLastGood answers ctx with sr, an answer kept age ago, as
// sendResponse sends an upstream's (the route's response rules applied),
// with an Age header (RFC 9111 section 5.1) saying how old it is. The
// gateway's RateLimit headers for this request stay.
func writeLastGood(ctx *fasthttp.RequestCtx, sr *sharedResponse, age time.Duration, rules *routeRules) {
	resetResponse(ctx)
	h := &ctx.Response.Header
	kept := keepRateLimit(h)
	for _, kv := range sr.headers {
		h.AddBytesKV(kv[0], kv[1])
	}
	if rules != nil {
		rules.response.apply(h)
	}
	kept.restore(h)
	h.Set("Age", strconv.FormatInt(int64(age/time.Second), 10))
	h.SetStatusCode(sr.status)
	ctx.Response.SetBodyRaw(sr.body)
}

// len returns how many answers are kept and their size in bytes.
func (l *lastGood) len() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers.Len(), l.answers.Cost()
}

// evictions returns how many answers were dropped to make room for others.
func (l *lastGood) evictions() uint64 { return l.answers.Evictions() }
