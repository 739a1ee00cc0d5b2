// Package chaosproxy is a TCP proxy for tests that puts network faults
// between a client and a server on loopback: it passes the traffic, delays
// it, blackholes it or resets the connections, as the test says, and
// switches at any time for the connections already open as well as new
// ones.
//
// A blackhole loses nothing, as a network path that drops packets loses
// nothing that TCP retransmits once the path heals: bytes already read
// from one side are held, nothing more is read, and when the proxy passes
// traffic again everything held is delivered in order. A peer that closed
// its connection meanwhile still has its bytes delivered to the other side.
package chaosproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does with the traffic.
type Mode uint8

const (
	// Pass forwards everything at once. The initial mode.
	Pass Mode = iota
	// Delay forwards everything after the proxy's delay: each chunk read
	// from one side is written to the other that much later.
	Delay
	// Blackhole forwards nothing and loses nothing: new connections are
	// accepted but not connected to the server, open ones are held as they
	// are, until the mode changes.
	Blackhole
	// Reset resets every open connection (both sides, with a TCP RST) when
	// it is set, and each new one as soon as it is accepted, as a host whose
	// server is down answers: connection refused.
	Reset
)

// String returns "pass", "delay", "blackhole" or "reset".
func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Delay:
		return "delay"
	case Blackhole:
		return "blackhole"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// Proxy forwards the connections it accepts on Addr to a target address.
// Its methods are safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	wg       sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex // protects the fields below
	mode    Mode
	delay   time.Duration
	changed chan struct{} // closed when mode or delay changes, then replaced
	conns   map[net.Conn]struct{}
	closed  bool
}

// Start listens on a free port of 127.0.0.1 and forwards each connection it
// accepts to target, in mode Pass.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaosproxy: listening: %w", err)
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Pass forwards traffic at once again; held bytes are delivered.
func (p *Proxy) Pass() { p.set(Pass, 0) }

// Delay forwards every chunk of traffic d late.
func (p *Proxy) Delay(d time.Duration) { p.set(Delay, d) }

// Blackhole holds all traffic until another mode is set.
func (p *Proxy) Blackhole() { p.set(Blackhole, 0) }

// Reset resets every open connection, and each new one until another mode
// is set.
func (p *Proxy) Reset() {
	p.set(Reset, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		reset(c)
	}
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	close(p.changed) // wakes every held chunk; closed makes them give up
	p.changed = nil
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) set(m Mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.mode, p.delay = m, d
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the mode, the delay and the channel closed on the next
// change; closed reports a closed proxy.
func (p *Proxy) state() (m Mode, d time.Duration, changed <-chan struct{}, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed, p.closed
}

// track adds c to the open connections; it returns false, and closes c, if
// the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects client to the target once the mode allows and forwards
// both ways until both directions end.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.await() {
		reset(client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(client) // the server is down: the client sees its connection reset
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var both sync.WaitGroup
	both.Go(func() { p.forward(server, client) })
	both.Go(func() { p.forward(client, server) })
	both.Wait()
}

// await waits until the mode lets traffic through, and reports whether it
// does (false: Reset, or the proxy is closed).
func (p *Proxy) await() bool {
	for {
		m, _, changed, closed := p.state()
		switch {
		case closed || m == Reset:
			return false
		case m != Blackhole:
			return true
		}
		<-changed
	}
}

// forward copies src to dst, chunk by chunk, as the mode says. When src
// ends, dst's write side is closed; when either fails, both connections
// are closed (reset, under Reset).
func (p *Proxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold() {
				reset(src)
				reset(dst)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
		if err != nil {
			// Under Reset, the other side is reset too, never closed
			// cleanly, whichever of the two Reset reaches first.
			if m, _, _, _ := p.state(); m == Reset {
				reset(dst)
			} else {
				dst.Close()
			}
			return
		}
	}
}

// hold waits as the mode says before a chunk is written: not at all (Pass),
// the delay (Delay), or until the mode changes (Blackhole). It reports
// whether the chunk may be written (false: Reset, or the proxy is closed).
func (p *Proxy) hold() bool {
	for {
		m, d, changed, closed := p.state()
		switch {
		case closed || m == Reset:
			return false
		case m == Pass:
			return true
		case m == Delay:
			t := time.NewTimer(d)
			select {
			case <-t.C:
				return true
			case <-changed:
				t.Stop() // a new mode decides; a delay already waited counts for nothing
			}
		default: // Blackhole
			<-changed
		}
	}
}

// reset closes c with a TCP RST (linger 0) instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
