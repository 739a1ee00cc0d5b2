package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/wstunnel"
)

// A WebSocket handshake (RFC 6455: a GET with Upgrade: websocket and
// Connection: upgrade) is served by the goroutine engine (the loops hand
// such a request over): the rate limit applies to the handshake as to any
// request; the route's breaker and concurrency limit admit it; the
// handshake goes to one target (no retry, bounded by the route's timeout
// and the upstream's connect and response-header timeouts) and its answer
// comes back. After a 101 the connection is carried both ways
// (internal/wstunnel) until either side closes it or it stays idle for
// server.websocket_idle_timeout; on shutdown, those still open at the
// deadline get a close frame 1001.
//
// The breaker learns the handshake's outcome. The concurrency slot is held
// for the connection's lifetime and then released without a verdict: a
// WebSocket's lifetime says nothing of the upstream's latency, so it never
// feeds an adaptive limit a sample.

// maxWebSocketRefusal bounds the body of an upstream's answer other than
// 101 to a handshake, which the gateway reads whole to pass it on.
const maxWebSocketRefusal = 64 << 10

// errNoVerdict ends an admission whose call says nothing about the
// upstream (wsClassify makes it Ignored): a handshake that never ran, or a
// WebSocket connection that ended.
var errNoVerdict = errors.New("gateway: no verdict on the upstream")

// wsClassify is classify, with errNoVerdict Ignored.
func wsClassify(ctx context.Context, err error) sluice.Class {
	if errors.Is(err, errNoVerdict) {
		return sluice.Ignored
	}
	return classify(ctx, err)
}

// isWebSocket reports whether h is a WebSocket handshake: an HTTP/1.1 GET
// whose Upgrade names websocket and whose Connection names upgrade.
func isWebSocket(h *fasthttp.RequestHeader) bool {
	return h.IsGet() && h.IsHTTP11() &&
		hasToken(oneList(h.PeekAll("Upgrade")), "websocket") &&
		hasToken(oneList(h.PeekAll("Connection")), "upgrade")
}

// serveWebSocket serves a WebSocket handshake on rt, whose rate limit let
// it through; xff is the X-Forwarded-For to send. It returns the reason
// for the log ("" when the upstream's answer was passed on).
func (g *Gateway) serveWebSocket(ctx *fasthttp.RequestCtx, st *state, rt *route, xff []byte) string {
	bg := context.Background()
	handshake, slot := wsGuards(rt, g)
	hs, err := handshake.Begin(bg)
	if err != nil {
		return wsRefuse(ctx, err)
	}
	sa, err := slot.Begin(bg)
	if err != nil {
		hs.End(bg, errNoVerdict)
		return wsRefuse(ctx, err)
	}
	up, resp, err := g.wsHandshake(ctx, rt, xff)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		verdict := err
		if err == nil && resp.StatusCode >= 500 {
			verdict = &StatusError{StatusCode: resp.StatusCode}
		}
		hs.End(bg, verdict)
		sa.End(bg, errNoVerdict)
		if err != nil {
			return wsRefuse(ctx, err)
		}
		reason := wsPassRefusal(ctx, resp)
		_ = up.Close()
		return reason
	}
	hs.End(bg, nil)
	head := wsSwitchingHead(resp)
	opts := wstunnel.Options{IdleTimeout: st.cfg.Server.WebSocketIdleTimeout.D(), WriteTimeout: st.cfg.Server.WriteTimeout.D(), Clock: g.clock}
	g.tunnels.begin()
	ctx.SetStatusCode(http.StatusSwitchingProtocols) // for the log; fasthttp writes nothing
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer sa.End(bg, errNoVerdict)
		if _, err := c.Write(head); err != nil {
			_ = up.Close()
			g.tunnels.end(nil)
			return
		}
		tun := wstunnel.New(c, up, opts)
		g.tunnels.carry(tun)
		s := tun.Run()
		g.tunnels.end(tun)
		g.log.Debug("websocket closed", "route", rt.name, "reason", s.Reason, "error", s.Err, "bytes_up", s.Up, "bytes_down", s.Down)
	})
	return ""
}

// wsGuards returns the guards of a WebSocket on rt: handshake, of the
// route's breaker, which judges the handshake; slot, of its concurrency
// limit, held while the connection is open.
func wsGuards(rt *route, g *Gateway) (handshake, slot *sluice.Guard) {
	p := rt.policies
	var hp, sp []sluice.Policy
	if p.breaker != nil {
		hp = append(hp, p.breaker)
	}
	if p.bulkhead != nil {
		sp = append(sp, p.bulkhead)
	}
	if p.adaptive != nil {
		sp = append(sp, p.adaptive)
	}
	handshake = sluice.New(hp...).WithClock(g.clock).WithClassifier(wsClassify)
	slot = sluice.New(sp...).WithClock(g.clock).WithClassifier(wsClassify)
	return handshake, slot
}

// wsRefuse answers a handshake the gateway stopped with err.
func wsRefuse(ctx *fasthttp.RequestCtx, err error) string {
	code, reason := answer.Classify(err)
	retryAfter, _ := answer.RetryAfter(err)
	writeError(ctx, code, reason, retryAfter)
	return reason
}

