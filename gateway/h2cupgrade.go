package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
)

// The upgrade to h2c (RFC 7540 section 3.2, deprecated by RFC 9113 but
// what curl --http2 sends for http:// URLs) is the one thing net/http does
// not do itself: golang.org/x/net/http2/h2c answers the request's 101 and
// serves the connection with an HTTP/2 server of its own, whose limits
// are the engine's and which shuts down with it.

// upgrades is the HTTP/2 engine's state for upgraded connections.
type upgrades struct {
	srv *http2.Server
	// hooks runs srv's graceful shutdown (a GOAWAY on each connection,
	// closed once its requests have ended): http2.ConfigureServer
	// registers it there. It serves nothing.
	hooks *http.Server

	mu    sync.Mutex // protects conns
	conns map[*hijackedConn]struct{}
}

// handler is the HTTP/2 engine's handler: ServeHTTP, with the upgrade of
// an HTTP/1.1 request without a body to h2c done first. (Prior knowledge
// needs nothing: net/http serves a connection that starts with the
// preface on HTTP/2 itself.) A request with a body is served on HTTP/1.1,
// as the upgrade lets a server choose: h2c would read its body whole into
// memory, without bound, before answering 101.
func (e *h2Engine) handler(cfg *config.Config) http.Handler {
	s := cfg.Server
	e.up.srv = &http2.Server{
		MaxConcurrentStreams:     uint32(s.HTTP2.MaxConcurrentStreams),
		MaxUploadBufferPerStream: int32(s.HTTP2.MaxStreamBufferBytes),
		IdleTimeout:              s.IdleTimeout.D(),
		WriteByteTimeout:         s.WriteTimeout.D(),
	}
	e.up.hooks = &http.Server{}
	_ = http2.ConfigureServer(e.up.hooks, e.up.srv) // fails only for a TLS configuration, which hooks has none of
	e.up.conns = map[*hijackedConn]struct{}{}
	up := h2c.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, h1 := w.(http.Hijacker); !h1 {
			asHTTP2(r)
		}
		e.ServeHTTP(w, r)
	}), e.up.srv)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.TLS == nil && r.ContentLength == 0 && http1.HasToken([]byte(r.Header.Get("Upgrade")), "h2c") {
			up.ServeHTTP(w, r)
			return
		}
		e.ServeHTTP(w, r)
	})
}

// asHTTP2 makes r, the request of an upgrade to h2c, which h2c answers on
// stream 1 over HTTP/2 but leaves as it came, an HTTP/2 request: marked
// HTTP/2.0, without its hop-by-hop headers (Connection, Upgrade,
// HTTP2-Settings and those Connection names), which HTTP/2 has none of.
// Left as they came, an Upgrade naming websocket beside h2c made it a
// WebSocket handshake, whose upstream answer could not be carried.
func asHTTP2(r *http.Request) {
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	conn := []byte(strings.Join(r.Header.Values("Connection"), ", "))
	for k := range r.Header {
		if http1.IsHop([]byte(k), conn) {
			delete(r.Header, k)
		}
	}
}

// upgrade serves c, a connection fasthttp gave up whose request asks to
// upgrade to h2c, on the HTTP/2 engine, with the request's head put back
// in front. It returns once the engine has closed the connection: fasthttp
// then closes c.
func (e *h2Engine) upgrade(c net.Conn, head []byte) {
	raw := c
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		raw = u.UnsafeConn()
	}
	hc := &hijackedConn{Conn: &prefixConn{Conn: c, prefix: head}, raw: raw,
		local: c.LocalAddr(), remote: c.RemoteAddr(), done: make(chan struct{})}
	e.up.mu.Lock()
	e.up.conns[hc] = struct{}{}
	e.up.mu.Unlock()
	e.deliver(hc)
	<-hc.done
	e.up.mu.Lock()
	delete(e.up.conns, hc)
	e.up.mu.Unlock()
}

// shutdownUpgrades sends each upgraded connection a GOAWAY and waits for
// them to close, or for ctx to end, when it closes those left.
func (e *h2Engine) shutdownUpgrades(ctx context.Context) error {
	_ = e.up.hooks.Shutdown(ctx)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		e.up.mu.Lock()
		n := len(e.up.conns)
		if n == 0 || ctx.Err() != nil {
			for hc := range e.up.conns {
				_ = hc.Close()
			}
		}
		e.up.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// hijackedConn is a connection fasthttp hijacked and gave the HTTP/2
// engine. fasthttp reuses what it gave once the hijack handler returns
// (upgrade, on done), so nothing touches it after Close: Close closes the
// socket (raw), which ends the reads and writes in progress, waits for
// them to return, and only then reports done; later calls fail.
type hijackedConn struct {
	net.Conn
	raw           net.Conn
	local, remote net.Addr

	mu     sync.RWMutex // held for reading by each use of Conn; protects closed
	closed bool
	once   sync.Once
	done   chan struct{}
}

// use reports whether Conn may be used, holding mu for reading if so.
func (c *hijackedConn) use() bool {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return false
	}
	return true
}

func (c *hijackedConn) Read(p []byte) (int, error) {
	if !c.use() {
		return 0, net.ErrClosed
	}
	defer c.mu.RUnlock()
	return c.Conn.Read(p)
}

func (c *hijackedConn) Write(p []byte) (int, error) {
	if !c.use() {
		return 0, net.ErrClosed
	}
	defer c.mu.RUnlock()
	return c.Conn.Write(p)
}

func (c *hijackedConn) SetDeadline(t time.Time) error {
	if !c.use() {
		return net.ErrClosed
	}
	defer c.mu.RUnlock()
	return c.Conn.SetDeadline(t)
}

func (c *hijackedConn) SetReadDeadline(t time.Time) error {
	if !c.use() {
		return net.ErrClosed
	}
	defer c.mu.RUnlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *hijackedConn) SetWriteDeadline(t time.Time) error {
	if !c.use() {
		return net.ErrClosed
	}
	defer c.mu.RUnlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *hijackedConn) LocalAddr() net.Addr  { return c.local }
func (c *hijackedConn) RemoteAddr() net.Addr { return c.remote }

func (c *hijackedConn) Close() error {
	c.once.Do(func() {
		_ = c.raw.Close()
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.done)
	})
	return nil
}
