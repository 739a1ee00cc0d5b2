//go:build linux

package gateway

import (
	"context"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// idleOnLoop is a connection a loop found idle between requests (see
// reclaimable), for reclaimIdle to choose from.
type idleOnLoop struct {
	l        *loop
	cc       *clientConn
	deadline time.Time // its idle_timeout's end: the earliest is idle longest
}

// idleConns returns the loops' connections idle between requests, each
// loop asked on its own goroutine; it returns once every loop answered,
// or the loops stopped.
func (e *loopEngine) idleConns() []idleOnLoop {
	e.mu.Lock()
	loops := make([]*loop, 0, len(e.loops))
	for _, l := range e.loops {
		loops = append(loops, l)
	}
	e.mu.Unlock()
	found := make(chan []idleOnLoop, len(loops))
	for _, l := range loops {
		err := l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			var idle []idleOnLoop
			for cc := range l.conns {
				if cc.reclaimable() {
					idle = append(idle, idleOnLoop{l: l, cc: cc, deadline: cc.deadline})
				}
			}
			found <- idle
			return nil
		}))
		if err != nil {
			found <- nil
		}
	}
	var all []idleOnLoop
	for range loops {
		select {
		case idle := <-found:
			all = append(all, idle...)
		case <-e.stopped:
			return nil
		}
	}
	return all
}

// mark has the connections of idle, found by idleConns, closed on their
// loops if they are still idle then (see reclaimNow); one still open but
// no longer idle has another connection that turns idle give its place.
func (e *loopEngine) mark(idle []idleOnLoop) {
	for _, c := range idle {
		e.execute(c.l, func() {
			if _, ok := c.l.conns[c.cc]; !ok {
				return // closed: its place is free
			}
			if !c.cc.reclaimable() {
				e.g.conns.unclaimPress()
				return
			}
			c.cc.reclaim = true
			_ = c.cc.c.Wake(nil)
		})
	}
}

// reclaimOne, on a connection that has just turned idle between
// requests, has the loop's connection idle longest closed when a take
// waits for a slot (see connCap.claimPress).
func (l *loop) reclaimOne() {
	cp := &l.e.g.conns
	if !cp.claimPress() {
		return
	}
	var oldest *clientConn
	for cc := range l.conns {
		if cc.reclaimable() && (oldest == nil || cc.deadline.Before(oldest.deadline)) {
			oldest = cc
		}
	}
	if oldest == nil {
		cp.unclaimPress()
		return
	}
	oldest.reclaim = true
	_ = oldest.c.Wake(nil)
}

// reclaimable reports whether the connection waits for its next HTTP/1.1
// request (it has served one, on the loop or, back from a goroutine, on
// it), with nothing of one arrived (not a byte, nor a TLS record's) and
// its last answer all sent: closing it cuts nothing.
func (cc *clientConn) reclaimable() bool {
	if cc.state != stateIdle || (cc.fresh && !cc.served) || cc.reading || cc.closeNext || cc.reclaim || cc.half != nil {
		return false
	}
	if t := cc.tls; t != nil && (t.h2 || t.Conn.InboundBuffered() > 0 || t.sw.held || t.sw.arriving()) {
		return false
	}
	return cc.c.InboundBuffered() == 0 && cc.c.OutboundBuffered() == 0
}

// reclaimNow closes the connection, marked to be, when it is still idle
// (see reclaimable); else it goes on, and another connection that turns
// idle gives its place instead.
func (cc *clientConn) reclaimNow() (gnet.Action, bool) {
	cc.reclaim = false
	cp := &cc.l.e.g.conns
	if cc.reclaimable() {
		cp.reclaimed.Add(1)
		return gnet.Close, true
	}
	cp.unclaimPress()
	return gnet.None, false
}
