// Package gateway is sluice's reverse proxy: it matches requests to routes,
// runs each route's policies (rate limit, coalescing, fallback, retry,
// circuit breaker, concurrency limit, timeout) and sends the request to one
// target of the route's upstream pool.
//
// Two engines serve connections (config's server.engine). The default,
// "loop", runs event loops, one per core (loop.go): they serve the requests
// of routes whose policies decide at once or wait on a timer (retries),
// with small bodies, and hand a connection whose request must wait for
// something else or stream to the goroutine engine,
// fasthttp, on which a request is proxied synchronously on the goroutine
// that serves it, with the round trip of internal/upstream over
// fasthttp's connection pools. "goroutine" uses that engine alone. A
// response body up to 64 KiB is read whole; a larger one streams: a slow
// client paces the upstream through bounded buffers. scripts/loadtest.sh
// measures both engines against nginx (figures in README.md).
//
// A route's policies see an upstream call as ending when its response
// arrives: its headers, and its body when it is read whole. That is the
// latency adaptive limits and slow-call rates measure, and a concurrency
// slot is free again while a large body streams. A timeout, as in Envoy,
// bounds the whole exchange, body included: leave it off on routes that
// stream long responses (SSE).
//
// Every exchange is bounded without a timeout policy too: connecting to a
// target by its upstream's connect_timeout, the wait for the response's
// headers, then each wait between two reads of a streamed body, by
// response_header_timeout (504, or a body cut short), and each wait to
// send to a client that reads nothing by server.write_timeout. A client
// that closes its connection cancels its request: the attempt's upstream
// connection is closed, not pooled. A pooled upstream connection with
// bytes the target sent unasked is closed, never read as an answer.
//
// A third engine, on net/http (h2engine.go), serves HTTP/2: the
// plaintext connections that turn to it (h2c), which the other two hand
// over, and those of the TLS listener (ServeTLS) whose ALPN chose it; each
// of its requests runs through the goroutine engine's handler, so that
// every engine drives the same lifecycle. The TLS listener's HTTP/1.1
// connections go to the engine server.engine names, as the plaintext
// ones (tlsmux.go, looptls.go). Upstreams speak HTTP/1.1 (over TLS for https targets) or
// HTTP/2; internal/upstream keeps their targets, their balancing and
// health, and the exchange with a target.
//
// Configuration comes from package config; Apply swaps a new configuration in
// atomically, keeping the state of every policy whose settings did not change.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/telemetry"
)

// Options are the parts of a Gateway that do not come from the
// configuration file.
type Options struct {
	// Logger receives the request log and events. Nil means one built from
	// the configuration's log settings, writing to standard error.
	Logger *slog.Logger
	// Metrics receives counters and gauges, and reads the gateway's live
	// state at each scrape (telemetry.Metrics.Watch). Nil means none are
	// kept.
	Metrics *telemetry.Metrics
	// Clock drives health checks and the policies' windows. Nil means
	// clock.Real.
	Clock clock.Clock
	// Loops is how many event loops the loop engine runs (server.engine:
	// loop), each holding one of the runtime's Ps while it waits for its
	// sockets. Zero means runtime.GOMAXPROCS(0) when Serve starts. Fewer
	// loops than Ps leave the others to the rest of the gateway (the
	// goroutine engine, HTTP/2 bridges, timers, the admin API); see
	// README, Deploying.
	Loops int
}

// Gateway is a running reverse proxy. Its methods are safe for concurrent
// use.
type Gateway struct {
	state  atomic.Pointer[state]
	server *fasthttp.Server
	// engine is the engine that serves, chosen by the first configuration
	// (server.engine) and the system: "loop" or "goroutine".
	engine string
	// loops serves connections on event loops (loop.go) once Serve has
	// started them; nil on the goroutine engine alone.
	loops *loopEngine
	// h2 serves HTTP/2: the TLS listener's and the h2c connections the
	// other engines hand over (h2engine.go).
	h2 *h2Engine
	// tls serves the TLS listeners: it runs their handshakes and hands
	// their connections to h2, the loops or the goroutine engine
	// (tlsmux.go).
	tls     *tlsMux
	ln      net.Listener
	log     *slog.Logger
	metrics *telemetry.Metrics
	clock   clock.Clock
	// loopCount is Options.Loops.
	loopCount int
	// exchanges holds freed exchanges for reuse, which saves an allocation
	// and a method value per request.
	exchanges sync.Pool
	// tunnels are the open WebSocket connections (websocket.go).
	tunnels tunnels
	// held counts the request bodies held for retries (heldbodies.go).
	held heldBodies
	// hijacks are the goroutine engine's connections being taken over
	// (hijack.go).
	hijacks hijacks
	// lingers are the connections closing after their last answer
	// (linger.go).
	lingers lingerings
	// conns bounds the client connections open at once
	// (server.max_connections, conncap.go).
	conns connCap
	// idle are the goroutine engine's connections idle between
	// requests, which conns has closed to make room (connidle.go).
	idle idleConns

	mu      sync.Mutex // serialises Apply; protects reload
	reload  ReloadStatus
	closing atomic.Bool
	// breakerLog and targetLog hold the last state changes of the routes'
	// breakers and of the targets' passive-health ones, for the dashboard.
	breakerLog transitions[string]
	targetLog  transitions[targetKey]
}

