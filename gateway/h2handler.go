package gateway

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/internal/http1"
)

// ServeHTTP serves one request of the HTTP/2 and TLS engine through the
// same handler as the goroutine engine's (no host, a host that is not one, or a
// :path with a space, which the HTTP/1.1 engines refuse, or a request
// that names a second host, is refused with a 400): the request becomes a
// fasthttp request on a connection of its own kind (h2Conn), the route's
// lifecycle runs, and its response is written back through w, streamed
// as it arrives.
func (e *h2Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, _ := e.ctxs.Get().(*fasthttp.RequestCtx)
	if ctx == nil {
		ctx = new(fasthttp.RequestCtx)
	}
	defer e.ctxs.Put(ctx)
	conn := &h2Conn{tls: r.TLS, rc: *http.NewResponseController(w), gone: r.Context().Done(), stop: make(chan struct{})}
	conn.setRemote(r.RemoteAddr)
	rc := &conn.rc
	ctx.Init2(conn, fasthttpLogger{e.g.log}, true)
	ctx.Request.Reset()
	ctx.Response.Reset()
	defer func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
	}()
	toFast(&ctx.Request, r)
	if r.Host == "" || !http1.ValidHost([]byte(r.Host)) || !lineTarget(r.RequestURI) || !oneLength(r.Header["Content-Length"]) || !oneHost(r) || bodyMissing(r) {
		// A request that names no host (an empty :authority, no host
		// field) is malformed (RFC 9113 section 8.3.1), as nginx finds it.
		// net/http's HTTP/2 server takes any :authority; fasthttp, whose
		// request gets it as Host, would lose the path to it, and the
		// upstream reads it as X-Forwarded-Host: it must be a host and
		// port, as an HTTP/1.1 Host (http1.ValidHost). It takes a
		// :path with spaces, which fasthttp escapes in the path but not in
		// the query: the upstream's request line would break at them. It
		// takes the first of several content-length fields, too, where
		// another reader would take the last: a request whose fields
		// disagree, or are no length, is malformed (RFC 9113 section
		// 8.1.1), and so is one whose content-length promises a body
		// that never comes (bodyMissing). A request that names a second
		// host, in its :path or a host field, is refused as nginx refuses
		// it (see oneHost).
		writeError(ctx, fasthttp.StatusBadRequest, "bad_request", 0)
		var o observation
		o.begin(ctx.Request.Header.PeekBytes(hdrRequestID))
		e.g.finish(ctx, nil, time.Now(), "bad_request", &o)
		e.writeBack(w, r, rc, &ctx.Response)
		return
	}
	if isH2WebSocket(r) && e.g.serveH2WebSocket(ctx, w, r) {
		return
	}
	if e.g.serveStd(ctx, w, r) {
		return
	}
	e.g.handle(ctx)
	e.writeBack(w, r, rc, &ctx.Response)
}

// lineTarget reports whether target, a request's :path (or HTTP/1.1
// target), could be an HTTP/1.1 request line's target as is: it holds no
// space or control byte (nginx refuses such a :path; raw bytes past ASCII,
// which HTTP/1.1 request lines carry, pass).
func lineTarget(target string) bool {
	for i := range len(target) {
		if target[i] <= ' ' || target[i] == 0x7f {
			return false
		}
	}
	return true
}

// oneHost reports whether r names one host, its :authority (r.Host): its
// :path is an absolute path, neither in absolute form ("http://a/b":
// net/http takes it, while the gateway routes by :authority and sends the
// path alone) nor "*" (the asterisk form, refused on HTTP/1.1 too), and
// its host fields, if any, say the same host in any case (RFC 9113 section
// 8.3.1: a server should treat a request whose host differs from
// :authority as malformed). nginx refuses all three; a proxy or upstream
// that reads the other host would disagree with the gateway's routing and
// X-Forwarded-Host. A CONNECT's :authority is its target, with no :path
// (an extended CONNECT's, a WebSocket's, has one).
func oneHost(r *http.Request) bool {
	connect := r.Method == http.MethodConnect && r.Header[":protocol"] == nil
	if !connect && !strings.HasPrefix(r.RequestURI, "/") {
		return false
	}
	for _, v := range r.Header["Host"] {
		if !strings.EqualFold(v, r.Host) {
			return false
		}
	}
	return true
}

