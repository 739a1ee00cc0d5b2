//go:build linux

package gateway

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// loopBody is the largest request body the loops take: a larger one, or
// one of unknown length, goes to the goroutine engine, which streams it.
const loopBody = 64 << 10

// maxPendingIn is how many bytes of further requests a client may send
// while its request is upstream (pipelining) before its loop closes it.
const maxPendingIn = 1 << 20

// maxPendingOut is how many response bytes a client may leave unread
// before its loop stops reading its next request.
const maxPendingOut = 256 << 10

// connState is where a client connection on a loop is.
type connState uint8

const (
	stateIdle      connState = iota // waiting for a request, or reading one
	stateBusy                       // a request is upstream
	stateStreaming                  // a response waits to stream from a goroutine
	stateGone                       // handed over or closed
)

// clientConn is a client connection served on an event loop: one request
// at a time; pipelined requests wait in the loop's buffer.
type clientConn struct {
	c     gnet.Conn
	l     *loop
	ctx   fasthttp.RequestCtx
	state connState
	gen   uint64 // counts requests, so that a late timer finds its own
	gone  bool   // the client closed while its request was upstream

	// The request in flight.
	rt             *route
	x              *exchange
	adm            sluice.Admission
	start          time.Time
	rl             []byte // the RateLimit header value
	t              *target
	passive        sluice.Permit
	up             *upConn
	replayed       bool // sent again after a stale upstream connection
	wantClose      bool // the client asked to close after the response
	timer          clock.Timer
	stream         net.Conn // the upstream connection a streamed response comes from
	streamTarget   *target
	streamReuse    bool      // the stream ended cleanly on a keep-alive connection
	streamDeadline time.Time // ends a streamed response when the route has a timeout

	// deadline is when an idle connection, or one whose request is still
	// arriving, is closed; zero while the request is upstream. The wake
	// timer, due at wakeAt, brings the loop back to check it.
	deadline  time.Time
	reading   bool      // part of a request has arrived
	readStart time.Time // when it began to
	wake      *time.Timer
	wakeAt    time.Time
	woken     atomic.Bool   // set by the wake timer
	closeNext bool          // close once the response is sent
	pollDelay time.Duration // see poll
}

// open starts serving c on its loop.
func (cc *clientConn) open(e *loopEngine, c gnet.Conn) {
	cc.c, cc.l = c, e.loopOf(c)
	cc.ctx.Init2(connAddrs{c}, fasthttpLogger{e.g.log}, false)
	e.conns.Add(1)
	cc.l.conns[cc] = struct{}{}
	idle := e.g.state.Load().cfg.Server.IdleTimeout.D()
	now := time.Now()
	cc.deadline, cc.wakeAt = now.Add(idle), now.Add(idle)
	cc.wake = time.AfterFunc(idle, func() {
		cc.woken.Store(true)
		_ = c.Wake(nil)
	})
}

// closed is the connection's end, or the loop's part of it after a
// hand-over.
func (cc *clientConn) closed() {
	cc.wake.Stop()
	cc.l.e.conns.Add(-1)
	delete(cc.l.conns, cc)
	if cc.state == stateBusy {
		cc.gone = true // the upstream's answer is dropped when it comes
	}
}

// serve handles what is ready on the connection: the next request when it
// has arrived whole, else nothing until more comes.
func (cc *clientConn) serve() gnet.Action {
	c, e := cc.c, cc.l.e
	if cc.woken.Swap(false) {
		if a, done := cc.checkDeadline(); done {
			return a
		}
	}
	for {
		switch cc.state {
		case stateBusy:
			if c.InboundBuffered() > maxPendingIn {
				return gnet.Close // a client that floods requests
			}
			return gnet.None // the next request waits in the buffer
		case stateStreaming:
			return cc.streamOut()
		case stateGone:
			return gnet.Close
		}
		if cc.closeNext || c.OutboundBuffered() > maxPendingOut {
			if c.OutboundBuffered() > 0 {
				cc.poll() // the client has not read its responses yet
				return gnet.None
			}
			if cc.closeNext {
				return gnet.Close
			}
		}
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			if e.draining.Load() {
				return gnet.Close
			}
			return gnet.None
		}
		st := e.g.state.Load()
		srv := &st.cfg.Server
		now := time.Now()
		if !cc.reading {
			cc.reading, cc.readStart = true, now
			cc.setDeadline(now.Add(srv.ReadHeaderTimeout.D()))
		}
		hlen := bytes.Index(buf, crlf2) + 4
		if hlen < 4 {
			if len(buf) > srv.MaxHeaderBytes || bytes.Contains(buf, lf2) {
				return cc.handOver() // fasthttp answers 431, or parses bare line feeds
			}
			return gnet.None
		}
		req := &cc.ctx.Request
		req.Reset()
		if hlen > srv.MaxHeaderBytes || req.Header.Read(cc.l.reader(buf[:hlen])) != nil {
			return cc.handOver()
		}
		cl := req.Header.ContentLength()
		if cl == -2 {
			cl = 0 // a request without Content-Length or Transfer-Encoding has no body
		}
		rt := st.route(req)
		if !loopRequest(req, cl, srv.MaxBodyBytes) || (rt != nil && !rt.loop) {
			return cc.handOver()
		}
		if len(buf) < hlen+cl {
			cc.setDeadline(cc.readStart.Add(srv.ReadTimeout.D()))
			return gnet.None
		}
		if cl > 0 {
			req.SetBody(buf[hlen : hlen+cl])
		}
		_, _ = c.Discard(hlen + cl)
		cc.reading = false
		cc.begin(st, rt, now)
	}
}

