//go:build linux

package gateway

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/internal/h2loop"
)

// loopH2 is an h2c connection (prior knowledge) served on its event loop,
// an experiment behind server.http2.loops: internal/h2loop reads its
// frames and writes its answers, and each request whose stream arrived
// whole goes through the route's lifecycle as the loops' HTTP/1.1 requests
// do, on a clientConn of its own (h2Stream) whose "connection" turns the
// HTTP/1.1 answer the loop writes into HEADERS and DATA frames. The loops
// serve so the requests they can serve as HTTP/1.1 (see loopEngine); a
// request they would hand to the goroutine engine, and a response that
// would stream from a goroutine (a body past 64 KiB, or chunked), are
// served by a goroutine bridged to the loop instead (h2Bridge): an HTTP/2
// connection cannot leave its loop for one stream.
type loopH2 struct {
	c        gnet.Conn
	l        *loop
	core     *h2loop.Conn
	peer     netip.Addr
	peerText []byte
	free     []*h2Stream          // streams' request state for reuse
	feeding  bool                 // in core.Feed: answers are flushed at its end
	queued   bool                 // in its loop's h2Out
	ended    bool                 // the connection closed: bridged streams' tasks do nothing
	slot     *connSlot            // the connection's place under server.max_connections, freed when it closes
	remote   string               // the client's address for bridged streams; "" until one
	tls      *tls.ConnectionState // the bridged streams' r.TLS; nil on h2c
	outWait  []*h2Bridge          // bridged streams waiting for the client to read (see h2Bridge.credit)

	lastActive time.Time // when a stream was last seen open, or the connection began
	busy       bool      // a stream was open since the last flush
	wake       *time.Timer
	wakeAt     time.Time // when wake is due
	reading    bool      // wake is due by the read timeout of the requests arriving
	outSince   time.Time // since when the client leaves answers untaken; zero: it does not
	outLast    int       // the answer bytes untaken then
	woken      atomic.Bool
	pollDelay  time.Duration

	// The answers' header fields, and the strings of their names and
	// last values kept for the encoder, which may keep them in its table.
	fields []hpack.HeaderField
	lower  []byte
	names  map[string]string
	values map[string]string
}

// h2Stream is one request of a loopH2, served as the loops serve an
// HTTP/1.1 request.
type h2Stream struct {
	cc clientConn
	sc loopH2StreamConn
	h  *loopH2
	s  *h2loop.Stream
}

// loopH2StreamConn is the connection an h2Stream's clientConn writes its answer
// to: what it writes goes to the stream (loopH2.answer), and it never
// holds bytes of its own.
type loopH2StreamConn struct {
	gnet.Conn
	st *h2Stream
}

func (sc *loopH2StreamConn) Write(b []byte) (int, error) {
	sc.st.h.answer(sc.st, b)
	return len(b), nil
}

func (sc *loopH2StreamConn) OutboundBuffered() int { return 0 }
func (sc *loopH2StreamConn) InboundBuffered() int  { return 0 }

// Wake is the clientConn's call for its next turn: after a response that
// is to stream from a goroutine, which the stream cannot take (see
// loopH2), or to close after an answer, which the connection's own GOAWAY
// does instead.
func (sc *loopH2StreamConn) Wake(gnet.AsyncCallback) error {
	if st := sc.st; st.cc.state == stateStreaming {
		st.h.unstreamed(st)
	}
	return nil
}

// serveH2 makes the client connection, whose first bytes are the HTTP/2
// preface, an h2c connection on the loop.
func (cc *clientConn) serveH2() gnet.Action {
	srv := &cc.l.e.g.state.Load().cfg.Server
	h := &loopH2{c: cc.c, l: cc.l, peer: cc.peer, peerText: cc.peerText,
		names: map[string]string{}, values: map[string]string{}}
	if t := h.tlsConn(); t != nil {
		state := t.tc.ConnectionState()
		h.tls = &state
	}
	core, err := h2loop.NewConn(h2loop.Config{
		MaxConcurrentStreams: srv.HTTP2.MaxConcurrentStreams,
		MaxHeaderListSize:    srv.MaxHeaderBytes,
		StreamWindow:         srv.HTTP2.MaxStreamBufferBytes,
		ConnectProtocol:      WebSocketOverHTTP2(),
	}, h)
	if err != nil {
		cc.l.e.g.log.Error("serving h2c on a loop", "error", err)
		return gnet.Close
	}
	h.core = core
	cc.state = stateGone
	cc.wake.Stop()
	delete(cc.l.conns, cc)
	cc.l.h2[h] = struct{}{}
	h.slot, cc.slot = cc.slot, nil
	cc.c.SetContext(h)
	h.lastActive = time.Now()
	h.wakeAt = h.lastActive.Add(srv.IdleTimeout.D())
	c := cc.c
	h.wake = time.AfterFunc(srv.IdleTimeout.D(), func() {
		h.woken.Store(true)
		_ = c.Wake(nil)
	})
	return h.traffic()
}