// ReloadStatus describes the last attempt to apply a configuration.
type ReloadStatus struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Error   string    `json:"error,omitempty"`
	Version uint64    `json:"version"`
}

// New builds a gateway for cfg. It does not listen yet: see Serve.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	g := &Gateway{log: opts.Logger, metrics: opts.Metrics, clock: clock.Or(opts.Clock), loopCount: opts.Loops}
	if g.log == nil {
		g.log = NewLogger(cfg.Log, nil)
	}
	g.engine = "goroutine"
	if cfg.Server.Engine == "loop" && loopsSupported {
		g.engine = "loop"
	}
	st, err := buildState(cfg, nil, g)
	if err != nil {
		return nil, err
	}
	st.version = 1
	g.state.Store(st)
	g.reload = ReloadStatus{At: time.Now(), OK: true, Version: 1}
	g.conns.clock, g.conns.log, g.conns.reclaim = g.clock, g.log, g.reclaimIdle
	g.idle.cap = &g.conns
	g.conns.setBounds(cfg.Server.MaxConnections, cfg.Server.MaxConnectionsPerClient)
	g.h2 = newH2Engine(g, cfg)
	g.tls = newTLSMux(g)
	g.metrics.Configured(g.reload.At)
	g.metrics.Watch(g.live)
	g.server = &fasthttp.Server{
		Handler:                      g.serveFast,
		ReadTimeout:                  cfg.Server.ReadHeaderTimeout.D(),
		IdleTimeout:                  cfg.Server.IdleTimeout.D(),
		WriteTimeout:                 cfg.Server.WriteTimeout.D(), // a bound per write for streams: see paceClient
		HeaderReceived:               g.headerReceived,
		ExpectHandler:                g.expect,
		ErrorHandler:                 g.fastError,
		ReadBufferSize:               cfg.Server.MaxHeaderBytes,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true, // no Server header of the gateway's: the target's passes
		NoDefaultContentType:         true,
		LazyRequestTime:              true, // the gateway times requests itself
		CloseOnShutdown:              true,
		ConnState:                    g.connState,
		Logger:                       fasthttpLogger{g.log},
	}
	return g, nil
}

// headerReceived sets the body's limits once the headers are in: the
// server's ReadTimeout is the header-read timeout (a client that does not
// finish its headers in time is cut off, which defeats slow-header attacks),
// and the body gets read_timeout and max_body_bytes. A request without a
// body has nothing more to read, so its read deadline is left alone (which
// saves re-arming the connection's timer on every such request). A request
// of another version than HTTP/1.0 and 1.1 has no body read: it is
// refused 505. One whose Content-Length is over max_body_bytes is held for
// expect, which refuses it 413 at its head.
func (g *Gateway) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if p := h.Protocol(); len(p) == len("HTTP/1.1") && string(p[:7]) == "HTTP/1." && p[7] > '1' && p[7] <= '9' {
		// HTTP/1.2 and later minor versions are read as HTTP/1.1 (RFC
		// 9110 section 2.5), kept alive unless the client closes; here,
		// before fasthttp decides whether the connection stays open.
		// (fasthttp already counts an unknown version as closing, so the
		// client's own Connection lines are read from the wire.)
		closing := false
		http1.Headers(h.RawHeaders(), func(name, value []byte) bool {
			closing = closing || http1.EqualName(name, "Connection") && http1.HasToken(value, "close")
			return true
		})
		h.SetProtocolBytes(http11)
		if !closing {
			h.ResetConnectionClose()
		}
	}
	s := g.state.Load().cfg.Server
	if !h.IsHTTP11() && string(h.Protocol()) != "HTTP/1.0" {
		// Another version (HTTP/2.0 in a request line, HTTP/0.9…) is
		// refused 505 at its head, as nginx refuses it, before any body
		// check (see http1.RefusedHead): none of its body is read, and
		// the lingering close after the answer drops what comes.
		h.SetContentLength(0)
		return fasthttp.RequestConfig{MaxRequestBodySize: s.MaxBodyBytes}
	}
	if s.MaxBodyBytes > 0 && h.ContentLength() > s.MaxBodyBytes && (!bytes.EqualFold(h.Peek("Expect"), continueExpect) || !h.IsHTTP11()) {
		// Held as an Expect: 100-continue is (see expect), which fasthttp
		// reads nothing of before the answer; the client is not asked for
		// the body, which is refused. So is a request whose Expect is
		// another ("foo", "100-continue, foo"), which fasthttp would
		// otherwise read the body of. An HTTP/1.0 request, whose
		// expectations fasthttp ignores (RFC 9110 section 10.1.1), and
		// which would otherwise wait for its body's first 8 KiB, is held
		// as HTTP/1.1 to be refused so, its connection closing.
		if !h.IsHTTP11() {
			h.SetProtocolBytes(http11)
			h.SetConnectionClose()
		}
		h.Set("Expect", heldExpect(h.RawHeaders()))
	}
	if h.ContentLength() == 0 {
		return fasthttp.RequestConfig{MaxRequestBodySize: s.MaxBodyBytes}
	}
	return fasthttp.RequestConfig{ReadTimeout: s.ReadTimeout.D(), MaxRequestBodySize: s.MaxBodyBytes}
}

