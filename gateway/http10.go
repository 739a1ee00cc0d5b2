package gateway

import (
	"io"
	"net"
	"time"

	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/valyala/fasthttp"
)

// sendUntilClose sends ctx's response, whose body streams from a target
// with no length, to an HTTP/1.0 client on the goroutine engine. Such a
// client cannot read chunked encoding, which fasthttp would use (RFC 9112
// section 6.1 forbids sending it one): the body goes as it comes instead,
// and the connection's close ends it, as from nginx. The connection is
// taken from fasthttp (hijacked) to do so; d is server.write_timeout.
// It does nothing when the body is not one of the gateway's.
func (g *Gateway) sendUntilClose(ctx *fasthttp.RequestCtx, d time.Duration) {
	body := ctx.Response.BodyStream()
	if !hold(body, true) {
		return
	}
	var h fasthttp.ResponseHeader
	ctx.Response.Header.CopyTo(&h)
	h.SetContentLength(-2) // no length: the close ends the body
	h.Del(fasthttp.HeaderTransferEncoding)
	h.SetConnectionClose()
	head := h.Header()
	ctx.HijackSetNoResponse(true)
	end := func() {
		hold(body, false)
		_ = body.(io.Closer).Close()
	}
	g.hijacks.hijack(ctx, func(c net.Conn) {
		defer end()
		if d > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(d))
			paceClient(body, c, d)
		}
		if _, err := c.Write(head); err == nil {
			_, _ = io.Copy(c, body)
		}
	}, end)
}

// hold sets whether body, a response body of the gateway's, outlives its
// response (its Close does nothing while held), and reports whether body
// is one.
func hold(body io.Reader, held bool) bool {
	switch b := body.(type) {
	case *upstream.ConnBody:
		b.Hold(held)
	case *upstreamBody:
		b.held = held
	default:
		return false
	}
	return true
}
