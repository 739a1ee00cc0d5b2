//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// loopsSupported reports whether this system has the event-loop engine.
const loopsSupported = true

// loopEngine serves client connections on event loops, one per core, as
// nginx does: a loop waits for whichever of its connections is ready and
// handles it at once, the upstream connections of its requests included,
// so a request costs no goroutine switch and no wake-up of another thread.
// On the project's two-core machines that is what closes most of the gap
// between a goroutine-per-connection engine and nginx (scripts/loadtest.sh).
//
// The loops take the common case: a request whose route decides at once
// (rate limit on the memory store, circuit breaker, concurrency limit
// without a queue, timeout, fallback; retries, whose waits are timers
// that bring the request back to its loop), with a body of at most 64 KiB
// that has arrived whole, answered by a body of at most 64 KiB. Anything
// else hands the connection over to the goroutine engine (fasthttp), where
// it stays: a route with coalescing, a queue or a Redis store; a
// streamed, chunked or large request body; an Expect or Upgrade header; an
// HTTP/1.0 client; a path that needs normalizing; anything else outside
// the plain form the loops read themselves (see http1.ParseRequest;
// fasthttp answers or refuses it). The loops forward a plain response's header lines as
// they came (but for the hop-by-hop ones) and read any other with
// fasthttp. A large or chunked response streams from a goroutine, so that
// a slow client paces the upstream as on the goroutine engine, and its
// connection then returns to its loop. A hand-over moves the socket
// itself, with the bytes the loop had read, so nothing is lost and nothing
// is read twice. A client that shuts down its sending side after its
// requests is answered all the same (see halfClose). The loops serve the
// TLS listener's HTTP/1.1 too, once its handshake is done (see loopTLS),
// and its HTTP/2 with server.http2.loops: they decrypt and encrypt on the
// loop, and the same code serves its requests.
type loopEngine struct {
	gnet.BuiltinEventEngine
	g       *Gateway
	cli     *gnet.Client
	handoff *handoffListener // connections for the goroutine engine
	served  chan error       // the goroutine engine's Serve on handoff returned

	mu    sync.Mutex
	loops map[gnet.EventLoop]*loop

	conns     atomic.Int64 // client connections on the loops
	handovers atomic.Uint64
	tlsConns  atomic.Uint64 // TLS connections the loops took (see serveTLS)
	streams   inFlight      // responses streaming from goroutines
	bridged   inFlight      // bridged HTTP/2 streams' goroutines (see h2Bridge)
	draining  atomic.Bool
	stopped   chan struct{} // closed once the loops have stopped (see stop)
	stopOnce  sync.Once
	// enrolling is held to read draining and take a TLS connection (see
	// serveTLS), and to set draining: a connection taken is counted in
	// conns before shutdown waits for them.
	enrolling sync.RWMutex
}

// loop is one event loop's own state, used only on that loop's goroutine.
type loop struct {
	e     *loopEngine
	el    gnet.EventLoop
	rd    bytes.Reader
	br    *bufio.Reader // parses headers out of a connection's buffer
	out   sliceWriter
	bw    *bufio.Writer // serializes messages into out
	idle  map[*target][]*upConn
	conns map[*clientConn]struct{}
	plain [][]byte             // buffers for TLS plaintext, free (see loopTLS.settle)
	h2    map[*loopH2]struct{} // h2c connections (server.http2.loops)
	h2Out []*loopH2            // h2c connections with answers to send (see loopH2.later)
}

// sliceWriter collects what is written to it.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// newLoopEngine returns an engine whose loops are not started yet.
func newLoopEngine(g *Gateway, addr net.Addr) (*loopEngine, error) {
	e := &loopEngine{g: g, loops: map[gnet.EventLoop]*loop{}, handoff: newHandoffListener(addr), stopped: make(chan struct{})}
	n := g.loopCount
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	cli, err := gnet.NewClient(e,
		gnet.WithNumEventLoop(n),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{g.log}))
	if err != nil {
		return nil, err
	}
	e.cli = cli
	return e, nil
}

// start starts the loops and hands the goroutine engine its listener.
func (e *loopEngine) start() error {
	if err := e.cli.Start(); err != nil {
		return err
	}
	e.served = make(chan error, 1)
	go func() { e.served <- e.g.server.Serve(e.handoff) }()
	e.g.tls.loops.Store(e) // the TLS listeners' connections too
	return nil
}

