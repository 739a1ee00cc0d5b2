package gateway

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/tracing"
)

// WebSocket over HTTP/2 (RFC 8441): a CONNECT request whose :protocol is
// websocket, on a stream of an HTTP/2 connection, is the handshake, and
// the stream then carries the WebSocket's frames both ways. Go's HTTP/2
// server accepts such a request only when the process runs with
// GODEBUG=http2xconnect=1 in its environment (it then announces
// SETTINGS_ENABLE_CONNECT_PROTOCOL); without, it resets the stream, and
// clients use HTTP/1.1 for WebSockets. The gateway sends the handshake to
// the target as an HTTP/1.1 one (a GET with Upgrade: websocket, a
// Sec-WebSocket-Key of its own, whose Sec-WebSocket-Accept it checks) and
// answers the client's CONNECT with a 200, through the same steps as an
// HTTP/1.1 handshake (see websocket.go): the route chosen as for that GET,
// the rate limit at the handshake, the breaker and the concurrency slot
// held for the connection's lifetime without a latency sample, the
// request id and trace context, server.websocket_idle_timeout, and a
// close frame 1001 at shutdown.

// isH2WebSocket reports whether r is the handshake of a WebSocket over
// HTTP/2: an extended CONNECT whose :protocol is websocket.
func isH2WebSocket(r *http.Request) bool {
	return r.ProtoMajor == 2 && r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
}

// asHandshakeGET makes req, the fasthttp form of an extended CONNECT, the
// GET of the HTTP/1.1 handshake it stands for, as routing, rate-limit keys
// and the log read it: no :protocol header, no body, and the gateway's own
// Sec-WebSocket-Key (a client over HTTP/2 sends none), which it returns.
func asHandshakeGET(req *fasthttp.Request) string {
	h := &req.Header
	h.SetMethod(http.MethodGet)
	h.Del(":protocol")
	req.SetBodyStream(nil, -2) // none: no length, not chunked
	var key [16]byte
	_, _ = rand.Read(key[:]) // never fails (crypto/rand)
	k := base64.StdEncoding.EncodeToString(key[:])
	h.Set("Sec-WebSocket-Key", k)
	return k
}

// wsAccept is the Sec-WebSocket-Accept that answers key (RFC 6455 section
// 4.2.2).
func wsAccept(key string) string {
	s := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(s[:])
}

// serveH2WebSocket serves r, a WebSocket handshake over HTTP/2 (see
// isH2WebSocket), whose fasthttp form ctx holds, and carries the
// WebSocket until it ends. It reports whether it served r: one that
// matches no route, or that the routes cannot tell, is left to the
// handler (404, 400), as the GET it stands for.
func (g *Gateway) serveH2WebSocket(ctx *fasthttp.RequestCtx, w http.ResponseWriter, r *http.Request) bool {
	start := time.Now()
	key := asHandshakeGET(&ctx.Request)
	st, rt, o := g.beginStd(ctx)
	if rt == nil {
		return false
	}
	sw := &statusWriter{ResponseWriter: w}
	k := connKey{remote: r.RemoteAddr, tls: r.TLS != nil}
	if !g.tunnels.admit(k, st.cfg.Server.HTTP2.MaxWebSocketsPerConnection) {
		reason := writeStdError(sw, errTooManyWebSockets)
		ctx.Response.SetStatusCode(sw.status())
		g.finish(ctx, rt, start, reason, o)
		return true
	}
	defer g.tunnels.leave(k)
	call, up, reason := g.h2Handshake(ctx, sw, r, st, rt, o, key)
	ctx.Response.SetStatusCode(sw.status())
	g.finish(ctx, rt, start, reason, o)
	if call != nil {
		c := &h2StreamConn{body: r.Body, w: w, rc: http.NewResponseController(w), remote: ctx.RemoteAddr()}
		call.carry(c, up)
		c.finish()
	}
	return true
}