// traffic reads the frames that arrived, unless the client has not read
// what was sent to it: then nothing more is taken from it (so it opens no
// stream) until it reads, and a client that floods meanwhile loses its
// connection.
func (h *loopH2) traffic() gnet.Action {
	c := h.c
	if h.woken.Swap(false) && h.idle() {
		return gnet.Close
	}
	if c.OutboundBuffered() > maxPendingOut {
		if c.InboundBuffered() > maxPendingIn || h.stalled(time.Now()) {
			return gnet.Close
		}
		h.poll()
		return gnet.None
	}
	h.pollDelay = 0
	if len(h.outWait) > 0 {
		h.unread()
	}
	buf, _ := c.Peek(-1)
	h.feeding = true
	n := h.core.Feed(buf)
	h.feeding = false
	if n > 0 {
		_, _ = c.Discard(n) // gnet's Discard(0) drops every byte buffered
	}
	if h.l.e.draining.Load() {
		h.core.Shutdown()
	}
	h.flush()
	if h.core.Closed() {
		return gnet.Close
	}
	if !h.reading && h.core.Active() > 0 {
		// A request may be arriving: server.read_timeout bounds it.
		h.reading = true
		if due := h.lastActive.Add(h.l.e.g.state.Load().cfg.Server.ReadTimeout.D()); due.Before(h.wakeAt) {
			h.wakeAt = due
			h.wake.Reset(due.Sub(h.lastActive))
		}
	}
	return gnet.None
}

// idle resets the streams whose requests have not arrived whole within
// server.read_timeout, and closes the connection (reporting true) after
// server.idle_timeout without a stream open, or once the gateway drains
// and its streams have ended; else it sets the wake timer again.
func (h *loopH2) idle() bool {
	srv := &h.l.e.g.state.Load().cfg.Server
	now := time.Now()
	oldest := h.core.ExpireArriving(now.Add(-srv.ReadTimeout.D()))
	if h.busy {
		// Streams were open until now (those just reset among them): the
		// idle time runs from their end, as flush would note it.
		h.lastActive = now
	}
	if h.l.e.draining.Load() {
		h.core.Shutdown()
	}
	if h.core.Active() == 0 && now.Sub(h.lastActive) >= srv.IdleTimeout.D() {
		h.core.Shutdown()
	}
	h.flush()
	if h.core.Closed() || h.stalled(now) {
		return true
	}
	h.wakeAt = now.Add(max(h.lastActive.Add(srv.IdleTimeout.D()).Sub(now), time.Second))
	if due := h.outSince.Add(srv.WriteTimeout.D()); !h.outSince.IsZero() && due.Before(h.wakeAt) {
		h.wakeAt = due
	}
	h.reading = !oldest.IsZero()
	if due := oldest.Add(srv.ReadTimeout.D()); h.reading && due.Before(h.wakeAt) {
		h.wakeAt = due
		if soon := now.Add(time.Millisecond); due.Before(soon) {
			h.wakeAt = soon
		}
	}
	h.wake.Reset(h.wakeAt.Sub(now))
	return false
}

// stalled reports whether the client has left the answers sent to it, or
// held back for its windows, untaken for server.write_timeout, as an
// HTTP/1.1 client that does not read; it notes when the wait began, again
// each time the client takes some.
func (h *loopH2) stalled(now time.Time) bool {
	pending := h.c.OutboundBuffered() + h.core.StalledBytes()
	switch {
	case pending == 0:
		h.outSince = time.Time{}
	case h.outSince.IsZero() || pending < h.outLast:
		h.outSince = now
	}
	h.outLast = pending
	return pending > 0 && now.Sub(h.outSince) >= h.l.e.g.state.Load().cfg.Server.WriteTimeout.D()
}

// awaitTaken brings the wake timer forward to when the answers the client
// leaves untaken have waited server.write_timeout.
func (h *loopH2) awaitTaken() {
	now := time.Now()
	h.stalled(now)
	if h.outSince.IsZero() {
		return
	}
	if due := h.outSince.Add(h.l.e.g.state.Load().cfg.Server.WriteTimeout.D()); due.Before(h.wakeAt) {
		h.wakeAt = due
		h.wake.Reset(max(due.Sub(now), time.Millisecond))
	}
}

// drain sends GOAWAY for a shutdown: the connection closes once its
// streams have ended.
func (h *loopH2) drain() {
	h.core.Shutdown()
	h.flush()
	if h.core.Closed() {
		_ = h.c.Close()
	}
}

// poll comes back to the connection shortly, to see whether the client
// has read what was sent to it (see clientConn.poll).
func (h *loopH2) poll() {
	h.pollDelay = min(max(2*h.pollDelay, time.Millisecond), maxPollDelay)
	c := h.c
	time.AfterFunc(h.pollDelay, func() { _ = c.Wake(nil) })
}

