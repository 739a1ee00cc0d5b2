//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/upstream"
)

// maxResponseHeader bounds a response's headers read on a loop.
const maxResponseHeader = 64 << 10

// upConn is a connection to a target, owned by one loop: idle in the
// loop's pool, or carrying one client's request.
type upConn struct {
	c         gnet.Conn // nil while connecting
	l         *loop
	t         *target
	cc        *clientConn // the request it carries; nil when idle
	got       bool        // a byte of the response has arrived
	hlen      int         // the response's header length, once parsed
	need      int         // the response's whole length, once known
	interim   int         // interim (1xx) responses skipped
	idleSince time.Time
	gone      bool // closed, or taken out of the loop
}

// takeIdle returns an idle connection to t, closing those idle too long
// at now.
func (l *loop) takeIdle(t *target, now time.Time) *upConn {
	conns := l.idle[t]
	for len(conns) > 0 {
		up := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if now.Sub(up.idleSince) < t.Client.MaxIdleConnDuration {
			l.idle[t] = conns
			return up
		}
		up.gone = true
		_ = up.c.Close()
	}
	delete(l.idle, t)
	return nil
}

// putIdle keeps up for the next request to its target.
func (l *loop) putIdle(up *upConn) {
	up.cc, up.got, up.hlen, up.need, up.interim = nil, false, 0, 0, 0
	up.idleSince = time.Now()
	l.idle[up.t] = append(l.idle[up.t], up)
}

// dial connects to t for cc's request, off the loop, within t's
// connect_timeout (a route's timeout, when shorter, ends it sooner); the
// connection joins the loop, which sends the request when it opens. A
// connection the loop never took, as they stopped, is closed, and what
// the request holds is freed, unless the request left it (see
// upConn.stranded).
func dial(cc *clientConn, t *target) {
	up := &upConn{l: cc.l, t: t, cc: cc}
	cc.up = up
	el, addr, timeout, stopped := cc.c.EventLoop(), t.Client.Addr, t.Connect, cc.l.e.stopped
	go func() {
		nc, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			var res <-chan gnet.RegisteredResult
			if res, err = el.Enroll(gnet.NewContext(context.Background(), up), nc); err == nil {
				select {
				case r := <-res:
					err = r.Err
				case <-stopped:
					_ = nc.Close()
					up.stranded()
					return
				}
			}
		}
		if err != nil {
			if el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				up.dialFailed(err)
				return nil
			})) != nil {
				<-stopped // the loops are stopping: cc's request never hears of the dial
				up.stranded()
			}
		}
	}()
}

// opened is the new connection up joining its loop.
func (up *upConn) opened(c gnet.Conn) {
	up.c = c
	switch {
	case up.gone: // its request ended before it connected
		_ = c.Close()
	case up.cc == nil:
		up.l.putIdle(up)
	default:
		up.attach(up.cc)
	}
}

func (up *upConn) dialFailed(err error) {
	cc := up.cc
	up.gone = true
	if cc == nil || cc.up != up {
		return
	}
	cc.up = nil
	cc.upstreamDone(nil, upstreamError(up.t, err))
}

// attach sends cc's request over up.
func (up *upConn) attach(cc *clientConn) {
	up.cc, cc.up = cc, up
	l := cc.l
	f := http1.Forward{Addr: up.t.Client.Addr, XFF: cc.xff, Trusted: cc.trusted, ID: cc.obs.id, HTTPS: cc.overTLS()}
	f.Traceparent, f.Tracestate = cc.att.span.Headers()
	if rules := cc.rt.rules; rules != nil {
		f.Rewrite, f.Edit = (*pathRewrite)(rules), (*lineEdit)(&rules.request)
	}
	l.out.b = http1.AppendRequest(l.out.b[:0], &cc.head, &f, cc.body)
	if err := l.write(up.c); err != nil {
		up.abandon()
		cc.upstreamDone(nil, upstreamError(up.t, err))
	}
}

// abandon closes up, whose request ended without it.
func (up *upConn) abandon() {
	if up.cc != nil {
		up.cc.up = nil
		up.cc = nil
	}
	up.gone = true
	if up.c != nil {
		_ = up.c.Close()
	}
}

// closed is the end of up: a request it carried gets a 502, or goes once
// more over another connection when up was a pooled one the target had
// closed and the request may be sent twice (see roundTrip).
func (up *upConn) closed() {
	cc := up.cc
	if !up.gone && cc == nil {
		conns := up.l.idle[up.t]
		if i := index(conns, up); i >= 0 {
			up.l.idle[up.t] = append(conns[:i], conns[i+1:]...)
		}
	}
	up.gone = true
	if cc == nil || cc.up != up {
		return
	}
	cc.up = nil
	if !up.got && !cc.replayed && cc.head.Replayable() {
		cc.replayed = true
		cc.send()
		return
	}
	cc.upstreamDone(nil, upstreamError(up.t, fasthttp.ErrConnectionClosed))
}