// wsHandshake sends the client's handshake to a target of rt and reads
// its answer. It returns the connection to the target, reading first what
// the target sent after its answer's head, with the answer (its body not
// read). The route's timeout, the upstream's connect timeout and its
// response-header timeout bound it; the target's passive health learns its
// outcome.
func (g *Gateway) wsHandshake(ctx *fasthttp.RequestCtx, rt *route, xff []byte) (net.Conn, *http.Response, error) {
	t := rt.pool.choose(nil)
	var permit sluice.Permit
	if t.passive != nil {
		if p, err := t.passive.Acquire(context.Background()); err == nil {
			permit = p
		}
	}
	conn, resp, err := wsExchange(ctx, t, rt.policies.timeout, xff)
	if err != nil {
		ue := upstreamError(t, err)
		permit.Done(sluice.Outcome{Class: classify(context.Background(), ue), Err: ue})
		return nil, nil, ue
	}
	if resp.StatusCode >= 500 {
		permit.Done(sluice.Outcome{Class: sluice.Failure, Err: &StatusError{StatusCode: resp.StatusCode}})
	} else {
		permit.Done(sluice.Outcome{Class: sluice.Success})
	}
	return conn, resp, nil
}

// wsExchange connects to t and exchanges the handshake; limit, when above
// zero, bounds it all.
func wsExchange(ctx *fasthttp.RequestCtx, t *target, limit time.Duration, xff []byte) (net.Conn, *http.Response, error) {
	deadline := time.Now().Add(t.connect + t.wait)
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	d := net.Dialer{Timeout: t.connect, Deadline: deadline}
	conn, err := d.Dial("tcp", t.client.Addr)
	if err != nil {
		return nil, nil, err
	}
	if t.client.IsTLS {
		cfg := &tls.Config{}
		if t.client.TLSConfig != nil {
			cfg = t.client.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(t.client.Addr)
		}
		cfg.NextProtos = []string{"http/1.1"} // a WebSocket upgrade is HTTP/1.1's
		conn = tls.Client(conn, cfg)
	}
	if limit <= 0 {
		deadline = time.Now().Add(t.wait)
	}
	_ = conn.SetDeadline(deadline)
	br := bufio.NewReader(conn)
	_, err = conn.Write(wsRequestHead(&ctx.Request.Header, t.client.Addr, xff))
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: br}, resp, nil
}

// wsRequestHead is the handshake sent to the target at host: the client's
// request line and end-to-end headers (the Sec-WebSocket-* ones among
// them), Host naming the target, the gateway's X-Forwarded-*, and the
// Upgrade and Connection of a WebSocket handshake.
func wsRequestHead(h *fasthttp.RequestHeader, host string, xff []byte) []byte {
	b := make([]byte, 0, 512)
	b = append(append(append(b, "GET "...), h.RequestURI()...), " HTTP/1.1\r\nHost: "...)
	b = append(append(b, host...), "\r\n"...)
	conn := oneList(h.PeekAll("Connection"))
	for k, v := range h.All() {
		if equalName(k, "Host") || forwardedHeader(k) || isHop(k, conn) {
			continue
		}
		b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
	}
	b = append(append(append(b, "X-Forwarded-For: "...), xff...), "\r\n"...)
	b = append(append(append(b, "X-Forwarded-Host: "...), h.Host()...), "\r\n"...)
	return append(b, "X-Forwarded-Proto: http\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"...)
}

// wsSwitchingHead is the 101 answer sent to the client: the target's
// end-to-end headers (Sec-WebSocket-Accept among them) with the Upgrade
// and Connection of a WebSocket handshake.
func wsSwitchingHead(resp *http.Response) []byte {
	b := make([]byte, 0, 256)
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\n"...)
	conn := []byte(resp.Header.Get("Connection"))
	for k, vs := range resp.Header {
		if isHop([]byte(k), conn) {
			continue
		}
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	return append(b, "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"...)
}

// wsPassRefusal passes on a target's answer other than 101 to a
// handshake: its status, end-to-end headers and body, read whole (up to
// maxWebSocketRefusal; a longer one is a 502). It returns the reason for
// the log.
func wsPassRefusal(ctx *fasthttp.RequestCtx, resp *http.Response) string {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWebSocketRefusal+1))
	if err != nil || len(body) > maxWebSocketRefusal {
		writeError(ctx, http.StatusBadGateway, answer.UpstreamError, 0)
		return answer.UpstreamError
	}
	resetResponse(ctx)
	ctx.SetStatusCode(resp.StatusCode)
	conn := []byte(resp.Header.Get("Connection"))
	for k, vs := range resp.Header {
		if isHop([]byte(k), conn) || k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			ctx.Response.Header.Add(k, v)
		}
	}
	ctx.SetBody(body)
	if resp.StatusCode >= 500 {
		return answer.UpstreamStatus
	}
	return ""
}

// bufConn is a connection whose first bytes were read into r already.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