// h2Handshake takes the handshake through rt's rate limit and admission
// to a target, and answers the client: a 200 when the target accepted it
// (then the call and the connection to the target are returned, to be
// carried), else the gateway's refusal or the target's. It returns the
// reason for the log.
func (g *Gateway) h2Handshake(ctx *fasthttp.RequestCtx, w http.ResponseWriter, r *http.Request, st *state, rt *route, o *observation, key string) (*wsCall, net.Conn, string) {
	// The stream's reads are the WebSocket's, bounded by its idle
	// timeout, not by server.read_timeout, which runs from the request's
	// start: once it passes, net/http's HTTP/2 server closes the request's
	// body, however long ago the handshake was answered.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	xff, err := stdLimit(w, r, st, rt)
	if err != nil {
		return nil, nil, writeStdError(w, err)
	}
	fwdHost, fwdProto := stdForwarded(r, st)
	h := &ctx.Request.Header
	call, up, resp, err := g.wsOpen(rt, o, func(host string, span *tracing.Attempt) []byte {
		return wsRequestHead(wsHandshakeFrom{uri: wsTarget(ctx.Request.URI(), rt.rules), host: h.Host(), headers: h.All(),
			xff: xff, fwdHost: []byte(fwdHost), fwdProto: []byte(fwdProto), trusted: st.trusted.contains(stdPeer(r)),
			id: o.id, rules: rt.rules}, host, span)
	})
	if err != nil {
		return nil, nil, writeStdError(w, err)
	}
	if call == nil {
		defer up.Close()
		return nil, nil, h2PassRefusal(w, resp, rt.rules)
	}
	if resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		// No WebSocket server's answer (RFC 6455 section 4.1).
		call.abandon(up)
		return nil, nil, writeStdError(w, errBadAccept)
	}
	wh := w.Header()
	conn := []byte(resp.Header.Get("Connection"))
	for k, vs := range resp.Header {
		// The HTTP/2 client is answered a 200 (RFC 8441 section 5), with
		// no Sec-WebSocket-Accept: that was the gateway's.
		if http1.IsHop([]byte(k), conn) || k == "Sec-Websocket-Accept" || k == "Content-Length" {
			continue
		}
		wh[k] = append(wh[k], vs...)
	}
	if rt.rules != nil {
		rt.rules.response.apply(wh)
	}
	w.WriteHeader(http.StatusOK)
	if err := http.NewResponseController(w).Flush(); err != nil {
		call.abandon(up)
		return nil, nil, answer.ClientClosed
	}
	return call, up, ""
}

// errTooManyWebSockets is the error of a WebSocket handshake over HTTP/2
// on a connection that carries server.http2.max_websockets_per_connection
// already: a 429.
var errTooManyWebSockets = &answerError{msg: "gateway: too many WebSockets on this connection",
	code: http.StatusTooManyRequests, reason: "websocket_limit"}

// errBadAccept is the error of a target that accepted a handshake with a
// Sec-WebSocket-Accept that does not answer its key: a 502.
var errBadAccept = &answerError{msg: "gateway: the target's Sec-WebSocket-Accept does not answer the handshake's key",
	code: http.StatusBadGateway, reason: answer.UpstreamError}

// h2PassRefusal passes on a target's answer other than 101 to a handshake
// over HTTP/2, as wsPassRefusal does on HTTP/1.1, but for a 1xx or 2xx
// one (a 502): to an HTTP/2 client a 2xx says the WebSocket is open
// (RFC 8441 section 5), and net/http answers 200 to a handler that
// wrote only a 1xx. It returns the reason for the log.
func h2PassRefusal(w http.ResponseWriter, resp *http.Response, rules *routeRules) string {
	body, ok := wsRefusalBody(resp)
	if !ok || resp.StatusCode < 300 {
		return writeStdError(w, errBadRefusal)
	}
	wh := w.Header()
	copyEndToEnd(wh, resp.Header)
	if rules != nil {
		rules.response.apply(wh)
	}
	wh.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	if resp.StatusCode >= 500 {
		return answer.UpstreamStatus
	}
	return ""
}