// oneLength reports whether a request's content-length fields vs, if any,
// all say the same length, in digits (RFC 9110 section 8.6) that an int64
// holds. net/http's HTTP/2 server reads another value as a length of 0,
// and resets the stream only at its body, once the request has gone
// upstream.
func oneLength(vs []string) bool {
	for _, v := range vs {
		if v != vs[0] || v == "" || strings.TrimLeft(v, "0123456789") != "" {
			return false
		}
	}
	if len(vs) > 0 {
		if _, err := strconv.ParseInt(vs[0], 10, 64); err != nil {
			return false
		}
	}
	return true
}

// bodyMissing reports whether r, a request of net/http's HTTP/2 server
// whose content-length fields oneLength accepted, declares a length
// above 0 but ended with its HEADERS (END_STREAM): net/http's server
// then gives it no body and a ContentLength of 0, and the upstream would
// wait for the promised bytes. RFC 9113 section 8.1.1 makes the request
// malformed, a HEAD's too; nginx answers 400, the loops reset the stream
// (PROTOCOL_ERROR).
func bodyMissing(r *http.Request) bool {
	vs := r.Header["Content-Length"]
	return len(vs) > 0 && r.ContentLength == 0 && strings.TrimLeft(vs[0], "0") != ""
}

// toFast makes req the fasthttp form of r: an HTTP/1.1 request with r's
// method, target, host (r.Host) and headers, and r's body as its stream,
// which ends with the trailers r announced (see trailedBody). A target
// that starts with several slashes starts with one, as the HTTP/1.1
// engines' paths do (an HTTP/2 request names its host in :authority,
// never in its target).
func toFast(req *fasthttp.Request, r *http.Request) {
	h := &req.Header
	h.SetMethod(r.Method)
	uri := r.RequestURI
	for len(uri) > 1 && uri[0] == '/' && uri[1] == '/' {
		uri = uri[1:]
	}
	h.SetRequestURI(uri)
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
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	// Not a Closer: fasthttp closes the stream it replaces (prepare
	// does), and net/http closes r.Body itself once ServeHTTP returns.
	var body io.Reader = struct{ io.Reader }{r.Body}
	size := int(r.ContentLength) // -1: of unknown length
	if names := announceTrailers(h, r.Trailer); len(names) > 0 {
		body, size = &trailedBody{r: r, h: h, names: names}, -1 // chunked, for its trailer section
	}
	req.SetBodyStream(body, size)
}

// announceTrailers announces on h the trailers of trailer (a request's
// Trailer, its values not yet read) that an HTTP/1.1 trailer section may
// carry, and returns their names: end-to-end ones that fasthttp does not
// refuse (as it refuses Host, Content-Length, Authorization and the like),
// but those the gateway drops from a trailer section (see trailerClaim;
// the trace context among them: a trailer of the same name would move the
// gateway's own value to the trailer section). net/http's HTTP/2 server
// keeps only the trailers a request announced in its Trailer header; its
// HTTP/1.1 server keeps any.
func announceTrailers(h *fasthttp.RequestHeader, trailer http.Header) []string {
	var names []string
	for k := range trailer {
		kb := []byte(k)
		if !trailerClaim(kb) && h.AddTrailer(k) == nil {
			names = append(names, k)
		}
	}
	return names
}

// trailedBody is the body of a request with trailers: once r's body ends,
// the values of r's trailers named (the ones announced) are set on h, whose
// trailer section fasthttp then writes to an HTTP/1.1 target; or, when out
// is not nil (the request goes to an h2 or h2c target), on out, the
// trailers the HTTP/2 transport sends (see upstream.TrailedBody).
type trailedBody struct {
	r     *http.Request
	h     *fasthttp.RequestHeader
	names []string
	out   http.Header
}

func (b *trailedBody) Read(p []byte) (int, error) {
	n, err := b.r.Body.Read(p)
	if errors.Is(err, io.EOF) {
		for _, k := range b.names {
			for _, v := range b.r.Trailer[k] {
				if b.out != nil {
					b.out.Add(k, v)
				} else {
					b.h.Add(k, v)
				}
			}
		}
	}
	return n, err
}

// Trailer returns the trailers an HTTP/2 target is sent: nil unless
// reannounceTrailers prepared the body for one.
func (b *trailedBody) Trailer() http.Header { return b.out }

