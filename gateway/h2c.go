package gateway

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/valyala/fasthttp"
)

// h2cPreface starts every HTTP/2 connection without TLS whose client knows
// the server speaks it (RFC 9113 section 3.3).
var h2cPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// isH2CPreface reports whether b, the first bytes of a connection, start
// the HTTP/2 preface (in full, or as much of it as has arrived).
func isH2CPreface(b []byte) bool {
	n := min(len(b), len(h2cPreface))
	return n > 0 && bytes.Equal(b[:n], h2cPreface[:n])
}

// serveFast is the goroutine engine's handler: it hands a plaintext
// connection whose request asks to upgrade to h2c to the HTTP/2 engine,
// and serves every other request itself (handle; over TLS, where h2c has
// no place, such a request is served on HTTP/1.1, its Upgrade dropped as
// hop-by-hop). (A connection that starts with the HTTP/2 preface never
// gets here: the loops and sniffConn hand it over first.)
func (g *Gateway) serveFast(ctx *fasthttp.RequestCtx) {
	if h := &ctx.Request.Header; h2cUpgrade(h) && !overTLS(ctx.Conn()) {
		// The request's head is given again to the HTTP/2 engine, which
		// answers 101 and then the request over HTTP/2, and reads what
		// follows on the connection.
		head := append([]byte(nil), h.Header()...)
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) { g.h2.upgrade(c, head) })
		return
	}
	g.handle(ctx)
}

// h2cUpgrade reports whether h is an HTTP/1.1 request without a body
// asking to upgrade to h2c, with its settings (RFC 7540 section 3.2):
// Upgrade names h2c, Connection names HTTP2-Settings, and one
// HTTP2-Settings header holds base64url. Any other request is served on
// HTTP/1.1 (its Upgrade is hop-by-hop): one with a body, as the upgrade
// lets a server choose; an HTTP/1.0 one, whose Upgrade a server ignores
// (RFC 9110 section 7.8); one the HTTP/2 engine would not upgrade.
func h2cUpgrade(h *fasthttp.RequestHeader) bool {
	up := h.Peek("Upgrade")
	if len(up) == 0 || !http1.HasToken(up, "h2c") || !h.IsHTTP11() {
		return false
	}
	if cl := h.ContentLength(); cl != 0 && cl != -2 { // -2: no length and not chunked, so no body
		return false
	}
	if !http1.HasToken(http1.OneList(h.PeekAll("Connection")), "HTTP2-Settings") {
		return false
	}
	settings := h.PeekAll("Http2-Settings") // (reuses what PeekAll returned before)
	return len(settings) == 1 && base64URL(settings[0])
}

// base64URL reports whether b is base64url without padding (RFC 4648
// section 5), as HTTP2-Settings is.
func base64URL(b []byte) bool {
	_, err := base64.RawURLEncoding.DecodeString(string(b))
	return err == nil
}

// sniffListener gives the goroutine engine, when it serves the plaintext
// listener itself, connections that hand themselves to the HTTP/2 engine
// when they start with the HTTP/2 preface (which fasthttp cannot parse).
type sniffListener struct {
	net.Listener
	h2 *h2Engine
}

func (l sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, h2: l.h2}, nil
}

// sniffConn looks at the first bytes read from a connection: the HTTP/2
// preface gives the connection, with those bytes, to the HTTP/2 engine, and
// its reader sees the end of the connection; anything else is read as it
// came. Only the goroutine that serves the connection reads it.
type sniffConn struct {
	net.Conn
	h2      *h2Engine
	sniffed bool
	// gone is set once the connection is handed over: Close leaves it
	// alone then. fasthttp's shutdown may close a connection still
	// waiting for its first byte (closeIdleConns) while its reader sniffs.
	gone atomic.Bool
	closeLinger
	headWatch
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if err := c.refused(); err != nil {
		return 0, err
	}
	if c.sniffed {
		n, err := c.Conn.Read(p)
		return c.read(p, n, err)
	}
	c.sniffed = true
	n, err := c.Conn.Read(p)
	for err == nil && n < len(h2cPreface) && n < len(p) && isH2CPreface(p[:n]) {
		var m int
		m, err = c.Conn.Read(p[n:])
		n += m
	}
	if n < len(h2cPreface) || !isH2CPreface(p[:n]) {
		return c.read(p, n, err)
	}
	c.gone.Store(true)
	c.h2.deliver(&prefixConn{Conn: c.Conn, prefix: bytes.Clone(p[:n])})
	return 0, io.EOF
}

func (c *sniffConn) Close() error {
	if c.gone.Load() || c.closing(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

// SyscallConn gives the socket while the connection is the goroutine
// engine's (see clientWatch).
func (c *sniffConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok || c.gone.Load() {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
