package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/wstunnel"
)

// A WebSocket handshake (RFC 6455: an HTTP/1.1 GET with Upgrade:
// websocket and Connection: upgrade) is served by the goroutine engine
// (websocket_fast.go; the loops hand such a request over), on the
// plaintext and TLS listeners, and its HTTP/2 form (RFC 8441, see
// websocket_h2.go) by the HTTP/2 engine, which sends the target the same
// handshake: the rate limit applies to the handshake as to any request; the route's breaker and concurrency
// limit admit it; the handshake goes to one target (no retry, bounded by
// the route's timeout and the upstream's connect and response-header
// timeouts) and its answer comes back. The handshake carries the request's
// id (X-Request-Id: the client's when well formed, else a new one, as the
// log line names it) and, when tracing is on, the W3C trace context of
// its attempt's span (traceparent, tracestate), as an HTTP request's
// attempt does; the span ends with the handshake's answer. After a 101 the connection is
// carried both ways (internal/wstunnel) until either side closes it or it
// stays idle for server.websocket_idle_timeout; on shutdown, those still
// open at the deadline get a close frame 1001.
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

// wsCall is a WebSocket handshake on its way through its route, with the
// admissions it holds: hs, of the route's breaker, until the handshake's
// answer; slot, of its concurrency limit, until the connection closes.
type wsCall struct {
	g    *Gateway
	rt   *route
	hs   sluice.Admission
	slot sluice.Admission
}

// wsOpen admits a handshake on rt and sends it to a target: head returns
// the request head for the target at host, span its attempt's span (nil
// when tracing is off); obs records the attempt. When it returns an error, the
// handshake was refused or failed before an answer, and nothing is held.
// When the answer is not 101, it is the upstream's refusal to pass on
// (its body reads from up, which the caller closes), and nothing is held.
// After a 101, exactly one of carry and abandon must follow.
func (g *Gateway) wsOpen(rt *route, obs *observation, head func(host string, span *tracing.Attempt) []byte) (*wsCall, net.Conn, *http.Response, error) {
	bg := context.Background()
	c := &wsCall{g: g, rt: rt}
	var err error
	if c.hs, err = rt.life.wsHandshake.Begin(bg); err != nil {
		return nil, nil, nil, err
	}
	if c.slot, err = rt.life.wsSlot.Begin(bg); err != nil {
		c.hs.End(bg, errNoVerdict)
		return nil, nil, nil, err
	}
	up, resp, err := g.wsHandshake(rt, obs, head)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		verdict := err
		if err == nil && resp.StatusCode >= 500 {
			verdict = &StatusError{StatusCode: resp.StatusCode}
		}
		c.hs.End(bg, verdict)
		c.slot.End(bg, errNoVerdict)
		return nil, up, resp, err
	}
	c.hs.End(bg, nil)
	g.tunnels.begin()
	return c, up, resp, nil
}

// carry carries the WebSocket between client, which was sent the 101, and
// up until it ends, then releases its concurrency slot without a verdict.
func (c *wsCall) carry(client, up net.Conn) {
	defer c.slot.End(context.Background(), errNoVerdict)
	srv := c.g.state.Load().cfg.Server
	tun := wstunnel.New(client, up, wstunnel.Options{IdleTimeout: srv.WebSocketIdleTimeout.D(), WriteTimeout: srv.WriteTimeout.D(), Clock: c.g.clock})
	c.g.tunnels.carry(tun)
	s := tun.Run()
	c.g.tunnels.end(tun)
	c.g.log.Debug("websocket closed", "route", c.rt.name, "reason", s.Reason, "error", s.Err, "bytes_up", s.Up, "bytes_down", s.Down)
}

// abandon gives up a WebSocket whose client could not be sent the 101.
func (c *wsCall) abandon(up net.Conn) {
	_ = up.Close()
	c.g.tunnels.end(nil)
	c.slot.End(context.Background(), errNoVerdict)
}

// wsHandshake sends the client's handshake to a target of rt and reads
// its answer. It returns the connection to the target, reading first what
// the target sent after its answer's head, with the answer (its body not
// read). The route's timeout, the upstream's connect timeout and its
// response-header timeout bound it; the target's passive health learns its
// outcome, and obs records it as the request's attempt.
func (g *Gateway) wsHandshake(rt *route, obs *observation, head func(host string, span *tracing.Attempt) []byte) (net.Conn, *http.Response, error) {
	t := rt.pool.Choose(nil)
	permit := t.Permit()
	span := obs.beginAttempt(t, "")
	conn, resp, err := wsExchange(t, rt.policies.timeout, head(t.Client.Addr, span))
	if err != nil {
		ue := upstreamError(t, err)
		endAttempt(span, 0, ue)
		o, _ := attemptResult(0, nil, ue)
		permit.Done(o)
		return nil, nil, ue
	}
	endAttempt(span, resp.StatusCode, nil)
	o, _ := attemptResult(resp.StatusCode, nil, nil)
	permit.Done(o)
	return conn, resp, nil
}

