package gateway

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// The listeners whose connections connCap counts apart (see its gauge).
const (
	listenerPlain = iota // Serve's
	listenerTLS          // ServeTLS's
	listenerKinds
)

// listenerNames label the open connections by listener in the metrics.
var listenerNames = [listenerKinds]string{listenerPlain: "plain", listenerTLS: "tls"}

// connWarnEvery is the least time between two warnings that a listener
// waits for a connection to close before it serves the next one.
const connWarnEvery = time.Minute

// connCap bounds the client connections open at once on all listeners
// together (server.max_connections): a connection holds a slot from its
// accept until its socket is closed, whichever engines served it in
// between (see connSlot). A listener that accepts a connection while
// every slot is taken serves it only once one frees, and accepts nothing
// more until then, so that the connections after it wait in the kernel's
// listen queue, as nginx's worker_connections and HAProxy's maxconn make
// them. Its methods are safe for concurrent use; the zero value counts
// without a bound.
type connCap struct {
	clock clock.Clock
	log   *slog.Logger
	// reclaim, when set, has client connections idle between requests
	// closed, the oldest first, and returns how many (see
	// Gateway.reclaimIdle).
	reclaim func() int

	mu        sync.Mutex // protects max, perClient, open, byClient, freed, waiting, stopped and warned
	max       int        // 0: no bound
	perClient int        // server.max_connections_per_client; 0: no bound
	open      int
	byClient  map[netip.Addr]int // the connections open by client (see clientOf)
	freed     chan struct{}      // closed, and replaced, when a slot frees or max changes; nil until a wait asks
	waiting   int                // the takes that wait for a slot
	stopped   bool
	warned    time.Time // the last warning
	byKind    [listenerKinds]atomic.Int64
	waits     atomic.Uint64
	refused   atomic.Uint64 // connections closed at accept past perClient
	reclaimed atomic.Uint64 // idle connections closed to make room (see reclaimIdle)
	// pressed is set while a take waits and found no idle connection to
	// close (and while it looks): the next connection that turns idle
	// between requests gives its place (see claimPress).
	pressed atomic.Bool
}

// reclaimBatch bounds the idle connections one take that finds every slot
// held has closed at once, as nginx's ngx_drain_connections closes at
// most 32 of its reusable connections (see Gateway.reclaimIdle).
const reclaimBatch = 32

// setBounds changes the bound to max (0: none) and the bound per client
// to perClient (0: none); connections open past a lower bound stay open,
// and no new one is served until they fall below it.
func (c *connCap) setBounds(max, perClient int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max, c.perClient = max, perClient
	c.wake()
}

// wake tells the waits that something changed. It requires c.mu.
func (c *connCap) wake() {
	if c.freed != nil {
		close(c.freed)
		c.freed = nil
	}
}

// take gives nc, a connection just accepted on a listener of kind
// (listenerPlain, listenerTLS), a slot, once one is free. While every
// slot is held it has the connections idle longest between requests
// closed (see Gateway.reclaimIdle), and waits for a slot to free. It returns nil, nc closed, once stop was called (see
// stopping), or when nc's client holds perClient connections already.
func (c *connCap) take(nc net.Conn, kind int) *connSlot {
	client := clientOf(nc)
	waited := false
	c.mu.Lock()
	for !c.stopped && !c.overClient(client) && c.max > 0 && c.open >= c.max {
		warn, bound := false, c.max
		if !waited {
			waited = true
			c.waiting++
			c.waits.Add(1)
			if now := c.clock.Now(); c.warned.IsZero() || now.Sub(c.warned) >= connWarnEvery {
				c.warned, warn = now, true
			}
		}
		if c.freed == nil {
			c.freed = make(chan struct{})
		}
		freed := c.freed
		c.mu.Unlock()
		if warn { // not under mu: the handler is the caller's
			c.log.Warn("server.max_connections reached: idle connections are closed, and new connections wait until one closes",
				"max_connections", bound)
		}
		// A connection that turns idle from now on gives its place,
		// unless those idle already do.
		c.pressed.Store(true)
		if c.reclaim != nil && c.reclaim() > 0 {
			c.pressed.CompareAndSwap(true, false)
		}
		<-freed
		c.mu.Lock()
	}
	if waited {
		if c.waiting--; c.waiting == 0 {
			c.pressed.Store(false)
		}
	}
	if c.stopped || c.overClient(client) {
		over := !c.stopped
		c.mu.Unlock()
		if over {
			c.refused.Add(1)
		}
		_ = nc.Close()
		return nil
	}
	c.open++
	if client.IsValid() {
		if c.byClient == nil {
			c.byClient = map[netip.Addr]int{}
		}
		c.byClient[client]++
	}
	c.mu.Unlock()
	c.byKind[kind].Add(1)
	return &connSlot{cap: c, kind: kind, client: client}
}

// overClient reports whether client holds perClient connections already.
// It requires c.mu.
func (c *connCap) overClient(client netip.Addr) bool {
	return c.perClient > 0 && client.IsValid() && c.byClient[client] >= c.perClient
}

