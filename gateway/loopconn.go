//go:build linux

package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/http1"
)

// loopBody is the largest request body the loops take: a larger one, or
// one of unknown length, goes to the goroutine engine, which streams it.
const loopBody = 64 << 10

// maxPendingIn is how many bytes of further requests a client may send
// while its loop cannot take them (pipelining): while its request is
// upstream, its response waits to stream, or its earlier responses wait to
// be read. A loop reads whatever arrives (it cannot stop a connection's
// read events), so it closes a client that sends more.
const maxPendingIn = 1 << 20

// maxPendingOut is how many response bytes a client may leave unread
// before its loop stops reading its next request.
const maxPendingOut = 256 << 10

// errFlood is the end of a client connection that sent more than
// maxPendingIn bytes while its loop could not take them.
var errFlood = errors.New("gateway: too many pipelined bytes")

// connState is where a client connection on a loop is.
type connState uint8

const (
	stateIdle      connState = iota // waiting for a request, or reading one
	stateBusy                       // a request is upstream
	stateStreaming                  // a response waits to stream from a goroutine
	stateGone                       // handed over or closed
)

// clientConn is a client connection served on an event loop: one request
// at a time (loopRequest); pipelined requests wait in the loop's buffer.
type clientConn struct {
	c     gnet.Conn // tls itself, for a connection of the TLS listener
	tls   *loopTLS  // nil: plaintext
	l     *loop
	ctx   fasthttp.RequestCtx
	state connState
	gen   uint64 // counts requests, attempts and the waits between them, so that a late timer finds its own
	gone  bool   // the client closed while its request was upstream
	// slot is the connection's place under server.max_connections while
	// the loop holds its socket: freed when the loop closes it, handed
	// on with the socket (see leave, halfClose, serveH2).
	slot *connSlot
	// opened is set when the loop starts serving the connection (see
	// enrolled).
	opened atomic.Bool
	// fresh marks a connection just accepted (over TLS: its handshake
	// just done), not one back from a goroutine: its first head is due
	// within server.read_header_timeout of open (see open).
	fresh bool

	peer     netip.Addr // the client's address
	peerText []byte     // and as text

	// The rate-limit key last used (see rateKey).
	keyRoute  *route
	keyClient netip.Addr
	keyHeader []byte
	key       string

	loopRequest

	// deadline is when an idle connection, or one whose request is still
	// arriving, is closed; zero while the request is upstream. The wake
	// timer, due at wakeAt, brings the loop back to check it.
	deadline  time.Time
	reading   bool           // part of a request has arrived
	scan      http1.HeadScan // the head arriving, looked at for a bare LF
	scanned   int            // how many of its bytes scan has looked at
	served    bool           // a request has arrived: HTTP/2's preface can no longer come
	readStart time.Time      // when it began to
	wake      *time.Timer
	wakeAt    time.Time
	woken     atomic.Bool // set by the wake timer
	closeNext bool        // close once the response is sent
	// lingerNext: closeNext after the gateway's own refusal, with a
	// lingering close (see lingerClose).
	lingerNext bool
	pollDelay  time.Duration // see poll
	outLast    int           // the unsent bytes await saw last
	outSince   time.Time     // when await last saw them fall; zero until it first looks
	reclaim    bool          // to close if still idle, for server.max_connections (see loop.reclaim)
}

