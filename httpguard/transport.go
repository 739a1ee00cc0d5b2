package httpguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice"
)

var (
	// errLate is the error of an attempt that starts after the guard
	// returned (a hedge's straggler).
	errLate = errors.New("httpguard: attempt started after the round trip ended")
	// errNoResponse is returned when the guard settles on no response and
	// no error (a policy returned an empty Result).
	errNoResponse = errors.New("httpguard: the guard returned neither a response nor an error")
	// errBodyTooLarge is why a request whose body was not buffered is not
	// sent again.
	errBodyTooLarge = errors.New("the request body is larger than MaxReplayBody")
	// errNilResponse replaces a RoundTripper's nil response with nil error.
	errNilResponse = errors.New("httpguard: round tripper returned neither a response nor an error")
	// errNotIdempotent is why a request that may have reached the upstream
	// is not sent again.
	errNotIdempotent = errors.New("the request is not idempotent and may have reached the upstream")
)

// Transport returns an http.RoundTripper that sends each request through
// next behind g. A nil next means http.DefaultTransport; a nil g sends
// requests straight through next.
//
// Each attempt clones the request with a context carrying the attempt
// context's values. That context is cancelled with the attempt context while
// the round trip runs, then only with the caller's: a per-attempt timeout
// bounds the wait for a response but does not cut off the body of the
// response it let through.
//
// Each attempt is classified: a response whose status is a failure
// (Options.IsFailure, default >= 500) is a Failure with a *StatusError
// (carrying the response and its Retry-After), so breakers count it and
// retry policies may retry it; any other response is a Success; an error is
// classified by the guard's Classifier (sluice.Guard.Classify; by default a
// Failure, or Ignored when the attempt's context was cancelled).
//
// What the caller gets: when the guard settles on a response, even one it
// counted as a failure, RoundTrip returns that response and a nil error, so
// the caller sees the real 503; otherwise it returns the guard's error (a
// *sluice.Rejection, sluice.ErrTimeout, the transport's error). Responses
// the caller does not get are drained and closed: when a new attempt starts,
// the responses of earlier attempts are drained (up to 64 KiB, enough to
// reuse their connections) and closed, and their content kept in memory in
// case a policy settles on one after all; when the guard returns, every
// other response is drained and closed.
//
// A request is sent more than once only when it may be: it is Idempotent
// (GET, HEAD, OPTIONS, PUT, DELETE, TRACE, or an Idempotency-Key header)
// and its body can be replayed. Any other request is sent again only when
// no earlier attempt can have reached the upstream (each failed to
// connect); once one may have, a further attempt (a retry, a hedge) is
// Dropped with an error matching ErrNotReplayable that carries the previous
// attempt's response and error, so the caller gets that response. The
// error of an attempt that may not be repeated matches NotRetryable: set
// retry.Options.AbortIf to NotRetryable to return it without a backoff.
//
// Request bodies are replayed on retries: with req.GetBody when it is set
// (the first attempt sends req.Body); otherwise the body is read into memory
// once the guard admits the first attempt, up to Options.MaxReplayBody
// (default 1 MiB). A larger body is streamed to the first attempt only: any
// further attempt of that request is Dropped with an error matching
// ErrNotReplayable that carries the previous attempt's response and error,
// so the caller still gets the first response. So is an attempt whose
// GetBody fails. The request body is closed in every case,
// as http.RoundTripper requires.
//
// The returned RoundTripper is safe for concurrent use and forwards
// CloseIdleConnections to next.
func Transport(g *sluice.Guard, next http.RoundTripper, opts Options) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &guardedTransport{g: g, next: next, s: opts.settings()}
}

type guardedTransport struct {
	g    *sluice.Guard
	next http.RoundTripper
	s    settings
}

// RoundTrip runs one round trip behind the guard.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.g == nil {
		return t.next.RoundTrip(req)
	}
	rt := &roundTrip{t: t, req: req, idempotent: Idempotent(req)}
	return rt.finish(t.g.Run(req.Context(), rt.attempt))
}