// expect answers a request's Expect: 100-continue (fasthttp's
// ExpectHandler): 100, unless its body's declared length is over
// server.max_body_bytes: the request is then answered without a byte of
// its body read (413, or a refusal that comes before it: 404, 429…) and
// the connection closes after the answer with a lingering close (see
// closeAfter). headerReceived has every request of such a length take
// this path, Expect or not, so that its 413 comes at its head: one whose
// client did not ask for a 100 (no Expect line, an empty one, an HTTP/1.0
// client's, which RFC 9110 section 10.1.1 forbids answering with a 100)
// is refused whatever the configuration says now (a reload may have come
// since headerReceived read it), never sent a 100 it did not ask for (see
// clientExpects). The decision and the request's handling read one
// configuration.
func (g *Gateway) expect(ctx *fasthttp.RequestCtx) int {
	st := g.state.Load()
	h := &ctx.Request.Header
	max := st.cfg.Server.MaxBodyBytes
	if (max <= 0 || h.ContentLength() <= max) && clientExpects(h) {
		return fasthttp.StatusContinue
	}
	g.handleIn(ctx, st, true)
	if !ctx.Hijacked() {
		g.closeAfter(ctx)
	}
	return ctx.Response.StatusCode()
}

// clientExpects reports whether h's client asked for a 100 Continue: its
// first Expect line says 100-continue, and h's Expect is still that line's
// value. headerReceived, holding a request its client did not ask for one
// (an HTTP/1.1 request without the line or with an empty one, an HTTP/1.0
// request with or without it, turned into an HTTP/1.1 one), sets an Expect
// that differs from the client's line (see heldExpect).
func clientExpects(h *fasthttp.RequestHeader) bool {
	v, ok := rawExpect(h.RawHeaders())
	return ok && bytes.EqualFold(v, continueExpect) && bytes.Equal(h.Peek("Expect"), v)
}

// continueExpect is the Expect value that asks for a 100 Continue.
var continueExpect = []byte("100-continue")

// rawExpect returns the value of the first Expect line of raw, a request's
// header block as its client sent it, and whether it has one.
func rawExpect(raw []byte) (value []byte, ok bool) {
	http1.Headers(raw, func(name, v []byte) bool {
		if http1.EqualName(name, "Expect") {
			value, ok = v, true
		}
		return !ok
	})
	return value, ok
}

// heldExpect returns the Expect that headerReceived sets on a request it
// holds for expect, raw being its header block as its client sent it: one
// that fasthttp reads as 100-continue and that differs from the client's
// own Expect line, if any, so that clientExpects tells the two apart.
func heldExpect(raw []byte) string {
	if v, _ := rawExpect(raw); string(v) == "100-continue" {
		return "100-Continue"
	}
	return "100-continue"
}

// Serve accepts plaintext connections on ln until Shutdown: HTTP/1.1, and
// HTTP/2 by prior knowledge or Upgrade: h2c. Past server.max_connections
// open on all listeners, it serves the connection it accepted only once
// one closes, and accepts nothing meanwhile. It returns nil after a
// graceful shutdown.
func (g *Gateway) Serve(ln net.Listener) error {
	go g.h2.servePlain()
	return g.serve(ln)
}

