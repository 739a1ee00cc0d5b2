package gateway

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// countWarnings is a slog handler that counts the warnings logged.
type countWarnings struct{ n atomic.Int64 }

func (h *countWarnings) Enabled(context.Context, slog.Level) bool { return true }
func (h *countWarnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h *countWarnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countWarnings) WithGroup(string) slog.Handler      { return h }

// takeAsync takes a slot for a new connection on a goroutine; the slot
// comes on the channel returned.
func takeAsync(c *connCap) <-chan *connSlot {
	got := make(chan *connSlot, 1)
	a, b := net.Pipe()
	go func() {
		got <- c.take(a, listenerPlain)
		b.Close()
	}()
	return got
}

// awaitCapWaits waits until c has counted n waits (bounded).
func awaitCapWaits(t *testing.T, c *connCap, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for c.waits.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits, want %d", c.waits.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnCapWaitsAndWarns: past its bound a take waits, counted, until a
// slot is released; a warning is logged at most once per connWarnEvery of
// the clock; a slot released twice frees one place; stop ends a wait.
func TestConnCapWaitsAndWarns(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	h := &countWarnings{}
	c := &connCap{clock: fc, log: slog.New(h)}
	c.setBounds(1, 0)
	a, _ := net.Pipe()
	first := c.take(a, listenerTLS)
	second := takeAsync(c)
	awaitCapWaits(t, c, 1)
	first.release()
	first.release() // once only
	s2 := <-second
	if got := c.opened(); got[listenerPlain] != 1 || got[listenerTLS] != 0 {
		t.Fatalf("open %v, want one plain", got)
	}
	third := takeAsync(c)
	awaitCapWaits(t, c, 2)
	if n := h.n.Load(); n != 1 {
		t.Errorf("%d warnings within connWarnEvery, want 1", n)
	}
	s2.release()
	s3 := <-third
	fc.Advance(connWarnEvery)
	fourth := takeAsync(c)
	awaitCapWaits(t, c, 3)
	if n := h.n.Load(); n != 2 {
		t.Errorf("%d warnings after connWarnEvery, want 2", n)
	}
	c.stop()
	if s := <-fourth; s != nil {
		t.Errorf("a wait ended by stop took a slot")
	}
	s3.release()
	if got := c.opened(); got != [listenerKinds]int64{} {
		t.Errorf("open %v after every release, want none", got)
	}
}

// TestCountedConnReleasesOnce: closing a countedConn frees its slot once,
// however often it is closed; a slot taken out (unwrapCounted) and put
// back (restoreCounted) is freed by the next Close.
func TestCountedConnReleasesOnce(t *testing.T) {
	c := &connCap{clock: clock.NewFake(time.Time{}), log: slog.New(&countWarnings{})}
	a, b := net.Pipe()
	defer b.Close()
	nc := counted(a, c.take(a, listenerPlain))
	sock, slot := unwrapCounted(nc)
	if sock != a || slot == nil {
		t.Fatalf("unwrapCounted: %v, %v", sock, slot)
	}
	_ = nc.Close() // holds no slot now
	if got := c.opened()[listenerPlain]; got != 1 {
		t.Fatalf("open %d after closing an emptied countedConn, want 1", got)
	}
	restoreCounted(nc, slot)
	_ = nc.Close()
	_ = nc.Close()
	if got := c.opened()[listenerPlain]; got != 0 {
		t.Errorf("open %d after closing twice, want 0", got)
	}
}

// addrConn is a net.Conn whose peer is addr.
type addrConn struct {
	net.Conn
	addr *net.TCPAddr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

// TestClientOf: server.max_connections_per_client counts an IPv6 client
// by its /64 and an IPv4 one (mapped or not) by its address.
func TestClientOf(t *testing.T) {
	of := func(ip string) netip.Addr {
		return clientOf(addrConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}})
	}
	if a, b := of("2001:db8:1:2::1"), of("2001:db8:1:2:ffff::9"); a != b || a != netip.MustParseAddr("2001:db8:1:2::") {
		t.Errorf("one /64: %v and %v", a, b)
	}
	if a, b := of("2001:db8:1:2::1"), of("2001:db8:1:3::1"); a == b {
		t.Errorf("two /64s counted as one: %v", a)
	}
	if a, b := of("::ffff:192.0.2.1"), of("192.0.2.1"); a != b || a != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("IPv4: %v and %v", a, b)
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if a := clientOf(p); a.IsValid() {
		t.Errorf("no IP peer: %v", a)
	}
}
