package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// tlsMux serves the TLS listeners: it accepts their connections, runs each
// one's handshake on a goroutine of its own, and gives the connection to
// the engine of the protocol the client's ALPN chose. HTTP/1.1, or no
// ALPN, goes to the event loops when they run (server.engine loop, once
// Serve started them; see loopTLS), else to the goroutine engine
// (fasthttp); either serves it as it serves a plaintext connection.
// HTTP/2 goes to the event loops too when they run and
// server.http2.loops is on at the handshake's end (they serve it as they
// serve h2c, see loopEngine.serveTLS), else to the HTTP/2 engine
// (net/http, which serves it through its TLSNextProto). A handshake must end within
// server.read_header_timeout, so that a client that starts one and stalls
// holds nothing for long; its certificates and minimum version are those
// of the configuration in force when it starts. At most maxHandshakes
// handshakes run at once, on all TLS listeners together: past that, a
// listener accepts nothing until one ends, and new connections wait in
// the kernel's listen queue (as nginx's worker_connections bounds them), so
// that a flood of connections that start handshakes cannot hold more than
// that many goroutines and signatures at a time. Past
// server.max_connections open connections, on every listener together,
// a listener likewise serves the connection it accepted only once one
// closes (see connCap).
type tlsMux struct {
	g   *Gateway
	cfg *tls.Config      // asks the gateway's state at each handshake
	h1  *handoffListener // the goroutine engine's (*tlsConn)
	h2  *handoffListener // the HTTP/2 engine's (*tls.Conn)
	// loops, when set, serve HTTP/1.1, and HTTP/2 with server.http2.loops
	// (see loopEngine.serveTLS).
	loops atomic.Pointer[loopEngine]
	ctx   context.Context // ends at shutdown, and the handshakes with it
	end   context.CancelFunc
	// slots holds a token per handshake in progress (maxHandshakes).
	slots chan struct{}

	mu      sync.Mutex // protects lns, started and closed
	lns     []net.Listener
	started bool // the engines serve h1 and h2
	closed  bool

	handshakes sync.WaitGroup // added to under mu, while not closed
	serving    sync.WaitGroup // the engines' Serve on h1 and h2
}

// maxHandshakes is how many TLS handshakes may be in progress at once.
var maxHandshakes = 1024

func newTLSMux(g *Gateway) *tlsMux {
	m := &tlsMux{g: g, h1: newHandoffListener(tlsAddr{}), h2: newHandoffListener(tlsAddr{}),
		slots: make(chan struct{}, maxHandshakes)}
	m.ctx, m.end = context.WithCancel(context.Background())
	m.cfg = &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if c := g.state.Load().tls; c != nil {
				return c, nil
			}
			return nil, errNoTLS
		},
	}
	return m
}

var errNoTLS = errors.New("the configuration has no tls section")

// serve accepts connections on ln, a TCP listener, until shutdown, and
// returns nil then.
func (m *tlsMux) serve(ln net.Listener) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	m.lns = append(m.lns, ln)
	if !m.started {
		m.started = true
		m.serving.Add(2)
		go func() {
			defer m.serving.Done()
			if err := m.g.server.Serve(m.h1); err != nil {
				m.g.log.Error("serving HTTP/1.1 over TLS", "error", err)
			}
		}()
		go func() {
			defer m.serving.Done()
			if err := m.g.h2.serve(m.h2); err != nil {
				m.g.log.Error("serving HTTP/2 over TLS", "error", err)
			}
		}()
	}
	m.mu.Unlock()
	var pause time.Duration // after an error that may pass, as net/http's Serve
	for {
		select {
		case m.slots <- struct{}{}: // released when the handshake ends
		case <-m.ctx.Done():
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-m.slots
			if m.closing() {
				return nil
			}
			if !temporary(err) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			m.g.log.Warn("accepting a TLS connection", "error", err, "retry_in", pause)
			select {
			case <-time.After(pause):
			case <-m.ctx.Done():
			}
			continue
		}
		pause = 0
		slot := m.g.conns.take(c, listenerTLS) // server.max_connections
		if slot == nil {                       // c is closed
			<-m.slots
			if m.g.conns.stopping() {
				return nil
			}
			continue // past server.max_connections_per_client
		}
		c = counted(c, slot)
		m.mu.Lock()
		if m.closed { // wait may have begun: no handshake starts now
			m.mu.Unlock()
			<-m.slots
			_ = c.Close()
			return nil
		}
		m.handshakes.Add(1)
		m.mu.Unlock()
		go m.handshake(c)
	}
}

// temporary reports whether err, from Accept, may pass (too many open
// files, say), as net/http's Serve takes it.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (m *tlsMux) closing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// handshake runs c's handshake and hands the connection over, or closes
// it (after a 400 to a plaintext HTTP request) when the handshake fails,
// takes longer than
// server.read_header_timeout, or shutdown begins.
func (m *tlsMux) handshake(c net.Conn) {
	defer m.handshakes.Done()
	defer func() { <-m.slots }()
	// The socket is switched to a loop after the handshake (serveTLS).
	sw := newSockSwitch(c)
	tc := tls.Server(sw, m.cfg)
	if d := m.g.state.Load().cfg.Server.ReadHeaderTimeout.D(); d > 0 {
		_ = c.SetDeadline(time.Now().Add(d))
	}
	if err := tc.HandshakeContext(m.ctx); err != nil {
		m.g.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err)
		answerPlainHTTP(err)
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{}) // each engine sets its own
	h2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	if e := m.loops.Load(); e != nil && (!h2 || m.g.state.Load().cfg.Server.HTTP2.Loops) && e.serveTLS(sw, tc) {
		return
	}
	if h2 {
		m.h2.deliver(tc)
		return
	}
	m.h1.deliver(&tlsConn{Conn: tc})
}

// stop stops accepting and ends the handshakes in progress.
func (m *tlsMux) stop() {
	m.mu.Lock()
	m.closed = true
	lns := m.lns
	m.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	m.end()
}

// wait, after stop and once the engines are shut down, waits for the
// handshakes to end, closes the connections handed over that no engine
// took, and waits for the engines' Serve to return.
func (m *tlsMux) wait() {
	m.handshakes.Wait()
	_ = m.h1.Close()
	_ = m.h2.Close()
	m.serving.Wait()
}

// tlsAddr is the address of the listeners of connections a TLS listener
// hands over.
type tlsAddr struct{}

func (tlsAddr) Network() string { return "tls" }
func (tlsAddr) String() string  { return "handed over" }
