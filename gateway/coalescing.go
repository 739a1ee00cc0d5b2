package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
)

// maxSharedBody is the largest response body that coalesced requests share.
// An answer whose Content-Length is larger is not shared: the first
// request sends it itself, streamed, and the requests that joined its call
// each make their own, as for a private answer; so is an event stream
// (text/event-stream, of no length). Another body of unknown length found
// larger fails every waiter with 502: coalescing is for small answers that
// many clients ask for at once.
const maxSharedBody = 8 << 20

var errTooLargeToShare = &answerError{msg: "gateway: response too large to share between coalesced requests",
	code: 502, reason: answer.UpstreamError}

// coalesced serves a GET or HEAD without a body so that identical concurrent
// requests (see coalescingKey; limitKey is the request's rate-limit key)
// share one run of the route's chain. It returns the reason for the log.
//
// The first request's answer goes to the requests that joined its call
// unless sharedResponse.sharesWith refuses it: the answer is private
// (Set-Cookie, Cache-Control private or no-store, Vary: * or X-Forwarded-*),
// its Content-Length is past maxSharedBody, it is an event stream, or it
// varies by a header in which they differ. Each of those then runs the
// chain itself, once, as if it had not coalesced: a refused answer costs
// one upstream call per request that was waiting for it, never more, and
// requests that arrive later start a call of their own. The first request
// sends a private answer as it would without coalescing, streamed and of
// any size.
func (g *Gateway) coalesced(ctx *fasthttp.RequestCtx, rt *route, x *exchange, limitKey string) string {
	var (
		led bool               // this request's function ran: it made the call
		own *fasthttp.Response // the private answer, when led
	)
	key := coalescingKey(&ctx.Request.Header, limitKey, rt.cfg.Policies.CoalesceVary)
	shared, err, _ := rt.life.group.Do(context.Background(), key, func(context.Context) (*sharedResponse, error) {
		led = true
		resp, err := x.run()
		x.take(resp)
		if resp == nil {
			return nil, err
		}
		sr, rerr := share(resp, &ctx.Request.Header)
		if sr != nil && sr.private {
			own = resp
			return sr, err
		}
		releaseResponse(resp)
		if rerr != nil {
			return nil, rerr
		}
		return sr, err
	})
	switch {
	case own != nil:
		return respond(ctx, rt, own, err)
	case !led && shared != nil && !shared.sharesWith(&ctx.Request.Header):
		resp, err := x.run()
		x.take(resp)
		return respond(ctx, rt, resp, err)
	}
	x.obs.coalesced = !led // answered by another request's call
	var serr *StatusError
	if shared == nil || (err != nil && (!errors.As(err, &serr) || rt.life.fallback != nil)) {
		return respond(ctx, rt, nil, orUnavailable(err))
	}
	for _, kv := range shared.headers {
		ctx.Response.Header.AddBytesKV(kv[0], kv[1])
	}
	if rt.rules != nil {
		kept := keepRateLimit(&ctx.Response.Header) // the limit's own: they stand
		rt.rules.response.apply(&ctx.Response.Header)
		kept.restore(&ctx.Response.Header)
	}
	ctx.Response.Header.SetStatusCode(shared.status)
	ctx.Response.SetBodyRaw(shared.body)
	if serr != nil {
		return "upstream_status"
	}
	return ""
}

// share reads resp, the answer to req, into a sharedResponse. A private
// answer, one too long to share by its Content-Length, or an event stream
// (see eventStream), comes back with
// only private set, its body unread, for the first request to send itself.
func share(resp *fasthttp.Response, req *fasthttp.RequestHeader) (*sharedResponse, error) {
	sr := &sharedResponse{status: resp.StatusCode()}
	conn := resp.Header.Peek("Connection")
	for k, v := range resp.Header.All() {
		if !http1.IsHop(k, conn) {
			sr.note(k, v)
			sr.headers = append(sr.headers, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
	}
	if sr.private || (resp.BodyStream() != nil && (resp.Header.ContentLength() > maxSharedBody || eventStream(resp))) {
		return &sharedResponse{private: true}, nil
	}
	sr.keepVaried(req)
	if stream := resp.BodyStream(); stream == nil {
		sr.body = bytes.Clone(resp.Body()) // a small body, read whole
	} else {
		body, err := io.ReadAll(io.LimitReader(stream, maxSharedBody+1))
		if err != nil {
			return nil, &UpstreamError{Target: "coalesced", Err: err}
		}
		if len(body) > maxSharedBody {
			return nil, errTooLargeToShare
		}
		sr.body = body
	}
	return sr, nil
}

// eventStream reports whether resp is an event stream of no length
// (text/event-stream): it has no end for coalesced requests to wait for.
func eventStream(resp *fasthttp.Response) bool {
	mt, _, _ := bytes.Cut(resp.Header.ContentType(), []byte(";"))
	return resp.Header.ContentLength() < 0 && bytes.EqualFold(bytes.TrimSpace(mt), []byte("text/event-stream"))
}

func orUnavailable(err error) error {
	if err == nil {
		return errTooLargeToShare
	}
	return err
}