var (
	crlf2 = []byte("\r\n\r\n")
	lf2   = []byte("\n\n")
)

// loopRequest reports whether a loop can take req, whose body is cl bytes.
func loopRequest(req *fasthttp.Request, cl, maxBody int) bool {
	h := &req.Header
	return cl >= 0 && cl <= loopBody && (maxBody == 0 || cl <= maxBody) &&
		h.IsHTTP11() && len(h.Peek("Expect")) == 0 && len(h.Peek("Upgrade")) == 0
}

// checkDeadline closes the connection when its deadline has passed, and
// sets the wake timer again otherwise.
func (cc *clientConn) checkDeadline() (gnet.Action, bool) {
	now := time.Now()
	if cc.state == stateIdle && !cc.deadline.IsZero() && !now.Before(cc.deadline) {
		return gnet.Close, true
	}
	next := cc.deadline
	if cc.state != stateIdle || next.IsZero() {
		next = now.Add(cc.l.e.g.state.Load().cfg.Server.IdleTimeout.D())
	}
	cc.wakeAt = next
	cc.wake.Reset(next.Sub(now))
	return gnet.None, false
}

// setDeadline sets when the connection closes unless its request is in,
// bringing the wake timer forward when it is due later.
func (cc *clientConn) setDeadline(d time.Time) {
	cc.deadline = d
	if d.Before(cc.wakeAt) {
		cc.wakeAt = d
		cc.wake.Reset(time.Until(d))
	}
}

// poll comes back to the connection shortly, to see whether the client has
// read what was sent to it: after 1 ms, then twice as long each time, up
// to 50 ms, until a response goes out.
func (cc *clientConn) poll() {
	c := cc.c
	cc.pollDelay = min(max(2*cc.pollDelay, time.Millisecond), 50*time.Millisecond)
	time.AfterFunc(cc.pollDelay, func() { _ = c.Wake(nil) })
}

// leave takes the connection out of its loop (see detach) once the client
// has read every response sent to it; until then it returns nil, nil and
// comes back to the connection later. The caller returns gnet.Close unless
// it got nil, nil.
func (cc *clientConn) leave() (net.Conn, error) {
	if cc.c.OutboundBuffered() > 0 {
		cc.poll()
		return nil, nil
	}
	cc.state = stateGone
	return detach(cc.c)
}

// handOver gives the connection to the goroutine engine with the bytes of
// its next request, once the client has read every response sent to it.
func (cc *clientConn) handOver() gnet.Action {
	nc, err := cc.leave()
	if nc == nil && err == nil {
		return gnet.None
	}
	if err != nil {
		cc.l.e.g.log.Warn("handing a connection over", "error", err)
		return gnet.Close
	}
	cc.l.e.handovers.Add(1)
	cc.l.e.handoff.deliver(nc)
	return gnet.Close
}

// begin runs the route's admission policies on the request and sends it
// upstream, or answers at once when a policy refuses it.
func (cc *clientConn) begin(st *state, rt *route, now time.Time) {
	ctx, g := &cc.ctx, cc.l.e.g
	cc.start = now
	cc.gen++
	if rt == nil {
		writeError(ctx, fasthttp.StatusNotFound, "no_route", 0)
		g.finish(ctx, nil, now, "no_route")
		cc.reply()
		return
	}
	rt.inflight.Add(1)
	cc.rt = rt
	cc.wantClose = ctx.Request.Header.ConnectionClose()
	client := clientIP(ctx, st.trusted)
	x := g.newExchange(rt, &ctx.Request)
	cc.x = x
	if rt.limit != nil {
		v, ok := g.limitRate(ctx, rt, client, x.rl[:0])
		if !ok {
			cc.end(string(sluice.RateLimited))
			cc.reply()
			return
		}
		cc.rl = v
	}
	x.xff = forwardedFor(x.xff[:0], ctx, st.trusted)
	x.direct = &ctx.Response
	adm, err := rt.admit.Begin(context.Background())
	if err != nil {
		cc.respond(nil, err)
		return
	}
	cc.adm = adm
	cc.state = stateBusy
	cc.deadline = time.Time{}
	if d := rt.policies.timeout; d > 0 {
		gen, l := cc.gen, cc.l
		cc.timer = rt.clock.AfterFunc(d, func() { l.e.execute(l, func() { cc.timeout(gen) }) })
	}
	cc.send()
}