// clientOf is the client nc's connections count under, for
// server.max_connections_per_client: its TCP peer's address, an IPv6 one
// by its /64 (the block a client is usually given, as rate limits key it
// by default); the zero Addr when nc has no IP peer.
func clientOf(nc net.Conn) netip.Addr {
	a := netAddr(nc.RemoteAddr()).Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// claimPress reports, once per time a take began or went on waiting and
// found no idle connection to close, that a connection turning idle
// between requests is to be closed to make room (the caller closes the
// oldest such one it has); a caller that closes none calls unclaimPress.
func (c *connCap) claimPress() bool {
	return c.pressed.Load() && c.pressed.CompareAndSwap(true, false)
}

// unclaimPress gives back a claim that closed nothing.
func (c *connCap) unclaimPress() {
	c.mu.Lock()
	if c.waiting > 0 {
		c.pressed.Store(true)
	}
	c.mu.Unlock()
}

// stopping reports whether stop was called.
func (c *connCap) stopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// release frees a slot of kind taken for client.
func (c *connCap) release(kind int, client netip.Addr) {
	c.byKind[kind].Add(-1)
	c.mu.Lock()
	c.open--
	if client.IsValid() {
		if n := c.byClient[client] - 1; n > 0 {
			c.byClient[client] = n
		} else {
			delete(c.byClient, client)
		}
	}
	c.wake()
	c.mu.Unlock()
}

// stop ends the waits, at shutdown: a connection that waits is closed,
// and so is every one accepted after.
func (c *connCap) stop() {
	c.mu.Lock()
	c.stopped = true
	c.wake()
	c.mu.Unlock()
}

// opened returns how many connections hold a slot now, by listener kind.
func (c *connCap) opened() [listenerKinds]int64 {
	var n [listenerKinds]int64
	for i := range n {
		n[i] = c.byKind[i].Load()
	}
	return n
}

// connSlot is a client connection's place under connCap, from its accept
// until its socket is closed. It goes with the socket: with the net.Conn
// that holds it (countedConn), or with the event loop's state of the
// connection (clientConn, loopH2) while a loop holds the socket, and is
// handed on when the socket is; release frees it once, whichever holder
// calls it, however many times.
type connSlot struct {
	cap      *connCap
	kind     int
	client   netip.Addr // see clientOf
	released atomic.Bool
}

// release frees the slot, the first time only. A nil slot does nothing.
func (s *connSlot) release() {
	if s != nil && s.released.CompareAndSwap(false, true) {
		s.cap.release(s.kind, s.client)
	}
}

// countedConn is a client socket that holds its connection's slot (see
// connSlot): closing it frees the slot. It is the innermost net.Conn of
// a client connection served on goroutines: the wrappers of the engines
// (sniffConn, prefixConn, tls.Conn over a sockSwitch, tlsConn, fasthttp's
// and net/http's) close it when they close. A loop that takes the socket
// takes the slot with it (see unwrapCounted).
type countedConn struct {
	net.Conn
	slot atomic.Pointer[connSlot]
	// idle is set while it waits for a request among the goroutine
	// engine's idle connections, between prev and next there;
	// reclaiming is set once it was taken from them to close (see
	// idleConns).
	idle       bool
	prev, next *countedConn
	reclaiming atomic.Bool
}

// counted returns nc holding slot, or nc itself when slot is nil.
func counted(nc net.Conn, slot *connSlot) net.Conn {
	if slot == nil {
		return nc
	}
	c := &countedConn{Conn: nc}
	c.slot.Store(slot)
	return c
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.slot.Swap(nil).release()
	return err
}

// SyscallConn gives the socket, as the net.Conn it wraps does (see
// clientWatch, and the loops' enrollment).
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// CloseWrite shuts the sending side, as the net.Conn it wraps does (see
// closeWrite).
func (c *countedConn) CloseWrite() error {
	w, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.ErrUnsupported
	}
	return w.CloseWrite()
}

// unwrapCounted returns the socket under nc and the slot nc held, taken
// from it, when nc is a countedConn; else nc and nil. A loop's
// enrollment closes the net.Conn it is given (it keeps a duplicate of
// its socket): given the socket under a countedConn, it leaves the slot
// to the loop's state of the connection, which frees it when the loop
// closes the socket. A caller whose enrollment fails puts the slot back
// (restoreCounted).
func unwrapCounted(nc net.Conn) (net.Conn, *connSlot) {
	if c, ok := nc.(*countedConn); ok {
		return c.Conn, c.slot.Swap(nil)
	}
	return nc, nil
}

// socketOf returns the socket under nc when nc is a countedConn, else nc.
func socketOf(nc net.Conn) net.Conn {
	if c, ok := nc.(*countedConn); ok {
		return c.Conn
	}
	return nc
}

// restoreCounted gives nc, a countedConn that unwrapCounted emptied, its
// slot back.
func restoreCounted(nc net.Conn, slot *connSlot) {
	if c, ok := nc.(*countedConn); ok && slot != nil {
		c.slot.Store(slot)
	}
}

// countedListener is a plaintext listener of the goroutine engine whose
// connections take slots of the gateway's connCap (see connCap.take).
type countedListener struct {
	net.Listener
	cap *connCap
}

// Accept returns the next connection once it holds a slot (closing
// those of clients past server.max_connections_per_client), and
// net.ErrClosed once shutdown began.
func (l countedListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if slot := l.cap.take(nc, listenerPlain); slot != nil {
			return counted(nc, slot), nil
		}
		if l.cap.stopping() {
			return nil, net.ErrClosed
		}
	}
}