// reannounceTrailers announces again, for target t, the trailers of req's
// body when it is a trailedBody, on req's header, from which
// removeHopRequest removed the Trailer header (the client's announcement,
// which the gateway's own replaces), but for those the route's rules
// (nil: none) set or remove: they are dropped, as the rules drop such
// headers (announced, the rules' value would go in the trailer section,
// beside the client's). An h2 or h2c target is sent the same trailers,
// named in the body's own map rather than on req's header (see
// trailedBody). gRPC calls take another path (grpcCall.request), which
// sends no trailers.
func reannounceTrailers(req *fasthttp.Request, t *target, rules *routeRules) {
	b, ok := req.BodyStream().(*trailedBody)
	if !ok {
		return
	}
	if rules != nil {
		b.names = slices.DeleteFunc(b.names, func(k string) bool { return rules.request.drops([]byte(k)) })
	}
	if t.H2 != nil {
		// Not on req's header: the HTTP/2 transport's writer reads the
		// body, and may still do so once the answer is back and the
		// request is gone (reset, or serving another client).
		b.out = make(http.Header, len(b.names))
		for _, k := range b.names {
			b.out[k] = nil
		}
		return
	}
	for _, k := range b.names {
		_ = b.h.AddTrailer(k) // accepted before
	}
}

// writeBack sends resp through w: its status, its headers but the
// hop-by-hop ones, and its body, flushed as it arrives from a stream, each
// write bounded by server.write_timeout (the pauses between them are not).
func (e *h2Engine) writeBack(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, resp *fasthttp.Response) {
	wh := w.Header()
	copyHeader(wh, &resp.Header)
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
			// Lifted once the part is sent: the write timeout bounds a
			// client that does not read, not a pause of the upstream
			// (net/http's HTTP/2 server resets a stream whose deadline
			// passes with nothing to write).
			_ = rc.SetWriteDeadline(time.Time{})
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

// copyHeader adds h's end-to-end headers but Content-Length and Date (which
// net/http's server sets) to wh. Their names and values are cut from one
// string, and the values' slices from one array: a response's headers cost
// two allocations (and the map's), not three each.
func copyHeader(wh http.Header, h *fasthttp.ResponseHeader) {
	conn := http1.OneList(h.PeekAll("Connection"))
	keep := func(k []byte) bool {
		return !http1.IsHop(k, conn) && !http1.EqualName(k, "Content-Length") && !http1.EqualName(k, "Date")
	}
	n, size := 0, 0
	for k, v := range h.All() {
		if keep(k) {
			n, size = n+1, size+len(k)+len(v)
		}
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(size)
	for k, v := range h.All() {
		if keep(k) {
			b.Write(k)
			b.Write(v)
		}
	}
	text := b.String()
	values := make([]string, n)
	i, at := 0, 0
	for k, v := range h.All() {
		if !keep(k) {
			continue
		}
		name := http.CanonicalHeaderKey(text[at : at+len(k)]) // no copy when canonical, as fasthttp makes them
		values[i] = text[at+len(k) : at+len(k)+len(v)]
		if vs, ok := wh[name]; ok {
			wh[name] = append(vs, values[i])
		} else {
			wh[name] = values[i : i+1 : i+1]
		}
		i, at = i+1, at+len(k)+len(v)
	}
}

// answerTrailer reports whether an answer's trailer field k may reach an
// HTTP/2 client: not a field RFC 9110 section 6.5.1 keeps out of a trailer
// section (Content-Length, Host, Authorization and the others net/http's
// HTTP/2 server drops: httpguts.ValidTrailerHeader), nor a
// connection-specific one (Connection, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, TE, Upgrade), which makes an HTTP/2 message malformed
// (RFC 9113 section 8.2.2): its client would reset the stream.
func answerTrailer(k string) bool {
	return httpguts.ValidTrailerHeader(k) && !strings.EqualFold(k, "Upgrade")
}

// copyBufs holds the buffers response bodies stream through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// h2Conn is what the goroutine engine's handler sees as the connection of a
// request of the HTTP/2 and TLS engine: its peer's address, whether it is
// TLS, write deadlines that bound the response's writes, and when the
// client left (a streamConn, for clientWatch). It is never read or
// written: the engine does that.
type h2Conn struct {
	remote net.TCPAddr
	ip     [16]byte // remote.IP's array
	tls    *tls.ConnectionState
	rc     http.ResponseController
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
func (c *h2Conn) RemoteAddr() net.Addr        { return &c.remote }
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

// setRemote sets c's peer address from a net/http request's RemoteAddr
// ("ip:port"); it stays the zero address when s is not one.
func (c *h2Conn) setRemote(s string) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return
	}
	a, ip := ap.Addr(), c.ip[:]
	if a.Is4() {
		v4 := a.As4()
		ip = ip[:copy(ip, v4[:])]
	} else {
		c.ip = a.As16()
	}
	c.remote = net.TCPAddr{IP: ip, Port: int(ap.Port()), Zone: a.Zone()}
}