// loopRequest is the request in flight on a clientConn: its head and body,
// copied out of the connection's buffer (in), the head read from them
// (head), its call through the route's lifecycle, stepped by the loop
// (begin, attempt, upstreamDone, retryAfter, resume, respond), and the
// upstream connection or stream serving its attempt.
type loopRequest struct {
	in        []byte
	head      http1.Request
	body      []byte // in's tail
	heldN     int64  // the bytes of body charged to the gateway's held bodies (see hold)
	rt        *route
	call      call
	att       attempt // the attempt under way, or the last one
	lastErr   error   // the previous attempt's error, during the wait for the next
	start     time.Time
	xff       []byte // the X-Forwarded-For value to send
	xffBuf    []byte
	trusted   bool   // the client is a trusted proxy that sent X-Forwarded-Host or -Proto
	rl        []byte // the RateLimit header value, in rlBuf
	rlBuf     [64]byte
	up        *upConn
	replayed  bool     // sent again after a stale upstream connection
	half      net.Conn // the socket, once the client shut its side (see halfClose)
	halfOut   []byte   // the response for half, written in answerHalf
	wantClose bool     // the client asked to close after the response
	timer     clock.Timer

	stream         net.Conn // the upstream connection a streamed response comes from
	streamTarget   *target
	streamReuse    bool      // the stream ended cleanly on a keep-alive connection
	streamDeadline time.Time // ends a streamed response when the route has a timeout

	obs observation // the request's id, trace and counts
}

// open starts serving c on its loop.
func (cc *clientConn) open(e *loopEngine, c gnet.Conn) {
	cc.l = e.loopOf(c)
	if t := cc.tls; t != nil {
		t.Conn, t.l, c = c, cc.l, t
		// tls.Conn may hold records already (a client can send its first
		// request in the flight of its Finished): no read event would
		// tell.
		_ = c.Wake(nil)
	}
	cc.c = c
	cc.opened.Store(true)
	cc.peer = netAddr(c.RemoteAddr())
	cc.peerText = cc.peer.AppendTo(nil)
	cc.ctx.Init2(connAddrs{c}, fasthttpLogger{e.g.log}, false)
	e.conns.Add(1)
	cc.l.conns[cc] = struct{}{}
	srv := &e.g.state.Load().cfg.Server
	wait := srv.IdleTimeout.D()
	now := time.Now()
	if cc.fresh {
		// A new connection's first head is due within
		// read_header_timeout of its accept, as on the goroutine engine
		// (fasthttp's ReadTimeout): one that sends nothing holds its
		// place under server.max_connections no longer.
		wait = srv.ReadHeaderTimeout.D()
		cc.reading, cc.readStart = true, now
	}
	cc.deadline, cc.wakeAt = now.Add(wait), now.Add(wait)
	cc.wake = time.AfterFunc(wait, func() {
		cc.woken.Store(true)
		_ = c.Wake(nil)
	})
	if cc.fresh && e.draining.Load() {
		// Accepted as Shutdown began, after the loops closed their idle
		// connections: serve closes it unless a request is here.
		_ = c.Wake(nil)
	}
	if !cc.fresh && e.g.conns.pressed.Load() {
		cc.l.reclaimOne() // back from a goroutine, idle
	}
}

// closed is the connection's end (err is why: io.EOF when the client
// closed or shut its side, see halfClose, as a TLS client's close_notify
// is taken), or the loop's part of it after a hand-over. A request
// still upstream is cancelled (see cancel). A response waiting to stream
// is dropped with its upstream connection.
func (cc *clientConn) closed(err error) {
	defer cc.freeSlot() // unless halfClose took the socket, and the slot with it
	cc.wake.Stop()
	cc.l.e.conns.Add(-1)
	delete(cc.l.conns, cc)
	if cc.tls != nil && cc.tls.eof {
		err = io.EOF
	}
	if errors.Is(err, io.EOF) && cc.halfClose() {
		return
	}
	if cc.tls != nil {
		cc.tls.closing()
	}
	switch cc.state {
	case stateBusy:
		cc.gone = true // an answer that comes is dropped
		cc.cancel()
	case stateStreaming:
		cc.state = stateGone
		cc.ctx.Response.Reset() // closes the body
		_ = cc.stream.Close()
		cc.stream = nil
	}
}

// enrolled, once gnet's enrollment of the connection returned without
// error, frees its slot when the loop never opened it (gnet closed the
// socket when it could not watch it, and reports no error): no event of
// the connection's will.
func (cc *clientConn) enrolled() {
	if !cc.opened.Load() {
		cc.slot.release()
	}
}

