package gateway

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"
)

// ServeHTTP serves one request of the HTTP/2 and TLS engine through the
// same handler as the goroutine engine's (a host that is not one, which
// the HTTP/1.1 engines refuse, is refused with a 400): the request becomes a
// fasthttp request on a connection of its own kind (h2Conn), the route's
// lifecycle runs, and its response is written back through w, streamed
// as it arrives.
func (e *h2Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, _ := e.ctxs.Get().(*fasthttp.RequestCtx)
	if ctx == nil {
		ctx = new(fasthttp.RequestCtx)
	}
	defer e.ctxs.Put(ctx)
	rc := http.NewResponseController(w)
	conn := &h2Conn{remote: tcpAddr(r.RemoteAddr), tls: r.TLS, rc: rc, gone: r.Context().Done(), stop: make(chan struct{})}
	ctx.Init2(conn, fasthttpLogger{e.g.log}, true)
	ctx.Request.Reset()
	ctx.Response.Reset()
	defer func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
	}()
	toFast(&ctx.Request, r)
	if !httpguts.ValidHostHeader(r.Host) {
		// net/http's HTTP/2 server takes any :authority; fasthttp, whose
		// request gets it as Host, would lose the path to it.
		writeError(ctx, fasthttp.StatusBadRequest, "bad_request", 0)
		var o observation
		o.begin(ctx.Request.Header.PeekBytes(hdrRequestID))
		e.g.finish(ctx, nil, time.Now(), "bad_request", &o)
		e.writeBack(w, r, rc, &ctx.Response)
		return
	}
	if e.g.serveStd(ctx, w, r) {
		return
	}
	e.g.handle(ctx)
	e.writeBack(w, r, rc, &ctx.Response)
}

// toFast makes req the fasthttp form of r: an HTTP/1.1 request with r's
// method, target, host (r.Host) and headers, and r's body as its stream.
func toFast(req *fasthttp.Request, r *http.Request) {
	h := &req.Header
	h.SetMethod(r.Method)
	h.SetRequestURI(r.RequestURI)
	h.SetProtocolBytes(http11)
	h.SetHost(r.Host)
	for k, vs := range r.Header {
		if k == "Host" {
			// HTTP/2 keeps a Host header beside :authority, which net/http
			// made r.Host (RFC 9113 section 8.3.1): the request is routed,
			// and named upstream, by that one host.
			continue
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		// Not a Closer: fasthttp closes the stream it replaces (prepare
		// does), and net/http closes r.Body itself once ServeHTTP returns.
		req.SetBodyStream(struct{ io.Reader }{r.Body}, int(r.ContentLength)) // -1: of unknown length
	}
}

// writeBack sends resp through w: its status, its headers but the
// hop-by-hop ones, and its body, flushed as it arrives from a stream, each
// write bounded by server.write_timeout.
func (e *h2Engine) writeBack(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, resp *fasthttp.Response) {
	wh := w.Header()
	var conn []byte
	resp.Header.VisitAll(func(k, v []byte) {
		if http1.EqualName(k, "Connection") {
			conn = append(conn, v...)
		}
	})
	resp.Header.VisitAll(func(k, v []byte) {
		if !http1.IsHop(k, conn) && !http1.EqualName(k, "Content-Length") && !http1.EqualName(k, "Date") {
			wh[http.CanonicalHeaderKey(string(k))] = append(wh[http.CanonicalHeaderKey(string(k))], string(v))
		}
	})
	if r.ProtoMajor == 1 && resp.ConnectionClose() {
		wh.Set("Connection", "close")
	}
	stream := resp.BodyStream()
	code := resp.StatusCode()
	switch cl := resp.Header.ContentLength(); {
	case code < 200 || code == http.StatusNoContent || code == http.StatusNotModified:
	case stream == nil && r.Method != http.MethodHead:
		wh.Set("Content-Length", itoa(len(resp.Body())))
	case cl >= 0:
		wh.Set("Content-Length", itoa(cl))
	}
	w.WriteHeader(code)
	wt := e.g.state.Load().cfg.Server.WriteTimeout.D()
	if stream == nil {
		if r.Method != http.MethodHead {
			_ = rc.SetWriteDeadline(time.Now().Add(wt))
			_, _ = w.Write(resp.Body())
		}
		return
	}
	defer resp.CloseBodyStream()
	if r.Method == http.MethodHead {
		return
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	for {
		n, err := stream.Read(*buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(wt))
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// The body broke off: the client must not take what it
				// got for the whole.
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// copyBufs holds the buffers response bodies stream through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// h2Conn is what the goroutine engine's handler sees as the connection of a
// request of the HTTP/2 and TLS engine: its peer's address, whether it is
// TLS, write deadlines that bound the response's writes, and when the
// client left (a streamConn, for clientWatch). It is never read or
// written: the engine does that.
type h2Conn struct {
	remote net.Addr
	tls    *tls.ConnectionState
	rc     *http.ResponseController
	gone   <-chan struct{} // the request's context's Done
	stop   chan struct{}   // closed by SetReadDeadline with a time that has passed
	once   sync.Once
}

func (c *h2Conn) left() <-chan struct{}      { return c.gone }
func (c *h2Conn) unwatched() <-chan struct{} { return c.stop }

func (c *h2Conn) Read([]byte) (int, error)    { return 0, net.ErrClosed }
func (c *h2Conn) Write([]byte) (int, error)   { return 0, net.ErrClosed }
func (c *h2Conn) Close() error                { return nil }
func (c *h2Conn) LocalAddr() net.Addr         { return h2cAddr{} }
func (c *h2Conn) RemoteAddr() net.Addr        { return c.remote }
func (c *h2Conn) SetDeadline(time.Time) error { return nil }
func (c *h2Conn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && t.Before(time.Now()) {
		c.once.Do(func() { close(c.stop) })
	}
	return nil
}
func (c *h2Conn) SetWriteDeadline(t time.Time) error { return c.rc.SetWriteDeadline(t) }

// overTLS reports whether c, a request's connection on the goroutine
// engine's handler, came over the TLS listener: HTTP/2 (an h2Conn with
// TLS) or HTTP/1.1 (a tlsConn).
func overTLS(c net.Conn) bool {
	switch c := c.(type) {
	case *h2Conn:
		return c.tls != nil
	case *tlsConn:
		return true
	}
	return false
}

// tcpAddr parses a net/http request's RemoteAddr ("ip:port").
func tcpAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}