// serve accepts connections on ln for the loops, once started, until ln is
// closed.
func (e *loopEngine) serve(ln net.Listener) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() { // out of file descriptors and the like: back off
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			if e.g.closing.Load() {
				return nil
			}
			e.enrolling.Lock() // no TLS connection joins loops that stop
			e.draining.Store(true)
			e.enrolling.Unlock()
			_ = e.handoff.Close()
			<-e.served
			return errors.Join(err, e.stop())
		}
		delay = 0
		slot := e.g.conns.take(nc, listenerPlain)
		if slot == nil {
			continue // refused, or shutdown began: Accept fails once ln is closed
		}
		e.enrollAccepted(nc, &clientConn{slot: slot, fresh: true})
	}
}

// enrollAccepted puts nc, a client socket just accepted, on a loop as cc,
// which holds its connection's slot (see connSlot), or frees that slot
// when the loop does not take it. gnet closes nc either way (the loop
// keeps a duplicate). A connection it fails to take (the loops stop, or a
// duplicate descriptor cannot be had) closes at once, without a lingering
// close: no answer was sent on it for a reset to destroy.
func (e *loopEngine) enrollAccepted(nc net.Conn, cc *clientConn) {
	if _, err := e.cli.EnrollContext(nc, cc); err != nil {
		_ = nc.Close()
		cc.slot.release()
		return
	}
	cc.enrolled()
}

// shutdown waits for the loops' connections to finish their requests and
// close, and for responses streaming from goroutines and bridged HTTP/2
// streams, or for ctx to end. Past ctx's end it sends the WebSockets
// still open away (a close frame 1001 each way, see tunnels.goAway) and
// waits, at most wsAwayWait, for the connections that carried them to
// close once those frames are sent. Then it stops the loops, closing what
// is left, and waits, at most bridgeEndWait, for the bridged streams'
// goroutines, which that cancelled, to end. The goroutine engine's
// connections are fasthttp's to drain.
func (e *loopEngine) shutdown(ctx context.Context) error {
	e.enrolling.Lock()
	e.draining.Store(true)
	e.enrolling.Unlock()
	e.mu.Lock()
	for _, l := range e.loops {
		e.execute(l, l.closeIdle)
	}
	e.mu.Unlock()
	streamed := make(chan struct{})
	go func() { <-e.streams.idle(); <-e.bridged.idle(); close(streamed) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for e.conns.Load() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-tick.C:
		}
	}
	if err == nil {
		select {
		case <-streamed:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil && e.g.tunnels.goAway() > 0 {
		// The WebSockets on the loops' HTTP/2 streams were sent away (a
		// close frame 1001 each way, see tunnels.goAway): their streams
		// end, and connections that carry nothing else close by
		// themselves once their output is sent.
		e.awaitConns(wsAwayWait)
	}
	err = errors.Join(err, e.stop())
	// Stopping closed the connections left, cancelling their bridged
	// streams, whose goroutines then end at once.
	t := time.NewTimer(bridgeEndWait)
	defer t.Stop()
	select {
	case <-e.bridged.idle():
	case <-t.C:
		err = errors.Join(err, errBridgedLeft)
	}
	return err
}

// stop stops the loops, closing their connections, and then closes
// stopped: a connection being enrolled that the loops never took (see
// dial) is given up.
func (e *loopEngine) stop() error {
	err := e.cli.Stop()
	e.stopOnce.Do(func() { close(e.stopped) })
	return err
}

// bridgeEndWait bounds shutdown's wait, once the loops have stopped, for
// the goroutines of the bridged HTTP/2 streams they cancelled to end.
const bridgeEndWait = time.Second

// errBridgedLeft is shutdown's error when goroutines of bridged HTTP/2
// streams (see h2Bridge) did not end within bridgeEndWait of the loops
// stopping.
var errBridgedLeft = errors.New("gateway: bridged HTTP/2 streams still served after the loops stopped")

// awaitConns waits, at most d, for the loops' client connections to close.
func (e *loopEngine) awaitConns(d time.Duration) {
	deadline := time.Now().Add(d)
	for e.conns.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// execute runs fn on l's loop.
func (e *loopEngine) execute(l *loop, fn func()) {
	_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		fn()
		return nil
	}))
}

// loopOf returns the state of c's event loop, made on first use.
func (e *loopEngine) loopOf(c gnet.Conn) *loop {
	el := c.EventLoop()
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.loops[el]
	if l == nil {
		l = &loop{e: e, el: el, idle: map[*target][]*upConn{}, conns: map[*clientConn]struct{}{}, h2: map[*loopH2]struct{}{}}
		l.br = bufio.NewReaderSize(&l.rd, 4096)
		l.bw = bufio.NewWriterSize(&l.out, 4096)
		e.loops[el] = l
	}
	return l
}