// wsExchange connects to t and exchanges the handshake, whose request
// head is head; limit, when above zero, bounds it all, else t's
// response-header timeout bounds all but connecting; an answer other than
// 101 keeps that bound for its body. Zero connect and response-header
// timeouts are no bound, as for other requests. An answer with a field
// name that is not a token fails with http1.ErrBadName (a 502), as on
// every other path.
func wsExchange(t *target, limit time.Duration, head []byte) (net.Conn, *http.Response, error) {
	var deadline time.Time // zero: none
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	d := net.Dialer{Timeout: t.Connect, Deadline: deadline}
	conn, err := d.Dial("tcp", t.Client.Addr)
	if err != nil {
		return nil, nil, err
	}
	if t.Client.IsTLS {
		cfg := &tls.Config{}
		if t.Client.TLSConfig != nil {
			cfg = t.Client.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(t.Client.Addr)
		}
		cfg.NextProtos = []string{"http/1.1"} // a WebSocket upgrade is HTTP/1.1's
		conn = tls.Client(conn, cfg)
	}
	if limit <= 0 && t.Wait > 0 {
		deadline = time.Now().Add(t.Wait)
	}
	_ = conn.SetDeadline(deadline)
	br := bufio.NewReader(conn)
	_, err = conn.Write(head)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, nil)
	}
	if err == nil && !tokenNames(resp.Header) {
		resp.Body.Close()
		err = http1.ErrBadName
	}
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		_ = conn.SetDeadline(time.Time{})
	}
	// Else the deadline stays: a refusal's body, read whole (see
	// wsRefusalBody), is bounded as the head was.
	return &bufConn{Conn: conn, r: br}, resp, nil
}

// tokenNames reports whether every name in h is a token: net/http's
// reader takes "X A" as a name (fasthttp's, on every other path, is
// checked by http1.TokenNames).
func tokenNames(h http.Header) bool {
	for k := range h {
		if !http1.Token([]byte(k)) {
			return false
		}
	}
	return true
}

// wsHandshakeFrom is what a handshake's upstream request is made of.
type wsHandshakeFrom struct {
	uri, host  []byte // the request target to send (see wsTarget) and the client's Host
	headers    iter.Seq2[[]byte, []byte]
	connection []byte // the client's Connection list
	xff        []byte // the X-Forwarded-For to send
	// fwdHost and fwdProto are the X-Forwarded-Host and -Proto to send:
	// the client's Host and scheme, or a trusted proxy's own values.
	fwdHost, fwdProto []byte
	trusted           bool        // the client is a trusted proxy: its other X-Forwarded-* pass (http1.ForwardedClaim)
	id                []byte      // the request's id
	rules             *routeRules // the route's; nil when none
}

// wsRequestHead is the handshake sent to the target at host: the client's
// request line (its target f.uri) and the headers http1.Drop keeps (the Sec-WebSocket-* ones
// among them), Host naming the target (the client's with preserve_host), the
// gateway's X-Forwarded-* and X-Request-Id, the trace context of span (the
// attempt's; with tracing off, nil, and the client's passes), the route's
// rewrite and header rules, and the Upgrade and Connection of a WebSocket
// handshake. As for other requests, the route's rules replace what they
// set or remove of the gateway's headers.
func wsRequestHead(f wsHandshakeFrom, host string, span *tracing.Attempt) []byte {
	b := make([]byte, 0, 512)
	b = append(b, "GET "...)
	b = append(b, f.uri...)
	rules := f.rules
	if rules != nil && rules.preserveHost {
		host = string(f.host)
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(append(b, host...), "\r\n"...)
	tp, ts := span.Headers()
	drop := http1.Drop{Trusted: f.trusted, Connection: f.connection, Trace: tp != nil}
	for k, v := range f.headers {
		if http1.EqualName(k, "Host") || drop.Drops(k) || rules != nil && rules.request.drops(k) {
			continue
		}
		b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
	}
	b = append(append(append(b, "X-Forwarded-For: "...), f.xff...), "\r\n"...)
	b = append(append(append(b, "X-Forwarded-Host: "...), f.fwdHost...), "\r\n"...)
	b = append(append(append(b, "X-Forwarded-Proto: "...), f.fwdProto...), "\r\n"...)
	var tsb []byte
	if ts != "" {
		tsb = []byte(ts)
	}
	for _, h := range [...][2][]byte{{hdrRequestID, f.id}, {hdrTraceparent, tp}, {hdrTracestate, tsb}} {
		if h[1] != nil && (rules == nil || !rules.request.drops(h[0])) {
			b = append(append(append(append(b, h[0]...), ": "...), h[1]...), "\r\n"...)
		}
	}
	if rules != nil {
		b = rules.request.appendLines(b, false)
	}
	return append(b, "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"...)
}

// wsSwitchingHead is the 101 answer sent to the client: the target's
// end-to-end headers (Sec-WebSocket-Accept among them) as the route's
// response rules (may be nil) change them, with the Upgrade and Connection
// of a WebSocket handshake.
func wsSwitchingHead(resp *http.Response, rules *routeRules) []byte {
	b := make([]byte, 0, 256)
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\n"...)
	conn := []byte(resp.Header.Get("Connection"))
	for k, vs := range resp.Header {
		if http1.IsHop([]byte(k), conn) || rules != nil && rules.response.drops([]byte(k)) {
			continue
		}
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	if rules != nil {
		b = rules.response.appendLines(b, false)
	}
	return append(b, "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"...)
}

// wsRefusalBody reads the body of a target's answer other than 101 to a
// handshake, whole, to pass it on: false when it cannot be read, is
// longer than maxWebSocketRefusal or its status is past 599 (invalid, as
// on every other path: see http1.ErrBadStatus; the client then gets a
// 502).
func wsRefusalBody(resp *http.Response) ([]byte, bool) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWebSocketRefusal+1))
	return body, err == nil && len(body) <= maxWebSocketRefusal && resp.StatusCode <= 599
}

// bufConn is a connection whose first bytes were read into r already.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
