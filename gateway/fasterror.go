package gateway

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// fastError answers a request that fasthttp refuses before the gateway's
// handler sees it (the server's ErrorHandler), with fasthttp's own status
// codes and the gateway's JSON body: 431 header_too_large for a head over
// server.max_header_bytes, 413 body_too_large for a body over
// server.max_body_bytes, 400 bad_request for a head or body fasthttp
// cannot read, or one with a line ending in bare LF (see headWatch), 505
// version_not_supported for a head of another version than HTTP/1.x with
// a Transfer-Encoding (fasthttp refuses the field in a request not
// HTTP/1.1; the handler refuses other such heads 505, see
// http1.RefusedHead; known when the head was looked at, see headWatch).
// fasthttp sends it and closes the connection after lingering
// (lingerAtClose), as after the gateway's own refusals (closeAfter): a
// client still sending its request would see a reset in place of the
// answer. A connection whose head did not come whole within
// server.read_header_timeout, none of it or part, is closed at once
// without an answer, as the loops, nginx and net/http close it (the
// client is not sending): fasthttp's answer finds the connection's write
// deadline passed.
func (g *Gateway) fastError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		writeError(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "header_too_large", 0)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, "body_too_large", 0)
	case errors.Is(err, fasthttp.ErrUnsupportedTransferEncoding) && otherVersion(ctx.Conn()):
		writeError(ctx, fasthttp.StatusHTTPVersionNotSupported, http1.RefusalReason(fasthttp.StatusHTTPVersionNotSupported), 0)
	case errors.As(err, &ne) && ne.Timeout():
		// The read's own error when nothing came; wrapped by fasthttp
		// when part of a head did.
		_ = ctx.Conn().SetWriteDeadline(time.Unix(1, 0))
		return
	default:
		writeError(ctx, fasthttp.StatusBadRequest, "bad_request", 0)
	}
	if c, ok := ctx.Conn().(interface {
		lingerAtClose(*lingerings, time.Duration)
	}); ok {
		c.lingerAtClose(&g.lingers, g.state.Load().cfg.Server.WriteTimeout.D())
	}
}

// otherVersion reports whether c, a connection of the goroutine engine,
// is reading or has read a head of another version than HTTP/1.x (see
// headWatch).
func otherVersion(c net.Conn) bool {
	w, ok := c.(interface{ otherVersion() bool })
	return ok && w.otherVersion()
}

// closeLinger makes the next Close of the goroutine engine's connection
// that holds it (sniffConn, prefixConn, tlsConn) a lingering close: fasthttp
// closes the connection after its own answers (see fastError), which it
// writes after any answer of the connection's still buffered. The
// goroutine that serves the connection asks for it; another may close the
// connection meanwhile (fasthttp's shutdown closes the connections it
// finds idle, one whose head has begun included), so what was asked is
// read and taken at once (atomically).
type closeLinger struct {
	at atomic.Pointer[lingerAt] // nil: Close closes
}

// lingerAt is a lingering close asked of a connection: on l, its last
// writes bounded by wt (none when zero).
type lingerAt struct {
	l  *lingerings
	wt time.Duration
}

// lingerAtClose has the connection's Close linger on l, its last writes
// bounded by wt (none when zero).
func (cl *closeLinger) lingerAtClose(l *lingerings, wt time.Duration) {
	cl.at.Store(&lingerAt{l: l, wt: wt})
}

// closing reports whether c, the connection's own, closes after lingering
// (on a goroutine of its own), as lingerAtClose asked.
func (cl *closeLinger) closing(c net.Conn) bool {
	at := cl.at.Swap(nil)
	if at == nil {
		return false
	}
	at.l.start(c, nil, at.wt)
	return true
}