// ServeTLS accepts connections on ln, a TCP listener, and serves them over
// TLS until Shutdown: HTTP/2 or HTTP/1.1, as the client's ALPN chooses
// (HTTP/1.1 when it names neither), with the certificates of the
// configuration's tls section (read again by every Apply). A handshake is
// bounded by server.read_header_timeout; HTTP/1.1 is then served as on
// the plaintext listener, with its limits and timeouts: by the event loops
// once Serve has started them (server.engine loop), else by the goroutine
// engine. It returns nil after a graceful shutdown.
func (g *Gateway) ServeTLS(ln net.Listener) error {
	return g.tls.serve(ln)
}

func (g *Gateway) serve(ln net.Listener) error {
	// The engine starts under g.mu, which Shutdown takes after it set
	// closing: Shutdown finds it started, or Serve finds it closing.
	g.mu.Lock()
	if g.closing.Load() {
		g.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	g.ln = ln
	var err error
	if g.engine == "loop" {
		var loops *loopEngine
		loops, err = newLoopEngine(g, ln.Addr())
		if err == nil {
			err = loops.start()
		}
		if err == nil {
			g.loops = loops
		}
		g.mu.Unlock()
		if err != nil {
			return err
		}
		err = loops.serve(ln)
	} else {
		g.mu.Unlock()
		err = g.server.Serve(sniffListener{Listener: countedListener{Listener: ln, cap: &g.conns}, h2: g.h2})
	}
	if g.closing.Load() {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for requests in flight
// and open WebSocket connections to finish, or for ctx to end; then it
// closes the remaining connections (a WebSocket gets a close frame 1001
// first) and stops health checks. A connection a listener accepted and
// holds back past server.max_connections is closed unanswered, and
// connections closing after their last answer (a lingering close) are
// closed at once and waited for.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.closing.Store(true)
	g.conns.stop() // no accept waits for a slot any more
	g.tls.stop()
	g.mu.Lock()
	loops, ln := g.loops, g.ln
	g.mu.Unlock()
	var loopErr error
	drained := make(chan struct{})
	if loops != nil {
		_ = ln.Close()
		go func() {
			defer close(drained)
			loopErr = loops.shutdown(ctx)
		}()
	} else {
		close(drained)
	}
	h2Done := make(chan error, 1)
	go func() { h2Done <- g.h2.shutdown(ctx) }()
	err := g.server.ShutdownWithContext(ctx)
	<-drained
	g.lingers.stop()
	// The goroutine engine's Serve may have begun after ShutdownWithContext
	// closed the listeners it had: closing its listener (the loops'
	// handoff one, or ln) ends it.
	if loops != nil {
		_ = loops.handoff.Close()
	} else if ln != nil {
		_ = ln.Close()
	}
	err = errors.Join(err, loopErr, <-h2Done, g.tunnels.shutdown(ctx))
	g.lingers.wait(ctx) // stopped above: their sockets close at once
	g.tls.wait()
	g.state.Load().close(nil)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: requests still in flight at the deadline: %w", err)
	}
	return err
}

// Apply builds cfg fully and swaps it in. Requests in flight finish on the
// configuration they started with; policies whose settings did not change
// keep their state. On error nothing changes, and the error is kept for
// Status.
func (g *Gateway) Apply(cfg *config.Config) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.state.Load()
	st, err := buildState(cfg, old, g)
	g.reload.At = time.Now()
	if err != nil {
		g.reload.OK, g.reload.Error = false, err.Error()
		g.metrics.Reload(false, g.reload.At)
		g.log.Error("reload refused", "error", err)
		return err
	}
	st.version = old.version + 1
	g.state.Store(st)
	g.conns.setBounds(cfg.Server.MaxConnections, cfg.Server.MaxConnectionsPerClient)
	old.close(st)
	forgetRemoved(old, st)
	g.reload = ReloadStatus{At: g.reload.At, OK: true, Version: st.version}
	g.metrics.Reload(true, g.reload.At)
	g.log.Info("configuration applied", "version", st.version, "routes", len(st.routes))
	return nil
}

// Refuse records a configuration that could not even be loaded (for
// example, a file that does not validate), as Apply records one that could
// not be built.
func (g *Gateway) Refuse(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reload.At, g.reload.OK, g.reload.Error = time.Now(), false, err.Error()
	g.metrics.Reload(false, g.reload.At)
	g.log.Error("reload refused", "error", err)
}

// LastReload returns what happened to the last configuration applied.
func (g *Gateway) LastReload() ReloadStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reload
}

// fasthttpLogger sends fasthttp's own messages to slog.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("http server", "message", fmt.Sprintf(format, args...))
}
