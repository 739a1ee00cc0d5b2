package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/config"
)

// h2Engine is the third engine, on net/http: it serves HTTP/2, over TLS
// (the TLS listener hands it the connections whose ALPN chose h2,
// tlsmux.go) and without (h2c: the loops and the goroutine engine hand it
// the plaintext connections that speak it, h2c.go). Its requests drive
// the same lifecycle as the other engines' (h2handler.go). HTTP/2 flow control paces a client that
// sends a body faster than the upstream takes it, as TCP does on HTTP/1.1;
// the limits are server.http2's and server.max_header_bytes, fixed when
// the gateway is made (a reload does not change them).
type h2Engine struct {
	g     *Gateway
	srv   *http.Server
	plain *handoffListener // h2c connections handed over
	ctxs  sync.Pool        // *fasthttp.RequestCtx for ServeHTTP
	up    upgrades         // connections upgraded to h2c (h2cupgrade.go)

	mu      sync.Mutex // protects serving
	serving sync.WaitGroup
	closed  bool
}

// newH2Engine makes the engine for the configuration the gateway starts
// with; it serves nothing until servePlain, or the TLS listener's serve.
func newH2Engine(g *Gateway, cfg *config.Config) *h2Engine {
	e := &h2Engine{g: g, plain: newHandoffListener(h2cAddr{})}
	s := cfg.Server
	e.srv = &http.Server{
		Handler:           e.handler(cfg),
		ReadHeaderTimeout: s.ReadHeaderTimeout.D(),
		ReadTimeout:       s.ReadTimeout.D(),
		IdleTimeout:       s.IdleTimeout.D(),
		MaxHeaderBytes:    s.MaxHeaderBytes,
		Protocols:         new(http.Protocols),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      s.HTTP2.MaxConcurrentStreams,
			MaxReceiveBufferPerStream: s.HTTP2.MaxStreamBufferBytes,
			// A client that reads nothing for write_timeout loses its
			// connection, as on HTTP/1.1 (each response's writes are
			// bounded by it too: see h2handler.go).
			WriteByteTimeout: s.WriteTimeout.D(),
		},
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		// OPTIONS * reaches the gateway's handler, which refuses it as
		// the loops and nginx do (400), not net/http's, which answers 200.
		DisableGeneralOptionsHandler: true,
	}
	e.srv.Protocols.SetHTTP1(true)
	e.srv.Protocols.SetHTTP2(true)
	e.srv.Protocols.SetUnencryptedHTTP2(true)
	return e
}

// servePlain serves the h2c connections handed over until shutdown.
func (e *h2Engine) servePlain() {
	if err := e.serve(e.plain); err != nil {
		e.g.log.Error("serving h2c", "error", err)
	}
}

// serve serves ln until shutdown: the h2c connections handed over, or the
// TLS listener's HTTP/2 ones (tlsmux.go), which net/http serves through
// its TLSNextProto.
func (e *h2Engine) serve(ln net.Listener) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	e.serving.Add(1)
	e.mu.Unlock()
	defer e.serving.Done()
	err := e.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// deliver gives the engine a plaintext connection that speaks h2c (its
// bytes read so far put back in front), or closes it once the engine is
// shutting down.
func (e *h2Engine) deliver(c net.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = c.Close()
		return
	}
	e.plain.deliver(c)
}

// shutdown stops the listeners and waits for the engine's requests to
// finish, or for ctx to end; then it sends the WebSockets still open away
// (a close frame 1001 each way, see tunnels.goAway), waits for their
// streams to end (at most wsAwayWait), and closes the remaining
// connections.
func (e *h2Engine) shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	// The connections' wait ends once the WebSockets have gone away.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	served, away := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(away)
		defer cancel()
		if e.g.tunnels.goAway() == 0 {
			return
		}
		t := time.NewTimer(wsAwayWait)
		defer t.Stop()
		select {
		case <-served: // every connection ended by itself
		case <-t.C:
		}
	})
	upgraded := make(chan error, 1)
	go func() { upgraded <- e.shutdownUpgrades(cctx) }()
	err := e.srv.Shutdown(cctx) // closes the listeners it serves
	close(served)
	if !stop() {
		<-away
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // cctx's end was ctx's
	}
	_ = e.plain.Close()               // in case it did not serve it yet
	for drained := false; !drained; { // connections delivered but not accepted
		select {
		case c := <-e.plain.ch:
			_ = c.Close()
		default:
			drained = true
		}
	}
	if err != nil {
		err = errors.Join(fmt.Errorf("HTTP/2 connections: %w", err), e.srv.Close())
	}
	if uerr := <-upgraded; uerr != nil {
		if ctx.Err() != nil {
			uerr = ctx.Err() // cctx's end was ctx's
		}
		err = errors.Join(err, fmt.Errorf("connections upgraded to h2c: %w", uerr))
	}
	e.serving.Wait()
	return err
}

// wsAwayWait bounds shutdown's wait for the streams of the WebSockets it
// sent away to end, once their close frames are sent.
const wsAwayWait = time.Second

// h2cAddr is the address of the listener of handed-over connections.
type h2cAddr struct{}

func (h2cAddr) Network() string { return "h2c" }
func (h2cAddr) String() string  { return "handed over" }
