package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
)

// maxSharedBody is the largest response body that coalesced requests share.
// A larger one fails every waiter with 502: coalescing is for small answers
// that many clients ask for at once.
const maxSharedBody = 8 << 20

var errTooLargeToShare = errors.New("gateway: response too large to share between coalesced requests")

// sharedResponse is an upstream response read whole so that every coalesced
// request can send it. It is read-only once shared: a fasthttp header is not
// (even its Peek writes to a scratch buffer), so the end-to-end headers are
// kept as plain pairs.
type sharedResponse struct {
	status  int
	headers [][2][]byte
	body    []byte
}

// coalescingKey identifies identical requests: method, host, URI and the
// headers that commonly change an answer.
func coalescingKey(req *fasthttp.Request) string {
	b := make([]byte, 0, 128)
	b = append(b, req.Header.Method()...)
	b = append(b, ' ')
	b = append(b, req.Header.Host()...)
	b = append(b, req.Header.RequestURI()...)
	for _, h := range []string{"Authorization", "Cookie", "Accept", "Accept-Encoding"} {
		b = append(b, 0)
		b = append(b, req.Header.Peek(h)...)
	}
	return string(b)
}

// coalesced serves a GET or HEAD so that identical concurrent requests share
// one run of the route's chain. It returns the reason for the log.
func (g *Gateway) coalesced(ctx *fasthttp.RequestCtx, rt *route, x *exchange) string {
	shared, err, _ := rt.group.Do(context.Background(), coalescingKey(&ctx.Request), func(cctx context.Context) (*sharedResponse, error) {
		resp, err := sluice.Do(cctx, rt.guard, x.attempt)
		x.take(resp)
		if resp == nil {
			return nil, err
		}
		defer releaseResponse(resp)
		sr := &sharedResponse{status: resp.StatusCode()}
		conn := resp.Header.Peek("Connection")
		for k, v := range resp.Header.All() {
			if !isHop(k, conn) {
				sr.headers = append(sr.headers, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
		}
		if stream := resp.BodyStream(); stream == nil {
			sr.body = bytes.Clone(resp.Body()) // a small body, read whole
		} else {
			body, rerr := io.ReadAll(io.LimitReader(stream, maxSharedBody+1))
			if rerr != nil {
				return nil, &UpstreamError{Target: "coalesced", Err: rerr}
			}
			if len(body) > maxSharedBody {
				return nil, errTooLargeToShare
			}
			sr.body = body
		}
		return sr, err
	})
	var serr *StatusError
	if shared == nil || (err != nil && (!errors.As(err, &serr) || rt.fallback != nil)) {
		return respond(ctx, rt, nil, orUnavailable(err))
	}
	for _, kv := range shared.headers {
		ctx.Response.Header.AddBytesKV(kv[0], kv[1])
	}
	ctx.Response.Header.SetStatusCode(shared.status)
	ctx.Response.SetBodyRaw(shared.body)
	if serr != nil {
		return "upstream_status"
	}
	return ""
}

func orUnavailable(err error) error {
	if err == nil {
		return errTooLargeToShare
	}
	return err
}
