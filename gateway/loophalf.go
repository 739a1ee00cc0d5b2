//go:build linux

package gateway

import (
	"net"
	"time"
)

// halfClose takes over the connection of a client that shut down its
// sending side once its requests were sent (as nc -N and some HTTP/1.0
// clients do): its loop read the end of the stream, and gnet then closes
// the connection, whose socket this keeps (see detach). The request
// upstream is answered, as on the goroutine engine, unless it waits
// watchDelay: the client is then taken to have left, as there (see
// clientWatch), and is answered 499 (see halfLeft), at once when the
// request had waited watchDelay already. The requests that came after it
// go to the goroutine engine, which answers them and closes. It reports whether it took the connection: not when
// there is nothing to answer (no request came after the last response, or
// that response closes the connection: the requests after it are never
// served, RFC 9112 section 9.6), nor when responses wait unsent (gnet
// sends what the socket takes of them and drops the rest).
func (cc *clientConn) halfClose() bool {
	c := cc.c
	now := time.Now()
	switch {
	case c.OutboundBuffered() > 0,
		cc.state == stateGone,
		cc.state == stateIdle && (cc.closeNext || c.InboundBuffered() == 0):
		return false
	}
	nc, err := cc.detach()
	if err != nil {
		return false
	}
	e, l := cc.l.e, cc.l
	switch cc.state {
	case stateIdle:
		cc.state = stateGone
		e.handovers.Add(1)
		e.handoff.deliver(nc)
	case stateStreaming:
		cc.state = stateGone
		e.streams.add()
		go func() {
			defer e.streams.done()
			cc.streamResponse(nc)
		}()
	case stateBusy:
		cc.half = nc
		e.streams.add() // until answerHalf
		// Past watchDelay already, the timer fires at once.
		time.AfterFunc(cc.start.Add(watchDelay).Sub(now), func() { e.execute(l, cc.halfLeft) })
	}
	return true
}

// halfLeft cancels the request of a half-closed client (see halfClose)
// that is still upstream: the client is answered 499, as on the goroutine
// engine, and its connection closes.
func (cc *clientConn) halfLeft() {
	if cc.half != nil && cc.state == stateBusy {
		cc.closeNext = true
		cc.cancel()
	}
}

// streamHalf streams the response to a half-closed client from a
// goroutine, as streamOut does.
func (cc *clientConn) streamHalf() {
	nc, e := cc.half, cc.l.e
	cc.half, cc.state = nil, stateGone
	go func() {
		defer e.streams.done() // taken in halfClose
		cc.streamResponse(nc)
	}()
}

// answerHalf sends the response written for a half-closed client from a
// goroutine, within server.write_timeout, then gives the connection to the
// goroutine engine for the requests that came after, or closes it when
// none did or it closes after the response.
func (cc *clientConn) answerHalf() {
	nc, out, e := cc.half, cc.halfOut, cc.l.e
	last := cc.gone || cc.closeNext
	cc.half, cc.halfOut, cc.state = nil, nil, stateGone
	wt := e.g.state.Load().cfg.Server.WriteTimeout.D()
	go func() {
		defer e.streams.done() // taken in halfClose
		if !readAhead(nc) {
			last = true
		}
		if wt > 0 {
			_ = nc.SetWriteDeadline(time.Now().Add(wt))
		}
		if _, err := nc.Write(out); err != nil || last || nc.SetWriteDeadline(time.Time{}) != nil {
			_ = nc.Close()
			return
		}
		e.handovers.Add(1)
		e.handoff.deliver(nc)
	}()
}

// write sends the response in the loop's buffer (l.out) to the client:
// at once, or kept for answerHalf when the client shut its side.
func (cc *clientConn) write() error {
	if cc.half != nil {
		cc.halfOut = append(cc.halfOut, cc.l.out.b...)
		return nil
	}
	return cc.l.write(cc.c)
}

// readAhead reports whether nc, a connection a loop took out (see
// detach), holds bytes of a request read already.
func readAhead(nc net.Conn) bool {
	switch nc := nc.(type) {
	case *prefixConn:
		return true
	case *tlsConn:
		return len(nc.ahead) > 0
	}
	return false
}