func index(conns []*upConn, up *upConn) int {
	for i, x := range conns {
		if x == up {
			return i
		}
	}
	return -1
}

// traffic reads the response to up's request: its headers, then its body
// when it is small, which goes to the client at once; a larger or chunked
// body streams from a goroutine (stream).
func (up *upConn) traffic() gnet.Action {
	cc := up.cc
	if cc == nil || up.gone {
		return gnet.Close // an idle connection that speaks unasked
	}
	c := up.c
	buf, _ := c.Peek(-1)
	up.got = up.got || len(buf) > 0
	resp := &cc.ctx.Response
	for up.need == 0 {
		hlen := bytes.Index(buf, crlf2) + 4
		if hlen < 4 {
			if len(buf) > maxResponseHeader {
				return up.fail(errors.New("gateway: response headers too large"))
			}
			return gnet.None
		}
		var h http1.Response
		if http1.ParseResponse(buf[:hlen], &h) && h.Code() < 500 {
			need := -1
			switch http1.ResponseBody(cc.ctx.IsHead(), h.Code(), h.ContentLength()) {
			case http1.BodyNone:
				need = hlen
			case http1.BodyWhole:
				need = hlen + h.ContentLength()
			}
			if need >= 0 {
				if len(buf) < need {
					return gnet.None // read again once the body is in
				}
				return up.forward(&h, buf[hlen:need], need, len(buf) == need)
			}
		}
		if http1.BothFramings(buf[:hlen]) {
			return up.fail(http1.ErrFraming)
		}
		resp.Reset()
		resp.Header.SetNoDefaultContentType(true)
		if err := resp.Header.Read(up.l.reader(buf[:hlen])); err != nil {
			return up.fail(err)
		}
		if !http1.TokenNames(resp.Header.All()) {
			return up.fail(http1.ErrBadName)
		}
		resp.Header.SetProtocol(http11) // as readResponse does
		code, cl := resp.StatusCode(), resp.Header.ContentLength()
		up.interim++
		skip, err := http1.Interim(code, up.interim)
		if err != nil {
			return up.fail(err)
		}
		if skip {
			_, _ = c.Discard(hlen)
			buf = buf[hlen:]
			continue
		}
		switch http1.ResponseBody(cc.ctx.IsHead(), code, cl) {
		case http1.BodyNone:
			resp.SkipBody = true
			up.need = hlen
		case http1.BodyWhole:
			up.need = hlen + cl
		default:
			return up.stream(hlen, cl)
		}
		up.hlen = hlen
	}
	if len(buf) < up.need {
		return gnet.None
	}
	if !resp.SkipBody {
		resp.SetBodyRaw(buf[up.hlen:up.need]) // sent before the buffer moves on
	}
	keep := !resp.ConnectionClose() && len(buf) == up.need
	cc.up = nil
	cc.upstreamDone(resp, nil)
	return up.done(up.need, keep)
}

// forward sends a plain response h with its body, n bytes in all, to the
// client as it came (see clientConn.forward): the attempt succeeded. It
// keeps up for the next request unless keep is false or the target closes
// it.
func (up *upConn) forward(h *http1.Response, body []byte, n int, keep bool) gnet.Action {
	cc := up.cc
	cc.up = nil
	cc.upstreamEnded(h.Code())
	cc.forward(h, body)
	return up.done(n, keep && !h.Close())
}

// done consumes the n bytes of up's response, and keeps up for the next
// request unless keep is false or up is gone.
func (up *upConn) done(n int, keep bool) gnet.Action {
	_, _ = up.c.Discard(n)
	if !keep || up.gone {
		up.gone = true
		up.cc = nil
		return gnet.Close
	}
	up.l.putIdle(up)
	return gnet.None
}

// fail ends up's request with err and closes up.
func (up *upConn) fail(err error) gnet.Action {
	cc := up.cc
	up.cc, up.gone = nil, true
	cc.up = nil
	cc.upstreamDone(nil, upstreamError(up.t, err))
	return gnet.Close
}

