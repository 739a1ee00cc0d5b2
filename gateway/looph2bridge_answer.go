//go:build linux

package gateway

import (
	"net/http"
	"time"
)

// unstreamed continues on a goroutine the answer of a request the loops
// served, whose body turned out to stream from its upstream connection
// (past 64 KiB, chunked, an event stream): the bridge's writer sends it
// (h2Engine.writeBack) as the goroutine engine's HTTP/2 answers go, paced
// by the client's windows. Then the upstream connection goes back to its
// loop when it can serve again, and the request state to the connection.
func (h *loopH2) unstreamed(st *h2Stream) {
	b := h.newBridge(st.s)
	b.st, b.inEnd, b.up = st, true, st.cc.stream
	w := &bridgeWriter{b: b, head: http.Header{}, method: st.s.Method}
	h.l.e.bridged.add()
	go b.streamAnswer(w) // it ends with its stream, or its connection (see h2Bridge)
}

// streamAnswer sends the answer in b.st's request state through w; a body
// that breaks off resets the stream.
func (b *h2Bridge) streamAnswer(w *bridgeWriter) {
	defer b.h.l.e.bridged.done()
	defer b.cancel()
	cc := &b.st.cc
	if dl := cc.streamDeadline; !dl.IsZero() {
		_ = b.up.SetDeadline(dl) // the route's timeout bounds the body too
	}
	b.answer(w, func() {
		b.h.l.e.g.h2.writeBack(w, &http.Request{Method: w.method}, http.NewResponseController(w), &cc.ctx.Response)
	})
	cc.ctx.Response.Reset() // closes the body: streamReuse is known
	cc.ctx.Request.Reset()
	b.mu.Lock()
	up, gone := b.up, b.gone
	b.up = nil
	b.mu.Unlock()
	if gone {
		cc.streamReuse = false // end closed it
	}
	if !cc.streamReuse || up.SetDeadline(time.Time{}) != nil || enroll(cc.l.el, up, &upConn{l: cc.l, t: cc.streamTarget}) != nil {
		_ = up.Close()
	}
	l := b.h.l
	l.e.execute(l, func() {
		cc.stream, cc.state = nil, stateIdle
		if !b.h.ended {
			b.h.recycle(b.st)
		}
	})
}
