package gateway

import (
	"net"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/tracing"
)

// isWebSocket reports whether h is a WebSocket handshake: an HTTP/1.1 GET
// without a body whose Upgrade names websocket and whose Connection names
// upgrade. A request with a body is not upgraded (the handshake sent
// upstream has none): it is served as a plain request.
func isWebSocket(h *fasthttp.RequestHeader) bool {
	cl := h.ContentLength() // -2: no length and not chunked, so no body
	return h.IsGet() && h.IsHTTP11() && (cl == 0 || cl == -2) &&
		http1.HasToken(http1.OneList(h.PeekAll("Upgrade")), "websocket") &&
		http1.HasToken(http1.OneList(h.PeekAll("Connection")), "upgrade")
}

// serveWebSocket serves a WebSocket handshake on rt on the goroutine
// engine, after the rate limit let it through; xff is the X-Forwarded-For
// to send, and trusted says whether the client is a trusted proxy; obs
// records the handshake. After a 101 the connection is taken from
// fasthttp (hijacked) and carried. It returns the reason for the log (""
// when the upstream's answer was passed on).
func (g *Gateway) serveWebSocket(ctx *fasthttp.RequestCtx, rt *route, xff []byte, trusted bool, obs *observation) string {
	h := &ctx.Request.Header
	fwdHost, fwdProto := h.Host(), valueHTTP
	if overTLS(ctx.Conn()) {
		fwdProto = valueHTTPS
	}
	if trusted { // the client is a trusted proxy: its X-Forwarded-Host and -Proto stand
		if v := http1.OneList(h.PeekAll("X-Forwarded-Host")); len(v) > 0 {
			fwdHost = v
		}
		if v := http1.OneList(h.PeekAll("X-Forwarded-Proto")); len(v) > 0 {
			fwdProto = v
		}
	}
	call, up, resp, err := g.wsOpen(rt, obs, func(host string, span *tracing.Attempt) []byte {
		// The origin form, as other requests go upstream: an absolute
		// form's host would outrank Host, which chose the route.
		return wsRequestHead(wsHandshakeFrom{uri: wsTarget(ctx.Request.URI(), rt.rules), host: h.Host(), headers: h.All(),
			connection: http1.OneList(h.PeekAll("Connection")), xff: xff, fwdHost: fwdHost, fwdProto: fwdProto,
			trusted: trusted, id: obs.id, rules: rt.rules}, host, span)
	})
	if err != nil {
		return wsRefuse(ctx, err)
	}
	if call == nil {
		reason := wsPassRefusal(ctx, resp, rt.rules)
		_ = up.Close()
		return reason
	}
	head := wsSwitchingHead(resp, rt.rules)
	ctx.SetStatusCode(http.StatusSwitchingProtocols) // for the log; fasthttp writes nothing
	ctx.HijackSetNoResponse(true)
	g.hijacks.hijack(ctx, func(c net.Conn) {
		if _, err := c.Write(head); err != nil {
			call.abandon(up)
			return
		}
		call.carry(c, up)
	}, func() { call.abandon(up) })
	return ""
}

// wsRefuse answers a handshake the gateway stopped with err.
func wsRefuse(ctx *fasthttp.RequestCtx, err error) string {
	code, reason := answer.Classify(err)
	retryAfter, _ := answer.RetryAfter(err)
	writeError(ctx, code, reason, retryAfter)
	return reason
}

// wsPassRefusal passes on a target's answer other than 101 to a
// handshake: its status, end-to-end headers and body, read whole (up to
// maxWebSocketRefusal; a longer one, or a 1xx, is a 502), the route's response rules
// (may be nil) applied. It returns the reason for the log.
func wsPassRefusal(ctx *fasthttp.RequestCtx, resp *http.Response, rules *routeRules) string {
	body, ok := wsRefusalBody(resp)
	if !ok || resp.StatusCode < 200 { // a 1xx is no final answer: the client would wait for one
		writeError(ctx, http.StatusBadGateway, answer.UpstreamError, 0)
		return answer.UpstreamError
	}
	resetResponse(ctx)
	ctx.SetStatusCode(resp.StatusCode)
	conn := []byte(resp.Header.Get("Connection"))
	for k, vs := range resp.Header {
		if http1.IsHop([]byte(k), conn) || k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			ctx.Response.Header.Add(k, v)
		}
	}
	if rules != nil {
		rules.response.apply(&ctx.Response.Header)
	}
	ctx.SetBody(body)
	if resp.StatusCode >= 500 {
		return answer.UpstreamStatus
	}
	return ""
}

// wsTarget returns the request target a handshake for u goes upstream
// with: u's, its path rewritten by the route's rules (nil: none) as other
// requests' paths are (see setRewrittenPath), decoded, so that a
// strip_prefix comes off whichever encoding the client chose.
func wsTarget(u *fasthttp.URI, rules *routeRules) []byte {
	if rules == nil {
		return u.RequestURI()
	}
	var c fasthttp.URI
	u.CopyTo(&c)
	setRewrittenPath(&c, rules)
	return c.RequestURI()
}