// stream takes up out of its loop to stream a response body of cl bytes
// (-1: chunked; -2: up to the connection's end) that follows hlen bytes of
// headers. The attempt ends for the policies now, at the headers, as on the
// goroutine engine; the client's side goes once the client has read what
// it was sent before (clientConn.streamOut).
func (up *upConn) stream(hlen, cl int) gnet.Action {
	cc := up.cc
	keep := !cc.ctx.Response.ConnectionClose()
	_, _ = up.c.Discard(hlen)
	nc, err := detach(up.c, nil)
	up.cc, up.gone = nil, true
	cc.up = nil
	if err != nil {
		cc.upstreamDone(nil, upstreamError(up.t, err))
		return gnet.Close
	}
	cc.stream, cc.streamTarget = nc, up.t
	if d := cc.rt.life.timeout; d > 0 {
		cc.streamDeadline = cc.att.start.Add(d) // the timeout bounds the body too
	}
	br := bufio.NewReader(nc)
	body := upstream.NewConnBody(br, cl)
	body.Start(br, nc, upstream.Trip{Deadline: cc.streamDeadline, Wait: up.t.Wait}, keep,
		func(reuse bool) { cc.streamReuse = reuse && br.Buffered() == 0 })
	cc.ctx.Response.SetBodyStream(body, cl)
	cc.upstreamDone(&cc.ctx.Response, nil)
	return gnet.Close
}

// streamOut takes the client's connection out of its loop, once the
// client has read what it was sent before, and streams the response from a
// goroutine.
func (cc *clientConn) streamOut() gnet.Action {
	nc, err := cc.leave()
	if nc == nil && err == nil {
		return gnet.None
	}
	if err != nil {
		cc.ctx.Response.Reset()
		_ = cc.stream.Close()
		return gnet.Close
	}
	e := cc.l.e
	e.streams.add()
	go func() {
		defer e.streams.done()
		cc.streamResponse(nc)
	}()
	return gnet.Close
}

// streamResponse sends the response in cc.ctx, whose body streams from
// cc.stream, to the client's connection nc; a slow client slows the
// reading from the upstream. Then both connections go back to the loop
// when they can serve again: the upstream one to its pool, the client's
// to wait for its next request (to the goroutine engine instead when it
// had sent more already; closed when the loops drain).
func (cc *clientConn) streamResponse(nc net.Conn) {
	ctx, up := &cc.ctx, cc.stream
	if dl := cc.streamDeadline; !dl.IsZero() {
		_ = nc.SetDeadline(dl)
		_ = up.SetDeadline(dl)
	}
	if wt := cc.l.e.g.state.Load().cfg.Server.WriteTimeout.D(); wt > 0 {
		dl := time.Now().Add(wt) // for the headers; then per read (paceClient)
		if !cc.streamDeadline.IsZero() && cc.streamDeadline.Before(dl) {
			dl = cc.streamDeadline
		}
		_ = nc.SetWriteDeadline(dl)
		paceClient(ctx.Response.BodyStream(), nc, wt)
	}
	answerFor(&ctx.Response, ctx.IsHead(), cc.wantClose || cc.l.e.draining.Load())
	w := bufio.NewWriter(nc)
	err := ctx.Response.Write(w)
	if err == nil {
		err = w.Flush()
	}
	last := err != nil || ctx.Response.ConnectionClose()
	ctx.Response.Reset() // closes the body: streamReuse is known
	ctx.Request.Reset()
	el := cc.c.EventLoop()
	if !cc.streamReuse || up.SetDeadline(time.Time{}) != nil || enroll(el, up, &upConn{l: cc.l, t: cc.streamTarget}) != nil {
		_ = up.Close()
	}
	if last || nc.SetDeadline(time.Time{}) != nil {
		_ = nc.Close()
		return
	}
	e := cc.l.e
	e.enrolling.RLock() // no loop drains while it takes nc back: closeIdle finds it
	defer e.enrolling.RUnlock()
	switch {
	case e.draining.Load() && !readAhead(nc):
		// The loops drain: a connection between requests closes, as
		// closeIdle closes theirs, rather than wait for a request on a
		// loop whose shutdown waits for it.
		_ = nc.Close()
	case enroll(el, nc, &clientConn{}) != nil:
		e.handovers.Add(1)
		e.handoff.deliver(nc)
	}
}

// enroll puts nc on event loop el with context v, and waits until it is
// there (a TLS connection: see enrollTLS). It fails for a connection with
// bytes read ahead (a prefixConn still holding some), which only the
// goroutine engine can take.
func enroll(el gnet.EventLoop, nc net.Conn, v any) error {
	if tc, ok := nc.(*tlsConn); ok {
		return enrollTLS(el, tc)
	}
	if pc, ok := nc.(*prefixConn); ok {
		if len(pc.prefix) > 0 {
			return errors.New("gateway: bytes read ahead")
		}
		nc = pc.Conn
	}
	// A client connection's slot goes with its socket (see connSlot).
	sock, slot := unwrapCounted(nc)
	cc, _ := v.(*clientConn)
	if cc != nil {
		cc.slot = slot
	}
	res, err := el.Enroll(gnet.NewContext(context.Background(), v), sock)
	if err == nil {
		err = (<-res).Err
	}
	if err != nil {
		restoreCounted(nc, slot) // the loop never opened it
		if cc != nil {
			cc.slot = nil
		}
		return err
	}
	if cc != nil {
		cc.enrolled()
	}
	return nil
}
