package gateway

import (
	"bytes"
	"context"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// After an answer that closes a connection whose request body is still
// coming, the gateway reads and drops what the client sends for at most
// lingerTime, waiting at most lingerTimeout for each read, before it closes
// the connection, as nginx's lingering close does (lingering_time,
// lingering_timeout): closing a socket with unread bytes resets it, and a
// client that sends its whole body before it reads would see the reset,
// not the answer.
const (
	lingerTime    = 5 * time.Second
	lingerTimeout = time.Second
)

// closeAfter makes ctx's answer, a small one of the gateway's own that
// refuses the request or its body on HTTP/1.x, the connection's last: it
// is sent with Connection: close, the sending side is shut, and the
// connection closes after its lingering (see lingerTime), once the client
// closes, or at shutdown. The connection is taken from fasthttp (hijacked)
// to do so. Nothing changes on HTTP/2, where the stream ends with the
// handler.
func (g *Gateway) closeAfter(ctx *fasthttp.RequestCtx) {
	c := ctx.Conn()
	if _, h2 := c.(*h2Conn); h2 || ctx.Response.IsBodyStream() {
		return
	}
	ctx.SetConnectionClose()
	if ctx.IsHead() {
		ctx.Response.SkipBody = true
	}
	var answer bytes.Buffer
	if _, err := ctx.Response.WriteTo(&answer); err != nil {
		return // fasthttp sends it, then closes
	}
	ctx.HijackSetNoResponse(true)
	wt := g.state.Load().cfg.Server.WriteTimeout.D()
	g.hijacks.hijack(ctx, func(net.Conn) { g.lingers.close(c, answer.Bytes(), wt) }, nil)
}

// maxDiscard is the most of a request body left unread after the
// gateway's answer that is read and dropped, once the answer is sent, to
// keep the connection open (fasthttp does so), as nginx discards a body it
// does not read. More than that, or a body of unknown length (chunked),
// closes the connection after a lingering close (see closeUnread).
const maxDiscard = 256 << 10

// closeUnread makes ctx's answer the connection's last, with a lingering
// close (closeAfter), when the request's body is left unread past
// maxDiscard bytes or has no length: read is how much of it was read,
// ended whether all of it was. (fasthttp would close such a connection
// without lingering, and a client still sending its body could see a
// reset in place of the answer.)
func (g *Gateway) closeUnread(ctx *fasthttp.RequestCtx, read int64, ended bool) {
	cl := ctx.Request.Header.ContentLength()
	if ended || cl == 0 || cl == -2 || ctx.Hijacked() { // -2: no body
		return
	}
	if cl == -1 || int64(cl)-read > maxDiscard {
		g.closeAfter(ctx)
	}
}

// lingerings are the connections closing after their last answer (see
// closeAfter). The zero value is ready.
type lingerings struct {
	mu      sync.Mutex // protects conns and stopped
	conns   map[net.Conn]struct{}
	stopped bool
	// running counts the lingering closes under way, from their start
	// until their socket is closed (see wait).
	running inFlight
}

// start runs close on a goroutine of its own, counted by wait from now.
func (l *lingerings) start(c net.Conn, answer []byte, wt time.Duration) {
	l.running.add()
	go func() {
		defer l.running.done()
		l.close(c, answer, wt)
	}()
}

// close sends answer on c (within wt, when not zero), shuts c's sending
// side, reads and drops what comes for the lingering time, and closes c.
func (l *lingerings) close(c net.Conn, answer []byte, wt time.Duration) {
	l.running.add()
	defer l.running.done()
	defer c.Close()
	if !l.add(c) {
		return
	}
	defer l.remove(c)
	if wt > 0 && !l.arm(c.SetWriteDeadline, time.Now().Add(wt)) {
		return
	}
	if _, err := c.Write(answer); err != nil {
		return
	}
	closeWrite(c)
	end := time.Now().Add(lingerTime)
	buf := make([]byte, 16<<10)
	for {
		d := time.Now().Add(lingerTimeout)
		if d.After(end) {
			d = end
		}
		if !time.Now().Before(end) || !l.arm(c.SetReadDeadline, d) {
			return
		}
		if _, err := c.Read(buf); err != nil {
			return // the client closed, the wait ended, or shutdown
		}
	}
}

func (l *lingerings) add(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	if l.conns == nil {
		l.conns = map[net.Conn]struct{}{}
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *lingerings) remove(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// arm sets a deadline of a connection (set: its SetReadDeadline or
// SetWriteDeadline) to d unless shutdown has begun (under mu, so that
// stop's deadline in the past is never replaced).
func (l *lingerings) arm(set func(time.Time) error, d time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	return set(d) == nil
}

// stop ends every lingering at once (a write or a read under way
// included), and those to come before they begin.
func (l *lingerings) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for c := range l.conns {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
}

// wait, after stop, returns once every lingering close started has closed
// its socket (at once after stop, but for the close of a TLS connection,
// which sends its close_notify within its own bound), or when ctx ends.
func (l *lingerings) wait(ctx context.Context) {
	select {
	case <-l.running.idle():
	case <-ctx.Done():
	}
}

// closeWrite shuts c's sending side when it can (TCP, TLS): the client
// reads the end of the connection after the answer.
func closeWrite(c net.Conn) {
	for {
		switch w := c.(type) {
		case interface{ CloseWrite() error }:
			_ = w.CloseWrite()
			return
		case *sniffConn:
			c = w.Conn
		case *prefixConn:
			c = w.Conn
		default:
			return
		}
	}
}