// CloseIdleConnections closes next's idle connections, if next can.
func (t *guardedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// bodyKind says how a request's body is sent on each attempt.
type bodyKind uint8

const (
	noBody   bodyKind = iota // nothing to send
	getBody                  // the first attempt sends req.Body, later ones GetBody's
	buffered                 // every attempt sends a copy of data
	oneShot                  // the first attempt streams data then req.Body; no other runs
)

// roundTrip is the state of one RoundTrip call across its attempts.
type roundTrip struct {
	t          *guardedTransport
	req        *http.Request
	idempotent bool // req may be sent more than once (see Idempotent)

	bodyOnce sync.Once // runs prepareBody before the first attempt
	kind     bodyKind  // set by prepareBody
	data     []byte    // set by prepareBody: the buffered body or prefix
	bodyErr  error     // set by prepareBody: reading the body failed

	settling sync.WaitGroup // counts attempts settling superseded responses

	mu        sync.Mutex // protects the fields below
	finished  bool       // the guard returned: no attempt may start
	attempts  int        // attempts started
	bodyTaken bool       // req.Body was handed to an attempt or closed
	reached   int        // attempts that may have sent the request: running, or ended other than by a failure to connect
	last      sluice.Result
	returned  []*http.Response // responses of attempts that returned, unsettled
}

// prepareBody decides how the request body is sent on each attempt, reading
// it into memory when it has to and may.
func (rt *roundTrip) prepareBody() {
	req, limit := rt.req, rt.t.s.maxReplay
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		rt.kind = noBody
	case req.GetBody != nil:
		rt.kind = getBody
	case limit < 0 || req.ContentLength > limit:
		rt.kind = oneShot
	default:
		n := limit
		if n < math.MaxInt64 {
			n++
		}
		data, err := io.ReadAll(io.LimitReader(req.Body, n))
		switch {
		case err != nil:
			rt.bodyErr = fmt.Errorf("httpguard: reading the request body: %w", err)
		case int64(len(data)) > limit:
			rt.kind, rt.data = oneShot, data
			return
		default:
			rt.kind, rt.data = buffered, data
		}
		_ = req.Body.Close()
		rt.mu.Lock()
		rt.bodyTaken = true
		rt.mu.Unlock()
	}
}

func dropped(err error) sluice.Result {
	return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: err}}
}

// attempt is the Call the guard runs: one round trip through next.
func (rt *roundTrip) attempt(ctx context.Context) sluice.Result {
	rt.bodyOnce.Do(rt.prepareBody)
	if rt.bodyErr != nil {
		return dropped(rt.bodyErr)
	}
	rt.mu.Lock()
	if rt.finished {
		rt.mu.Unlock()
		return dropped(errLate)
	}
	if rt.attempts > 0 && rt.kind == oneShot {
		rt.mu.Unlock()
		return rt.notReplayable(errBodyTooLarge)
	}
	if rt.reached > 0 && !rt.idempotent {
		rt.mu.Unlock()
		return rt.notReplayable(errNotIdempotent)
	}
	rt.attempts++
	rt.reached++
	first := !rt.bodyTaken
	rt.bodyTaken = true
	stale := rt.returned
	rt.returned = nil
	rt.settling.Add(1)
	rt.mu.Unlock()

	for _, resp := range stale {
		settle(resp)
	}
	rt.settling.Done()

	out, link, err := rt.request(ctx, first)
	if err != nil {
		rt.unreached()
		return rt.notReplayable(err)
	}
	start := rt.t.s.clock.Nanotime()
	resp, err := rt.t.next.RoundTrip(out)
	latency := since(rt.t.s.clock, start)
	link.detach()
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		link.release()
		class := rt.t.g.Classify(ctx, err)
		if neverSent(err) {
			rt.unreached()
		} else if !rt.replayable() {
			err = final(err)
		}
		res := sluice.Result{Outcome: sluice.Outcome{Class: class, Err: err, Latency: latency}}
		rt.record(res, nil)
		return res
	}
	wrapResponseBody(resp, link)
	res := sluice.Result{Value: resp, Outcome: sluice.Outcome{Class: sluice.Success, Latency: latency}}
	if rt.t.s.isFailure(resp.StatusCode) {
		res.Class = sluice.Failure
		res.Err = newStatusError(resp, resp.StatusCode, resp.Header, rt.t.s.clock.Now())
		if !rt.replayable() {
			res.Err = final(res.Err)
		}
	}
	if !rt.record(res, resp) {
		discard(resp)
	}
	return res
}