// freeSlot frees the connection's slot, if it still holds it.
func (cc *clientConn) freeSlot() {
	cc.slot.release()
	cc.slot = nil
}

// detach takes the socket out of the loop (see detach) with the
// connection's slot, which the net.Conn returned holds from then on.
func (cc *clientConn) detach() (net.Conn, error) {
	nc, err := detach(cc.c, cc.slot)
	if err == nil {
		cc.slot = nil
	}
	return nc, err
}

// cancel ends the request of a client that left while it was upstream:
// its attempt's connection is closed (it is not pooled, and the target
// sees the client leave) and no other attempt starts.
func (cc *clientConn) cancel() {
	if up := cc.up; up != nil {
		up.abandon()
		cc.upstreamDone(nil, upstreamError(cc.att.t, errClientGone))
	} else if cc.timer != nil {
		// The wait before another attempt: it ends now, as on the
		// goroutine engine, with the last attempt's error.
		cc.stopTimer()
		cc.call.cancelled(cc.lastErr)
		cc.respond(nil, cc.lastErr)
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
	if cc.reclaim {
		if a, done := cc.reclaimNow(); done {
			return a
		}
	}
	for {
		if cc.state != stateIdle && c.InboundBuffered() > maxPendingIn {
			return gnet.Close // a client that floods requests
		}
		switch cc.state {
		case stateBusy:
			return gnet.None // the next request waits in the buffer
		case stateStreaming:
			return cc.streamOut()
		case stateGone:
			return gnet.Close
		}
		if cc.closeNext || c.OutboundBuffered() > maxPendingOut {
			if c.OutboundBuffered() > 0 {
				return cc.await() // the client has not read its responses yet
			}
			if cc.closeNext && cc.lingerNext {
				return cc.lingerClose()
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
			cc.reading, cc.readStart, cc.scan, cc.scanned = true, now, http1.HeadScan{}, 0
			cc.setDeadline(now.Add(srv.ReadHeaderTimeout.D()))
		}
		if cc.tls != nil && cc.tls.h2 {
			return cc.serveH2TLS(buf)
		}
		if srv.HTTP2.Loops && cc.tls == nil && !cc.served && isH2CPreface(buf) {
			if len(buf) < len(h2cPreface) {
				return gnet.None
			}
			return cc.serveH2()
		}
		hlen := bytes.Index(buf, crlf2) + 4
		if hlen < 4 {
			i, bare, _ := cc.scan.Next(buf[cc.scanned:])
			if cc.scanned += i; bare {
				cc.refuseHead(now) // at once: fasthttp would wait for a CRLF CRLF
				continue
			}
			if len(buf) > srv.MaxHeaderBytes || bytes.Contains(buf, lf2) || notHTTP11Line(buf) {
				// fasthttp answers 431, parses bare line feeds, or answers
				// a request line of another version (HTTP/0.9 has no head
				// to wait for).
				return cc.handOver()
			}
			return gnet.None
		}
		if hlen > srv.MaxHeaderBytes {
			return cc.handOver()
		}
		// The head is copied with room for the body when it has arrived,
		// so that appending the body keeps h's slices valid.
		cc.in = append(slices.Grow(cc.in[:0], min(len(buf), hlen+loopBody)), buf[:hlen]...)
		h := &cc.head
		if !http1.ParseRequest(cc.in, h) {
			return cc.handOver()
		}
		rt, ambiguous := st.route(h)
		if ambiguous != "" || h.ContentLength() > loopBody || (srv.MaxBodyBytes > 0 && h.ContentLength() > srv.MaxBodyBytes) || (rt != nil && !rt.loop) {
			return cc.handOver()
		}
		if len(buf) < hlen+h.ContentLength() {
			cc.setDeadline(cc.readStart.Add(srv.ReadTimeout.D()))
			return gnet.None
		}
		cc.in = append(cc.in, buf[hlen:hlen+h.ContentLength()]...)
		cc.body = cc.in[hlen:]
		_, _ = c.Discard(hlen + h.ContentLength())
		cc.reading, cc.served = false, true
		cc.begin(st, rt, now)
	}
}

// notHTTP11Line reports whether b starts with a whole line that is not an
// HTTP/1.1 request line: one the loops will never serve, whose head need not
// be waited for.
func notHTTP11Line(b []byte) bool {
	i := bytes.IndexByte(b, '\n')
	return i >= 0 && !bytes.HasSuffix(b[:i], http11Line)
}

var http11Line = []byte(" HTTP/1.1\r")

var (
	crlf2 = []byte("\r\n\r\n")
	lf2   = []byte("\n\n")
)

// checkDeadline closes the connection when its deadline has passed, or
// when responses have waited unread for server.write_timeout (see
// watchUnread), and sets the wake timer again otherwise.
func (cc *clientConn) checkDeadline() (gnet.Action, bool) {
	now := time.Now()
	if cc.state == stateIdle && cc.outLast > 0 {
		if next, ok := cc.watchUnread(now); !ok {
			return gnet.Close, true
		} else if !next.IsZero() {
			cc.wakeAt = next
			cc.wake.Reset(next.Sub(now))
			return gnet.None, false
		}
	}
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

// watchUnread bounds the wait of a connection between requests whose
// responses wait unread (in the loop: the socket's buffers are full) by
// server.write_timeout rather than server.idle_timeout, as on the
// goroutine engine, whose write waits: the connection closes once the
// client has read nothing for that long. It looks again at most
// maxPollDelay later (next), to see the client read; when the client has
// read everything the connection is idle from then on, and next is zero.
// It reports false when the connection is to close.
func (cc *clientConn) watchUnread(now time.Time) (next time.Time, ok bool) {
	out := cc.c.OutboundBuffered()
	srv := &cc.l.e.g.state.Load().cfg.Server
	switch {
	case out == 0:
		cc.outLast, cc.outSince = 0, time.Time{}
		if !cc.reading {
			cc.deadline = now.Add(srv.IdleTimeout.D())
		}
		return time.Time{}, true
	case out < cc.outLast:
		cc.outSince = now // the client read some
	case now.Sub(cc.outSince) >= srv.WriteTimeout.D():
		return time.Time{}, false
	}
	cc.outLast = out
	return earliest(cc.outSince.Add(srv.WriteTimeout.D()), now.Add(maxPollDelay)), true
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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

// await waits for the client to read what was sent to it (see poll), or
// closes the connection when the client floods it meanwhile, or has read
// nothing for server.write_timeout.
func (cc *clientConn) await() gnet.Action {
	c := cc.c
	if c.InboundBuffered() > maxPendingIn {
		return gnet.Close
	}
	now, out := time.Now(), c.OutboundBuffered()
	if out < cc.outLast || cc.outSince.IsZero() {
		cc.outSince = now // the client read some
	} else if wt := cc.l.e.g.state.Load().cfg.Server.WriteTimeout.D(); wt > 0 && now.Sub(cc.outSince) >= wt {
		return gnet.Close
	}
	cc.outLast = out
	cc.poll()
	return gnet.None
}

// maxPollDelay is the longest a loop waits before it looks again whether a
// client has read the responses that wait for it.
const maxPollDelay = 50 * time.Millisecond

// poll comes back to the connection shortly, to see whether the client has
// read what was sent to it: after 1 ms, then twice as long each time, up
// to maxPollDelay, until a response goes out.
func (cc *clientConn) poll() {
	c := cc.c
	cc.pollDelay = min(max(2*cc.pollDelay, time.Millisecond), maxPollDelay)
	time.AfterFunc(cc.pollDelay, func() { _ = c.Wake(nil) })
}

// leave takes the connection out of its loop (see detach) once the client
// has read every response sent to it; until then it returns nil, nil and
// comes back to the connection later (see await). The caller returns
// gnet.Close unless it got nil, nil.
func (cc *clientConn) leave() (net.Conn, error) {
	if cc.c.OutboundBuffered() > 0 {
		if cc.await() == gnet.Close {
			return nil, errFlood
		}
		return nil, nil
	}
	cc.state = stateGone
	return cc.detach()
}

// handOver gives the connection to the goroutine engine with the bytes of
// its next request, once the client has read every response sent to it;
// or to the HTTP/2 engine when they are the HTTP/2 preface on a plaintext
// connection (over TLS, only ALPN chooses HTTP/2).
func (cc *clientConn) handOver() gnet.Action {
	buf, _ := cc.c.Peek(-1)
	h2 := cc.tls == nil && isH2CPreface(buf)
	nc, err := cc.leave()
	if nc == nil && err == nil {
		return gnet.None
	}
	if err != nil {
		if err != errFlood {
			cc.l.e.g.log.Warn("handing a connection over", "error", err)
		}
		return gnet.Close
	}
	cc.l.e.handovers.Add(1)
	if h2 {
		cc.l.e.g.h2.deliver(nc)
	} else {
		cc.l.e.handoff.deliver(nc)
	}
	return gnet.Close
}

// begin takes the request through the route's rate limit and starts its
// first attempt, or answers at once.
func (cc *clientConn) begin(st *state, rt *route, now time.Time) {
	ctx, g, h := &cc.ctx, cc.l.e.g, &cc.head
	cc.start = now
	cc.gen++
	// For the log, and the checks for HEAD that the response paths share
	// with the goroutine engine.
	ctx.Request.Header.SetMethodBytes(h.Method())
	ctx.Request.Header.SetRequestURIBytes(h.URI())
	cc.obs.begin(h.RequestID())
	cc.obs.bytesIn = int64(h.ContentLength())
	if st.tracer != nil {
		cc.obs.startTrace(st.tracer, h, h.Method(), h.Path(), clientIP(cc.peer, h.XForwardedFor(), st.trusted))
	}
	if rt == nil {
		writeError(ctx, fasthttp.StatusNotFound, "no_route", 0)
		g.finish(ctx, nil, now, "no_route", &cc.obs)
		cc.reply()
		return
	}
	rt.inflight.Add(1) // given back by finish
	cc.rt = rt
	cc.wantClose = h.Close()
	if rt.life.rate != nil {
		key, ok := cc.rateKey(rt, clientIP(cc.peer, h.XForwardedFor(), st.trusted))
		if !ok {
			writeError(ctx, fasthttp.StatusBadRequest, reasonAmbiguousKey, 0)
			cc.closeNext, cc.lingerNext = true, true // a 400 closes, as nginx's does
			cc.end(reasonAmbiguousKey)
			cc.reply()
			return
		}
		v, ok := g.limitRate(ctx, rt, key, cc.rlBuf[:0])
		if !ok {
			cc.end(string(sluice.RateLimited))
			cc.reply()
			return
		}
		cc.rl = v
	}
	cc.trusted = h.ClaimsForwarded() && st.trusted.contains(cc.peer)
	if len(h.XForwardedFor()) == 0 {
		cc.xff = cc.peerText // what forwardedFor would make
	} else {
		cc.xff = forwardedFor(cc.xffBuf[:0], cc.peer, h.XForwardedFor(), st.trusted)
		cc.xffBuf = cc.xff[:0]
	}
	// The loops hold the whole body: the method makes a request one that a
	// failed attempt ends, and so does a body server.max_held_body_bytes
	// has no room for.
	held := cc.hold(&g.held, int64(st.cfg.Server.MaxHeldBodyBytes))
	cc.call.start(rt.life, &cc.head, !held || !http1.Idempotent(h.Method()), &cc.obs)
	cc.deadline = time.Time{}
	cc.attempt()
}

// attempt begins an attempt of the request's call and sends the request
// upstream, or answers at once when a policy refuses it (the gateway's
// retries never repeat a refusal: see retryOn). A timer on the gateway's
// clock ends the attempt when its response's head is late (see
// lifecycle.headLimit).
func (cc *clientConn) attempt() {
	a, err := cc.call.begin()
	if err != nil {
		cc.respond(nil, err)
		return
	}
	cc.gen++ // a timer of an earlier attempt finds it ended
	cc.att = a
	cc.state = stateBusy
	if d := cc.rt.life.headLimit(); d > 0 {
		gen, l := cc.gen, cc.l
		cc.timer = cc.rt.life.clock.AfterFunc(d, func() { l.e.execute(l, func() { cc.timeout(gen) }) })
	}
	cc.send()
}

// rateKey returns the key of the request, from client, for rt's rate
// limit: the connection's previous key when it is the same (same route,
// client and key header), which saves making it again on every request of
// a keep-alive connection. It reports false when the request's key header
// is ambiguous (see rateLimit.keyValue).
func (cc *clientConn) rateKey(rt *route, client netip.Addr) (string, bool) {
	hv, ok := rt.life.rate.keyValue(&cc.head)
	if !ok {
		return "", false
	}
	if cc.keyRoute != rt || cc.keyClient != client || !bytes.Equal(cc.keyHeader, hv) {
		cc.keyRoute, cc.keyClient, cc.keyHeader = rt, client, append(cc.keyHeader[:0], hv...)
		cc.key = rt.life.rate.key(hv, rt, client)
	}
	return cc.key, true
}

// send sends the request to the attempt's target over an idle connection
// of the loop, or a new one.
func (cc *clientConn) send() {
	t := cc.att.t
	// The request's start stands for the time: a connection that looks
	// younger than it is when the request is sent again after a stale
	// connection fails the same way at worst.
	if up := cc.l.takeIdle(t, cc.start); up != nil {
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
	cc.upstreamDone(nil, upstreamError(cc.att.t, fasthttp.ErrTimeout))
}

// upstreamDone ends the attempt: resp is the upstream's response in the
// client's (its body read whole or streaming), or nil with err, an
// *UpstreamError. The request then goes to another attempt when the
// route's retry asks for one, or is answered.
func (cc *clientConn) upstreamDone(resp *fasthttp.Response, err error) {
	var code int
	var retryAfter []byte
	if resp != nil {
		code, retryAfter = outcomeOf(resp)
	}
	cc.stopTimer()
	delay, again, err := cc.call.end(&cc.att, code, retryAfter, err)
	if again {
		cc.retryAfter(delay, err)
		return
	}
	cc.respond(resp, err)
}

// retryAfter drops the failed attempt's response and starts the next
// attempt after delay, on another target when there is one.
func (cc *clientConn) retryAfter(delay time.Duration, err error) {
	cc.ctx.Response.Reset()
	if cc.stream != nil {
		_ = cc.stream.Close()
		cc.stream = nil
	}
	cc.lastErr = err
	if delay <= 0 {
		cc.attempt()
		return
	}
	// The wait has a generation of its own: a timer of the attempt that
	// fell due as it ended, and whose event still waits in the loop's
	// queue, finds it ended.
	cc.gen++
	gen, l := cc.gen, cc.l
	cc.timer = cc.rt.life.clock.AfterFunc(delay, func() { l.e.execute(l, func() { cc.resume(gen) }) })
}

// resume starts the next attempt after the wait gen (a client that leaves
// during the wait ends it: see closed).
func (cc *clientConn) resume(gen uint64) {
	if cc.gen != gen || cc.state != stateBusy {
		return
	}
	cc.timer = nil
	cc.attempt()
}

// upstreamEnded ends the attempt with a response whose status code is
// below 500: a success, which no other attempt follows.
func (cc *clientConn) upstreamEnded(code int) {
	cc.stopTimer()
	_, _, _ = cc.call.end(&cc.att, code, nil, nil)
}

// stopTimer stops the attempt's timer.
func (cc *clientConn) stopTimer() {
	if cc.timer != nil {
		cc.timer.Stop()
		cc.timer = nil
	}
}

// respond answers the request with the upstream's response, the route's
// fallback or an error, as the goroutine engine does.
func (cc *clientConn) respond(resp *fasthttp.Response, err error) {
	ctx, rt := &cc.ctx, cc.rt
	if rt.life.rate != nil {
		rt.life.rate.setHeaders(&ctx.Response.Header, cc.rl)
	}
	reason := respond(ctx, rt, resp, err)
	if ctx.Response.IsBodyStream() {
		cc.end(reason)
		cc.state = stateStreaming
		if cc.half != nil {
			cc.streamHalf()
		} else if !cc.gone {
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
	g.finish(&cc.ctx, cc.rt, cc.start, reason, &cc.obs)
	cc.unhold()
	cc.rt, cc.att, cc.lastErr, cc.rl, cc.replayed = nil, attempt{}, nil, nil, false
	cc.call = call{}
}

// reply sends the response in cc.ctx and makes the connection ready for
// the next request.
func (cc *clientConn) reply() {
	ctx := &cc.ctx
	answerFor(&ctx.Response, ctx.IsHead(), cc.closing())
	if !cc.gone {
		w := cc.l.writer()
		if ctx.Response.Write(w) != nil || w.Flush() != nil || cc.write() != nil {
			cc.closeNext = true
		}
	}
	cc.ready()
}

// answerFor makes resp the answer on a loop's client connection (reply,
// streamResponse): without a body for a HEAD (head), and with Connection:
// close when the connection closes after it (closing).
func answerFor(resp *fasthttp.Response, head, closing bool) {
	if closing {
		resp.SetConnectionClose()
	}
	if head {
		resp.SkipBody = true
	}
}

// forward answers the request with the target's response h, whose body is
// body, as it came but for its hop-by-hop headers and the gateway's own
// (see http1.AppendResponse), and makes the connection ready for the next
// request.
func (cc *clientConn) forward(h *http1.Response, body []byte) {
	closing := cc.closing()
	if !cc.gone {
		d := http1.Deliver{Date: dateHeader(time.Now()), RateLimit: cc.rl, Closing: closing}
		if cc.rt.life.rate != nil {
			d.Policy = cc.rt.life.rate.policy
		}
		if cc.rt.rules != nil {
			d.Edit = (*lineEdit)(&cc.rt.rules.response)
		}
		l := cc.l
		l.out.b = http1.AppendResponse(l.out.b[:0], h, &d, body)
		if cc.write() != nil {
			cc.closeNext = true
		}
	}
	cc.ctx.Response.SetStatusCode(h.Code()) // for the metrics and the log
	cc.obs.bytesOut = int64(len(body))
	cc.end("")
	cc.ready()
}

// closing reports whether the connection closes after this response (and
// marks it so): the client asked for it, or the gateway is shutting down.
func (cc *clientConn) closing() bool {
	if cc.wantClose || cc.l.e.draining.Load() {
		cc.closeNext = true
	}
	return cc.closeNext
}

// ready makes the connection ready for its next request.
func (cc *clientConn) ready() {
	c := cc.c
	cc.ctx.Request.Reset()
	cc.ctx.Response.Reset()
	if cap(cc.in) > 16<<10 {
		cc.in = nil // do not keep a large body's buffer
	}
	cc.body = nil
	if cc.half != nil {
		cc.answerHalf()
		return
	}
	now := time.Now()
	cc.state, cc.pollDelay, cc.outLast, cc.outSince = stateIdle, 0, 0, time.Time{}
	cc.deadline = now.Add(cc.l.e.g.state.Load().cfg.Server.IdleTimeout.D())
	if out := c.OutboundBuffered(); out > 0 && !cc.gone {
		// The response waits unread: watchUnread bounds the wait.
		cc.outLast, cc.outSince = out, now
		if next := now.Add(maxPollDelay); next.Before(cc.wakeAt) {
			cc.wakeAt = next
			cc.wake.Reset(maxPollDelay)
		}
	}
	if !cc.gone && (cc.closeNext || c.InboundBuffered() > 0) {
		_ = c.Wake(nil) // close, or serve the next request already here
	} else if cc.l.e.g.conns.pressed.Load() {
		cc.l.reclaimOne()
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
