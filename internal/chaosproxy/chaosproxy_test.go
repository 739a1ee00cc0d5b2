package chaosproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests; a passing test never waits
// for it.
const waitLimit = 10 * time.Second

// startEcho starts a line echo server on loopback.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client is a connection through the proxy that sends and reads lines.
type client struct {
	t *testing.T
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, Conn: c, r: bufio.NewReader(c)}
}

// dialReset connects to addr and reads: it returns the error of the dial
// or of the read (a reset may come before the dial returns or after).
func dialReset(addr string) error {
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	_, err = c.Read(make([]byte, 1))
	return err
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read reads a line within d.
func (c *client) read(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func (c *client) expect(want string) {
	c.t.Helper()
	if got, err := c.read(waitLimit); err != nil || got != want {
		c.t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// expectNothing checks that nothing arrives for a while: a fault that
// forwarded the line would most likely have delivered it by then.
func (c *client) expectNothing() {
	c.t.Helper()
	if got, err := c.read(50 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("read %q, %v; want nothing", got, err)
	}
}

func TestPass(t *testing.T) {
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	c.send("hello")
	c.expect("hello")
	if n := p.Accepted(); n != 1 {
		t.Errorf("Accepted = %d, want 1", n)
	}
}

// TestDelay: a delayed line arrives, no earlier than the delay; Pass ends
// the delay.
func TestDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	c.send("warm") // connected before timing
	c.expect("warm")
	p.Delay(d)
	start := time.Now()
	c.send("slow")
	c.expect("slow")
	if took := time.Since(start); took < 2*d { // delayed each way
		t.Errorf("round trip took %v, want at least %v", took, 2*d)
	}
	p.Pass()
	c.send("fast")
	c.expect("fast")
}

// TestBlackhole: nothing passes on an open connection or a new one while
// blackholed, and everything held is delivered, in order, after Pass.
func TestBlackhole(t *testing.T) {
	p := startProxy(t, startEcho(t))
	open := dial(t, p.Addr())
	open.send("before")
	open.expect("before")
	p.Blackhole()
	open.send("held 1")
	open.send("held 2")
	open.expectNothing()
	fresh := dial(t, p.Addr()) // accepted, not connected on
	fresh.send("new")
	fresh.expectNothing()
	p.Pass()
	open.expect("held 1")
	open.expect("held 2")
	fresh.expect("new")
}

// TestReset: open connections are reset, new ones too until Pass.
func TestReset(t *testing.T) {
	p := startProxy(t, startEcho(t))
	open := dial(t, p.Addr())
	open.send("before")
	open.expect("before")
	p.Reset()
	if _, err := open.read(waitLimit); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("open connection after Reset: %v, want a reset", err)
	}
	if err := dialReset(p.Addr()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("new connection after Reset: %v, want a reset", err)
	}
	p.Pass()
	again := dial(t, p.Addr())
	again.send("after")
	again.expect("after")
}

// TestServerDown: a connection to a target that refuses is reset.
func TestServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := startProxy(t, addr)
	if err := dialReset(p.Addr()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("connection to a dead server: %v, want a reset", err)
	}
}

// TestCloseWhileBlackholed: Close ends connections held by a blackhole and
// returns.
func TestCloseWhileBlackholed(t *testing.T) {
	p, err := Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, p.Addr())
	open.send("x")
	open.expect("x")
	p.Blackhole()
	open.send("held")
	fresh := dial(t, p.Addr())
	fresh.send("new")
	fresh.expectNothing()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not return")
	}
	if _, err := open.read(waitLimit); err == nil {
		t.Error("a held connection still open after Close")
	}
}