// errBadRefusal is the error of a target's refusal of a handshake that
// could not be read whole (see wsRefusalBody), or that an HTTP/2 client
// would read as an acceptance (a 1xx or 2xx): a 502.
var errBadRefusal = &answerError{msg: "gateway: the target's answer to a WebSocket handshake could not be passed on",
	code: http.StatusBadGateway, reason: answer.UpstreamError}

// h2StreamConn is the client's side of a WebSocket over HTTP/2, as the
// tunnel sees it: reads are the request's body, writes the response's,
// each flushed. Close ends the reads (the stream ends when the handler
// returns); finish, called before the handler returns, makes every later
// call a no-op, as net/http forbids using w after that: GoAway may still
// come from Shutdown then.
//
// A write deadline bounds the writes only: net/http's HTTP/2 server
// resets a stream whose write deadline passes even with nothing to
// write, which would end a WebSocket quiet for server.write_timeout. So
// the deadline is set on the stream for each write and lifted after it,
// and a deadline set during a write bounds that write at once: a write
// sets the stream's deadline again until it is the latest one set, so
// that an older deadline it read before never replaces a sooner one set
// meanwhile (a tunnel's GoAway, which would otherwise wait for the write
// as long as server.write_timeout).
type h2StreamConn struct {
	body   io.ReadCloser
	w      http.ResponseWriter
	rc     *http.ResponseController
	remote net.Addr
	// mu is held (read) by the calls on w and rc, (written) by finish.
	mu       sync.RWMutex
	done     bool
	deadline atomic.Int64 // the write deadline, UnixNano; 0: none
	writing  atomic.Bool  // a write is in progress
}

func (c *h2StreamConn) Read(p []byte) (int, error) { return c.body.Read(p) }

func (c *h2StreamConn) Write(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.done {
		return 0, net.ErrClosed
	}
	c.writing.Store(true)
	set := c.applyDeadline()
	n, err := c.w.Write(p)
	if err == nil {
		err = c.rc.Flush()
	}
	c.writing.Store(false)
	if set != 0 || c.deadline.Load() != 0 {
		_ = c.rc.SetWriteDeadline(time.Time{})
	}
	return n, err
}

// applyDeadline sets c.deadline on the stream, again as long as it
// changed while it was being set, and returns the one set last (0: none
// was). A SetWriteDeadline that stores after applyDeadline's last load
// sees c.writing and sets its own.
func (c *h2StreamConn) applyDeadline() int64 {
	var set int64
	for {
		dl := c.deadline.Load()
		if dl == set {
			return set
		}
		_ = c.rc.SetWriteDeadline(unixNano(dl))
		set = dl
	}
}

// unixNano is the time of ns nanoseconds since the Unix epoch; the zero
// time for 0.
func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func (c *h2StreamConn) Close() error { return c.body.Close() }

// finish ends the use of w: the handler is about to return.
func (c *h2StreamConn) finish() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
}

func (c *h2StreamConn) LocalAddr() net.Addr  { return h2cAddr{} }
func (c *h2StreamConn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the write deadline only (see SetReadDeadline).
func (c *h2StreamConn) SetDeadline(t time.Time) error { return c.SetWriteDeadline(t) }

// SetReadDeadline does nothing: the tunnel bounds reads by its idle
// timeout, and Close ends them.
func (c *h2StreamConn) SetReadDeadline(time.Time) error { return nil }

func (c *h2StreamConn) SetWriteDeadline(t time.Time) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.done {
		return net.ErrClosed
	}
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.deadline.Store(ns)
	if c.writing.Load() {
		return c.rc.SetWriteDeadline(t)
	}
	return nil
}

// WebSocketOverHTTP2 reports whether this process serves WebSocket over
// HTTP/2: whether its GODEBUG environment names http2xconnect=1, read
// the way Go's HTTP/2 server reads it once at start.
func WebSocketOverHTTP2() bool {
	return strings.Contains(os.Getenv("GODEBUG"), "http2xconnect=1")
}