// flush writes the connection's output; a connection that is done then
// closes in its next event. It notes when a stream was last seen open: the
// idle timeout runs from then, so that frames that open no stream (PING,
// WINDOW_UPDATE, a frame trickled a byte at a time) do not keep a
// connection, as on net/http's HTTP/2 server.
func (h *loopH2) flush() {
	if n := h.core.Active(); n > 0 || h.busy {
		h.lastActive = time.Now()
		h.busy = n > 0
	}
	if out := h.core.Output(); len(out) > 0 {
		_, _ = h.c.Write(out)
		h.core.Sent()
	}
	if h.core.StalledBytes() > 0 || h.c.OutboundBuffered() > 0 {
		h.awaitTaken()
	}
	if h.core.Closed() && !h.feeding {
		_ = h.c.Wake(nil)
	}
}

// closed ends the connection: the requests still upstream are cancelled.
func (h *loopH2) closed() {
	h.ended = true
	h.wake.Stop()
	h.core.Close()
	h.l.e.conns.Add(-1)
	delete(h.l.h2, h)
	h.slot.release()
}

// Serve takes a request that arrived whole through its route's lifecycle,
// or to a goroutine (bridge) when the loops cannot serve it: among those
// a CONNECT, and a malformed request (s.Malformed), which the goroutine
// answers as net/http's HTTP/2 server and the gateway behind it do.
func (h *loopH2) Serve(s *h2loop.Stream) {
	h.busy = true
	st := h.stream()
	st.s, s.Value = s, st
	cc := &st.cc
	g := h.l.e.g
	state := g.state.Load()
	srv := &state.cfg.Server
	if s.Malformed || s.Method == http.MethodConnect || !h2Request(cc, s) {
		h.put(st)
		h.bridge(s, true)
		return
	}
	rt, ambiguous := state.route(&cc.head)
	if ambiguous != "" || (rt != nil && !rt.loop) || (srv.MaxBodyBytes > 0 && len(cc.body) > srv.MaxBodyBytes) {
		h.put(st)
		h.bridge(s, true)
		return
	}
	cc.begin(state, rt, time.Now())
}

// Cancel ends the request of a stream the client reset, or whose
// connection closed, as a client that leaves ends an HTTP/1.1 one.
func (h *loopH2) Cancel(s *h2loop.Stream) {
	if b, ok := s.Value.(*h2Bridge); ok {
		b.end()
		return
	}
	st := s.Value.(*h2Stream)
	cc := &st.cc
	switch cc.state {
	case stateBusy:
		cc.gone = true
		cc.cancel()
	case stateStreaming:
		h.dropStream(st)
	}
	h.put(st)
}

// dropStream drops the response that was to stream, with its upstream
// connection.
func (h *loopH2) dropStream(st *h2Stream) {
	cc := &st.cc
	cc.ctx.Response.Reset() // closes the body
	if cc.stream != nil {
		_ = cc.stream.Close()
		cc.stream = nil
	}
	cc.ctx.Request.Reset()
	cc.state = stateIdle
}

// stream returns a stream's request state, reused or new.
func (h *loopH2) stream() *h2Stream {
	if n := len(h.free); n > 0 {
		st := h.free[n-1]
		h.free = h.free[:n-1]
		return st
	}
	st := &h2Stream{h: h}
	st.sc = loopH2StreamConn{Conn: h.c, st: st}
	cc := &st.cc
	cc.c, cc.l, cc.peer, cc.peerText = &st.sc, h.l, h.peer, h.peerText
	cc.ctx.Init2(connAddrs{h.c}, fasthttpLogger{h.l.e.g.log}, false)
	return st
}

// put keeps st for another stream once its request has ended.
func (h *loopH2) put(st *h2Stream) {
	if st.s == nil {
		return
	}
	st.s.Value = nil
	h.recycle(st)
}

// recycle keeps st, whose stream is no longer its own, for another.
func (h *loopH2) recycle(st *h2Stream) {
	st.s = nil
	cc := &st.cc
	cc.gone, cc.closeNext, cc.wantClose = false, false, false
	if len(h.free) < 16 {
		h.free = append(h.free, st)
	}
}

// answer sends the HTTP/1.1 response b, which the stream's clientConn
// wrote, as the stream's HEADERS and DATA frames: its status, its header
// fields with lower-case names but the hop-by-hop ones, and its body.
func (h *loopH2) answer(st *h2Stream, b []byte) {
	s := st.s
	if s == nil {
		return
	}
	if code, body, ok := h.answerFields(b); ok {
		h.core.Respond(s, code, h.fields, body)
	} else {
		h.core.Reset(s, http2.ErrCodeInternal)
	}
	h.put(st)
	h.later()
}

// later sends the connection's output once the loop has handled the
// events it is handling (its upstream connections' answers, mostly), so
// that the answers that came together leave in one write; during Feed,
// traffic sends it at Feed's end.
func (h *loopH2) later() {
	if h.feeding || h.queued {
		return
	}
	h.queued = true
	l := h.l
	if l.h2Out = append(l.h2Out, h); len(l.h2Out) == 1 {
		l.e.execute(l, l.flushH2)
	}
}

// flushH2 sends the output of the loop's h2c connections that have some.
func (l *loop) flushH2() {
	for i, h := range l.h2Out {
		l.h2Out[i] = nil
		h.queued = false
		h.flush()
	}
	l.h2Out = l.h2Out[:0]
}
