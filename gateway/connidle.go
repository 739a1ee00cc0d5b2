package gateway

import (
	"crypto/tls"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// idleConns are the goroutine engine's client connections that wait for
// their next HTTP/1.1 request (fasthttp's StateIdle: the last answer is
// written), idle longest first, so that the oldest may be closed to make
// room under server.max_connections (see connCap.take). Its methods are
// safe for concurrent use.
type idleConns struct {
	cap *connCap
	mu  sync.Mutex // protects the list, and each countedConn's idle, prev, next and reclaiming changes
	// The list, linked through its countedConns (no allocation per
	// request): oldest the one idle longest, newest the last.
	oldest, newest *countedConn
	n              int
}

// len returns how many connections are idle.
func (ic *idleConns) len() int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.n
}

// push puts cc at the list's end. It requires ic.mu.
func (ic *idleConns) push(cc *countedConn) {
	cc.idle, cc.prev, cc.next = true, ic.newest, nil
	if ic.newest != nil {
		ic.newest.next = cc
	} else {
		ic.oldest = cc
	}
	ic.newest = cc
	ic.n++
}

// remove takes cc, listed, out of the list. It requires ic.mu.
func (ic *idleConns) remove(cc *countedConn) {
	if cc.prev != nil {
		cc.prev.next = cc.next
	} else {
		ic.oldest = cc.next
	}
	if cc.next != nil {
		cc.next.prev = cc.prev
	} else {
		ic.newest = cc.prev
	}
	cc.idle, cc.prev, cc.next = false, nil, nil
	ic.n--
}

// reclaimedBefore is the read deadline that ends a reclaimed connection's
// wait for its next request at once.
var reclaimedBefore = time.Unix(1, 0)

// connState follows fasthttp's connections between requests: an idle one
// joins the list (and, when a take waits for a slot, the oldest one is
// reclaimed), unless part of a TLS record has come (its next request is
// arriving); a busy, hijacked or closed one leaves it.
func (ic *idleConns) connState(c net.Conn, s fasthttp.ConnState) {
	cc, sw := countedOf(c)
	if cc == nil {
		return // no slot: not counted
	}
	if s == fasthttp.StateClosed && cc.reclaiming.Load() {
		ic.cap.reclaimed.Add(1)
	}
	survived := false
	ic.mu.Lock()
	if s == fasthttp.StateIdle {
		// sw is read on the goroutine that serves c, as it reads it.
		if !cc.idle && (sw == nil || !sw.arriving()) {
			ic.push(cc)
		}
	} else {
		if cc.idle {
			ic.remove(cc)
		}
		if cc.reclaiming.Swap(false) && s == fasthttp.StateActive {
			// A request came from what was read already: its reads go on.
			_ = cc.Conn.SetReadDeadline(time.Time{})
			survived = true
		}
	}
	ic.mu.Unlock()
	if survived {
		ic.cap.unclaimPress() // another connection gives its place
	}
	if s == fasthttp.StateIdle && ic.cap.pressed.Load() && ic.cap.claimPress() && ic.reclaim(1) == 0 {
		ic.cap.unclaimPress()
	}
}

// reclaim has at most n of the connections idle longest closed, and
// returns how many: each one's next read of its socket fails at once, so
// that fasthttp, waiting for the next request, closes it without an
// answer, as at its idle timeout. A request already read (pipelined, or
// whose first bytes fasthttp holds) is served, as its reads come from
// what fasthttp or TLS hold, and the connection stays.
func (ic *idleConns) reclaim(n int) int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	k := 0
	for ; k < n && ic.oldest != nil; k++ {
		cc := ic.oldest
		ic.remove(cc)
		cc.reclaiming.Store(true)
		_ = cc.Conn.SetReadDeadline(reclaimedBefore) // ends a read under way
	}
	return k
}

// Read reads the socket, unless the connection was reclaimed while idle
// (see idleConns.reclaim): then it fails as at a read deadline.
func (c *countedConn) Read(p []byte) (int, error) {
	if c.reclaiming.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	return c.Conn.Read(p)
}

// countedOf returns the countedConn under c, a connection fasthttp
// serves, through the gateway's wrappers, and the sockSwitch under c's
// TLS, if any; a nil countedConn when there is none.
func countedOf(c net.Conn) (*countedConn, *sockSwitch) {
	var sw *sockSwitch
	for range 8 { // wrappers nest a few deep
		switch v := c.(type) {
		case *countedConn:
			return v, sw
		case *sniffConn:
			c = v.Conn
		case *prefixConn:
			c = v.Conn
		case *tlsConn:
			c = v.Conn
		case *tls.Conn:
			c = v.NetConn()
		case *sockSwitch:
			c, sw = v.raw, v
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// reclaimIdle closes client connections idle between HTTP/1.1 requests,
// to make room under server.max_connections (see connCap.take): as many
// as nginx's ngx_drain_connections closes, an eighth of those idle, at
// least one and at most reclaimBatch, the goroutine engine's idle
// longest first, then the loops' idle longest. It returns how many it
// had closed (a loop's closes only if the connection is still idle, see
// clientConn.reclaimNow).
func (g *Gateway) reclaimIdle() int {
	var onLoops []idleOnLoop
	loops := g.tls.loops.Load()
	if loops != nil {
		onLoops = loops.idleConns()
	}
	n := max(min(reclaimBatch, (g.idle.len()+len(onLoops))/8), 1)
	done := g.idle.reclaim(n)
	if n -= done; n > 0 && len(onLoops) > 0 {
		slices.SortFunc(onLoops, func(a, b idleOnLoop) int { return a.deadline.Compare(b.deadline) })
		onLoops = onLoops[:min(n, len(onLoops))]
		loops.mark(onLoops)
		done += len(onLoops)
	}
	return done
}

// connState is the goroutine engine's ConnState (see watchHeads,
// idleConns and hijacks).
func (g *Gateway) connState(c net.Conn, s fasthttp.ConnState) {
	watchHeads(c, s)
	g.idle.connState(c, s)
	g.hijacks.connState(c, s)
}