// closeIdle closes the loop's client connections that wait for a request,
// for a shutdown; busy ones close after their response, and h2c ones after
// their streams (GOAWAY).
func (l *loop) closeIdle() {
	for cc := range l.conns {
		if cc.state == stateIdle && cc.c.InboundBuffered() == 0 {
			_ = cc.c.Close()
		}
	}
	for h := range l.h2 {
		h.drain()
	}
}

// reader returns a reader of b for a header parser.
func (l *loop) reader(b []byte) *bufio.Reader {
	l.rd.Reset(b)
	if l.br.Size() < len(b) {
		l.br = bufio.NewReaderSize(&l.rd, len(b))
	} else {
		l.br.Reset(&l.rd)
	}
	return l.br
}

// writer returns a writer whose bytes, once flushed, l.write sends in one
// write.
func (l *loop) writer() *bufio.Writer {
	l.out.b = l.out.b[:0]
	l.bw.Reset(&l.out)
	return l.bw
}

// write sends l.out.b to c.
func (l *loop) write(c gnet.Conn) error {
	_, err := c.Write(l.out.b)
	if cap(l.out.b) > 256<<10 {
		l.out.b = nil // do not keep a large message's buffer
	}
	return err
}

func (e *loopEngine) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	switch v := c.Context().(type) {
	case *clientConn:
		v.open(e, c)
	case *upConn:
		v.opened(c)
	}
	return nil, gnet.None
}

func (e *loopEngine) OnTraffic(c gnet.Conn) gnet.Action {
	switch v := c.Context().(type) {
	case *clientConn:
		if t := v.tls; t != nil {
			return t.traffic(v.serve)
		}
		return v.serve()
	case *upConn:
		return v.traffic()
	case *loopH2:
		if t := v.tlsConn(); t != nil {
			return t.traffic(v.traffic)
		}
		return v.traffic()
	}
	return gnet.Close
}

// traffic handles a read event of a TLS connection: it decrypts the
// records that came, has serve read their plaintext, and closes the
// connection after close_notify once serve has nothing more to do.
func (t *loopTLS) traffic(serve func() gnet.Action) gnet.Action {
	if !t.feed() {
		return gnet.Close
	}
	a := serve()
	t.settle()
	if a == gnet.None && t.eof {
		return gnet.Close // close_notify: closed takes it as the end of the stream
	}
	return a
}

func (e *loopEngine) OnClose(c gnet.Conn, err error) gnet.Action {
	switch v := c.Context().(type) {
	case *clientConn:
		v.closed(err)
	case *upConn:
		v.closed()
	case *loopH2:
		v.closed()
		if t := v.tlsConn(); t != nil {
			t.closing()
		}
	}
	return gnet.None
}

// detach takes c's socket out of its loop as a net.Conn, with the bytes
// the loop had read and not consumed. The caller returns gnet.Close from
// c's own event, which closes only the loop's copy of the socket: nothing
// more is read from it in between. A TLS connection comes out as a
// tlsConn (see loopTLS.detach). A client connection's slot (see
// connSlot) goes with the socket: the socket under the net.Conn returned
// holds it (a countedConn), and frees it when it closes.
func detach(c gnet.Conn, slot *connSlot) (net.Conn, error) {
	if t, ok := c.(*loopTLS); ok {
		return t.detach(slot)
	}
	buf, _ := c.Next(-1)
	rest := bytes.Clone(buf)
	nc, err := dupConn(c)
	if err != nil {
		return nil, err
	}
	nc = counted(nc, slot)
	if len(rest) == 0 {
		return nc, nil
	}
	return &prefixConn{Conn: nc, prefix: rest}, nil
}

// dupConn returns a net.Conn over a duplicate of c's socket.
func dupConn(c gnet.Conn) (net.Conn, error) {
	fd, err := c.Dup()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "")
	nc, err := net.FileConn(f)
	_ = f.Close()
	return nc, err
}

// gnetLogger sends gnet's warnings and errors to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(string, ...any) {}
func (g gnetLogger) Infof(string, ...any)  {}
func (g gnetLogger) Warnf(format string, args ...any) {
	g.l.Warn("event loop", "message", fmt.Sprintf(format, args...))
}
func (g gnetLogger) Errorf(format string, args ...any) {
	g.l.Error("event loop", "message", fmt.Sprintf(format, args...))
}
func (g gnetLogger) Fatalf(format string, args ...any) {
	g.l.Error("event loop", "message", fmt.Sprintf(format, args...))
}
