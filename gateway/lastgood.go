package gateway

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// lastGood keeps the last good answer to each GET request of a route, for
// its fallback (config.LastGood): at most maxEntries answers of at most
// maxBytes in all, the least recently used dropped first, each given for
// maxAge after it was received. Requests are told apart as coalesced ones
// are (coalescingKey: credentials and the rate-limit key included), and an
// answer is given only where it would be shared (sharedResponse.sharesWith:
// the headers its Vary names). It is safe for concurrent use.
type lastGood struct {
	maxAge     int64 // nanoseconds
	maxEntries int
	maxBytes   int
	clock      clock.Clock

	mu    sync.Mutex // protects m, the list and bytes
	m     map[string]*goodAnswer
	head  goodAnswer // sentinel of a circular list, most recently used first
	bytes int        // the sizes of the answers in m
}

// goodAnswer is one answer kept, in the LRU list.
type goodAnswer struct {
	key        string
	sr         *sharedResponse
	at         int64 // clock.Nanotime when it was received
	size       int
	prev, next *goodAnswer
}

// goodAnswerOverhead is what an answer is counted for beyond its bytes:
// its entry, its map slot and its response's fields.
const goodAnswerOverhead = 256

func newLastGood(lc *config.LastGood, c clock.Clock) *lastGood {
	l := &lastGood{maxAge: int64(lc.MaxAge.D()), maxEntries: lc.MaxEntries, maxBytes: lc.MaxBytes,
		clock: c, m: map[string]*goodAnswer{}}
	l.head.prev, l.head.next = &l.head, &l.head
	return l
}

// keepable returns resp, the answer to the GET request req, as an answer
// to keep, or nil when it is not one: not a 2xx or a 206, streamed rather
// than read whole, or private (see sharedResponse.note). The gateway's
// own RateLimit headers, which belong to the request that got the answer,
// are not kept.
func keepable(resp *fasthttp.Response, req *fasthttp.RequestHeader) *sharedResponse {
	code := resp.StatusCode()
	if code < 200 || code > 299 || code == fasthttp.StatusPartialContent || resp.BodyStream() != nil || !req.IsGet() {
		return nil
	}
	sr := &sharedResponse{status: code}
	conn := resp.Header.Peek("Connection")
	for k, v := range resp.Header.All() {
		if isHop(k, conn) || equalName(k, "RateLimit") || equalName(k, "RateLimit-Policy") {
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
	now := l.clock.Nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[key]; ok {
		l.remove(e)
	}
	if size > l.maxBytes {
		return
	}
	for len(l.m) >= l.maxEntries || l.bytes+size > l.maxBytes {
		l.remove(l.head.prev)
	}
	e := &goodAnswer{key: key, sr: sr, at: now, size: size}
	l.m[key] = e
	l.bytes += size
	l.pushFront(e)
}

// answer returns the answer kept for key if it may go to req and is at
// most maxAge old, with its age; an older one is dropped.
func (l *lastGood) answer(key string, req *fasthttp.RequestHeader) (*sharedResponse, time.Duration) {
	now := l.clock.Nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok {
		return nil, 0
	}
	age := now - e.at
	if age > l.maxAge {
		l.remove(e)
		return nil, 0
	}
	if !e.sr.sharesWith(req) {
		return nil, 0
	}
	l.unlink(e)
	l.pushFront(e)
	return e.sr, time.Duration(age)
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
	return len(l.m), l.bytes
}

// remove drops e. It requires l.mu.
func (l *lastGood) remove(e *goodAnswer) {
	delete(l.m, e.key)
	l.bytes -= e.size
	l.unlink(e)
}

// unlink takes e out of the list. It requires l.mu.
func (l *lastGood) unlink(e *goodAnswer) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// pushFront puts e at the front of the list. It requires l.mu.
func (l *lastGood) pushFront(e *goodAnswer) {
	e.prev, e.next = &l.head, l.head.next
	l.head.next.prev = e
	l.head.next = e
}