// replayable reports whether the request may be sent again after an
// attempt that reached the upstream: it is idempotent and its body can be
// sent again.
func (rt *roundTrip) replayable() bool { return rt.idempotent && rt.kind != oneShot }

// unreached notes that an attempt ended without sending the request.
func (rt *roundTrip) unreached() {
	rt.mu.Lock()
	rt.reached--
	rt.mu.Unlock()
}

// notReplayable is the Result of an attempt that cannot send the request
// again: Dropped, with the previous attempt's response and error.
func (rt *roundTrip) notReplayable(cause error) sluice.Result {
	rt.mu.Lock()
	prev := rt.last
	rt.mu.Unlock()
	return sluice.Result{Value: prev.Value, Outcome: sluice.Outcome{
		Class: sluice.Dropped,
		Err:   &notReplayableError{cause: cause, prev: prev.Err},
	}}
}

// request builds one attempt's request. first says whether the attempt sends
// req.Body itself.
func (rt *roundTrip) request(ctx context.Context, first bool) (*http.Request, *attemptLink, error) {
	req := rt.req
	body, getBodyFn, length := req.Body, req.GetBody, req.ContentLength
	switch rt.kind {
	case getBody:
		if !first {
			b, err := req.GetBody()
			if err != nil {
				return nil, nil, fmt.Errorf("httpguard: replaying the request body: %w", err)
			}
			body = b
		}
	case buffered:
		data := rt.data
		body, length = bytesBody(data), int64(len(data))
		getBodyFn = func() (io.ReadCloser, error) { return bytesBody(data), nil }
	case oneShot:
		if len(rt.data) > 0 {
			body = readCloser{io.MultiReader(bytes.NewReader(rt.data), req.Body), req.Body}
		}
	}
	actx, link := newAttemptLink(ctx, req.Context())
	out := req.Clone(actx)
	out.Body, out.GetBody, out.ContentLength = body, getBodyFn, length
	return out, link, nil
}

// record notes an attempt's result, and its response so that it can be
// settled or discarded. It reports false when the guard already returned:
// the caller must dispose of resp itself.
func (rt *roundTrip) record(res sluice.Result, resp *http.Response) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.finished {
		return false
	}
	rt.last = res
	if resp != nil {
		rt.returned = append(rt.returned, resp)
	}
	return true
}

// finish turns the guard's result into RoundTrip's, disposing of every
// response and body the caller does not get.
func (rt *roundTrip) finish(res sluice.Result) (*http.Response, error) {
	rt.mu.Lock()
	rt.finished = true
	rt.mu.Unlock()
	rt.bodyOnce.Do(func() {}) // waits for a body being read; none is read later
	rt.settling.Wait()
	rt.mu.Lock()
	pending := rt.returned
	rt.returned = nil
	closeBody := !rt.bodyTaken && rt.req.Body != nil
	rt.bodyTaken = true
	rt.mu.Unlock()
	if closeBody {
		_ = rt.req.Body.Close()
	}

	resp, _ := res.Value.(*http.Response)
	err := res.Err
	if err != nil {
		resp = nil
		var se *StatusError
		if errors.As(err, &se) && se.Response != nil {
			resp, err = se.Response, nil
		}
	}
	for _, p := range pending {
		if p != resp {
			discard(p)
		}
	}
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errNoResponse
	}
	return resp, nil
}

// bytesBody returns a request body reading data.
func bytesBody(data []byte) io.ReadCloser {
	if len(data) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(data))
}

// readCloser joins a Reader and the Closer of what it reads.
type readCloser struct {
	io.Reader
	io.Closer
}