// send sends the request to a target over an idle connection of the loop,
// or a new one.
func (cc *clientConn) send() {
	t := cc.t
	if t == nil {
		t = cc.rt.pool.choose(nil)
		cc.t = t
		if t.passive != nil {
			if p, err := t.passive.Acquire(context.Background()); err == nil {
				cc.passive = p
			}
		}
		cc.x.prepare(t)
		t.inflight.Add(1)
	}
	if up := cc.l.takeIdle(t); up != nil {
		up.attach(cc)
		return
	}
	dial(cc, t)
}

// timeout ends request gen with a timeout if it is still upstream.
func (cc *clientConn) timeout(gen uint64) {
	if cc.gen != gen || cc.state != stateBusy {
		return
	}
	cc.timer = nil
	if up := cc.up; up != nil {
		up.abandon()
	}
	cc.upstreamDone(nil, upstreamError(cc.t, fasthttp.ErrTimeout))
}

// upstreamDone ends the attempt: resp is the upstream's response in the
// client's (its body read whole or streaming), or nil with err, an
// *UpstreamError.
func (cc *clientConn) upstreamDone(resp *fasthttp.Response, err error) {
	cc.t.inflight.Add(-1)
	o, err := attemptResult(resp, err)
	cc.passive.Done(o)
	cc.passive = sluice.Permit{}
	if cc.timer != nil {
		cc.timer.Stop()
		cc.timer = nil
	}
	cc.adm.End(context.Background(), err)
	cc.respond(resp, err)
}

// respond answers the request with the upstream's response, the route's
// fallback or an error, as the goroutine engine does.
func (cc *clientConn) respond(resp *fasthttp.Response, err error) {
	ctx, rt := &cc.ctx, cc.rt
	if rt.limit != nil {
		rt.limit.setHeaders(&ctx.Response.Header, cc.rl)
	}
	reason := respond(ctx, rt, resp, err)
	if ctx.Response.IsBodyStream() {
		cc.end(reason)
		cc.state = stateStreaming
		if !cc.gone {
			_ = cc.c.Wake(nil) // streamOut runs in the client's own event
		}
		return
	}
	if cc.stream != nil {
		_ = cc.stream.Close() // a fallback or an error replaced the stream
		cc.stream = nil
	}
	cc.end(reason)
	cc.reply()
}

// end records the request and frees what it held.
func (cc *clientConn) end(reason string) {
	g := cc.l.e.g
	cc.rt.inflight.Add(-1)
	g.finish(&cc.ctx, cc.rt, cc.start, reason)
	g.exchanges.Put(cc.x.reset())
	cc.rt, cc.x, cc.t, cc.rl, cc.replayed = nil, nil, nil, nil, false
}

// reply sends the response in cc.ctx and makes the connection ready for
// the next request.
func (cc *clientConn) reply() {
	ctx, c := &cc.ctx, cc.c
	if cc.wantClose || cc.l.e.draining.Load() {
		ctx.Response.SetConnectionClose()
		cc.closeNext = true
	}
	if ctx.IsHead() {
		ctx.Response.SkipBody = true
	}
	if !cc.gone {
		w := cc.l.writer()
		if ctx.Response.Write(w) != nil || cc.l.flush(c) != nil {
			cc.closeNext = true
		}
	}
	ctx.Request.Reset()
	ctx.Response.Reset()
	cc.state, cc.pollDelay = stateIdle, 0
	cc.deadline = time.Now().Add(cc.l.e.g.state.Load().cfg.Server.IdleTimeout.D())
	if !cc.gone && (cc.closeNext || c.InboundBuffered() > 0) {
		_ = c.Wake(nil) // close, or serve the next request already here
	}
}

// connAddrs is the net.Conn a RequestCtx asks for its addresses.
type connAddrs struct{ c gnet.Conn }

func (a connAddrs) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (a connAddrs) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (a connAddrs) Close() error                     { return nil }
func (a connAddrs) LocalAddr() net.Addr              { return a.c.LocalAddr() }
func (a connAddrs) RemoteAddr() net.Addr             { return a.c.RemoteAddr() }
func (a connAddrs) SetDeadline(time.Time) error      { return nil }
func (a connAddrs) SetReadDeadline(time.Time) error  { return nil }
func (a connAddrs) SetWriteDeadline(time.Time) error { return nil }
