package wstunnel

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// frame builds a WebSocket frame with an n-byte payload, masked or not.
func frame(n int, masked bool) []byte {
	b := []byte{0x82}
	m := byte(0)
	if masked {
		m = 0x80
	}
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if masked {
		b = append(b, 1, 2, 3, 4)
	}
	return append(b, bytes.Repeat([]byte{'x'}, n)...)
}

func TestFramesFollowsBoundaries(t *testing.T) {
	for _, size := range []int{0, 1, 125, 126, 65535, 65536, 70000} {
		for _, masked := range []bool{false, true} {
			var f frames
			fr := frame(size, masked)
			for i, c := range fr {
				if f.between() != (i == 0) {
					t.Fatalf("size %d masked %v: between() = %v at byte %d of %d", size, masked, f.between(), i, len(fr))
				}
				f.feed([]byte{c})
			}
			if !f.between() {
				t.Fatalf("size %d masked %v: not between frames after the whole frame", size, masked)
			}
			two := append(frame(size, masked), frame(3, masked)...)
			f.feed(two[:len(two)-1])
			if f.between() {
				t.Fatalf("size %d masked %v: between frames one byte short", size, masked)
			}
			f.feed(two[len(two)-1:])
			if !f.between() {
				t.Fatalf("size %d masked %v: two frames at once not followed", size, masked)
			}
		}
	}
}

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// started is a tunnel between a client and an upstream, with their far
// ends: client writes what the client sends, upstream what the upstream
// sends.
type started struct {
	tun              *Tunnel
	client, upstream net.Conn
	stats            chan Stats
}

func start(t *testing.T, opts Options) *started {
	client, gwClient := pair(t)
	gwUp, upstream := pair(t)
	s := &started{tun: New(gwClient, gwUp, opts), client: client, upstream: upstream, stats: make(chan Stats, 1)}
	go func() { s.stats <- s.tun.Run() }()
	return s
}

func (s *started) wait(t *testing.T) Stats {
	t.Helper()
	select {
	case st := <-s.stats:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end")
		return Stats{}
	}
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// readClosed reads what c gets until its end and returns it.
func readClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to the end: %v", err)
	}
	return b
}

func TestTunnelCarriesBothWaysUntilAClose(t *testing.T) {
	s := start(t, Options{BufferSize: 512})
	const rounds = 200
	for i := range rounds {
		up, down := frame(i*7%300, true), frame(i*11%300, false)
		if _, err := s.client.Write(up); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, s.upstream, len(up)); !bytes.Equal(got, up) {
			t.Fatalf("round %d: the upstream got other bytes", i)
		}
		if _, err := s.upstream.Write(down); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, s.client, len(down)); !bytes.Equal(got, down) {
			t.Fatalf("round %d: the client got other bytes", i)
		}
	}
	s.upstream.Close()
	st := s.wait(t)
	if st.Reason != UpstreamClosed || st.Err != nil {
		t.Errorf("ended %q (%v), want %q", st.Reason, st.Err, UpstreamClosed)
	}
	if rest := readClosed(t, s.client); len(rest) != 0 {
		t.Errorf("the client got %d more bytes, want its connection closed", len(rest))
	}
	var up, down int64
	for i := range rounds {
		up += int64(len(frame(i*7%300, true)))
		down += int64(len(frame(i*11%300, false)))
	}
	if st.Up != up || st.Down != down {
		t.Errorf("counted %d up, %d down; want %d, %d", st.Up, st.Down, up, down)
	}
}

func TestTunnelGoAwaySendsClose1001BothWays(t *testing.T) {
	s := start(t, Options{})
	msg := frame(10, true)
	if _, err := s.client.Write(msg); err != nil {
		t.Fatal(err)
	}
	readN(t, s.upstream, len(msg))
	s.tun.GoAway()
	st := s.wait(t)
	if st.Reason != GoneAway {
		t.Errorf("ended %q, want %q", st.Reason, GoneAway)
	}
	if got := readClosed(t, s.client); !bytes.Equal(got, []byte{0x88, 2, 0x03, 0xE9}) {
		t.Errorf("the client got % x, want a close frame 1001", got)
	}
	got := readClosed(t, s.upstream)
	if len(got) != 8 || got[0] != 0x88 || got[1] != 0x82 || got[6]^got[2] != 0x03 || got[7]^got[3] != 0xE9 {
		t.Errorf("the upstream got % x, want a masked close frame 1001", got)
	}
}

func TestTunnelGoAwayNeverCutsAFrame(t *testing.T) {
	s := start(t, Options{})
	half := frame(100, false)[:50] // the upstream is sending a frame
	if _, err := s.upstream.Write(half); err != nil {
		t.Fatal(err)
	}
	readN(t, s.client, len(half))
	s.tun.GoAway()
	s.wait(t)
	if got := readClosed(t, s.client); len(got) != 0 {
		t.Errorf("the client got % x in the middle of a frame, want the connection closed", got)
	}
	if got := readClosed(t, s.upstream); len(got) != 8 {
		t.Errorf("the upstream got % x, want its close frame (nothing is half sent to it)", got)
	}
}

func TestTunnelIdleTimeout(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	const idle = time.Minute
	s := start(t, Options{IdleTimeout: idle, Clock: clk})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// advance moves the clock and returns how the tunnel ended, or nil once
	// the watcher has armed its next timer. (A copy records the time of a
	// write once the write has returned, which may be after the test read
	// the bytes and moved the clock: the test cannot tell which instant
	// the watcher measures from, only that it ends the tunnel once
	// silence lasts.)
	advance := func(d time.Duration) *Stats {
		t.Helper()
		clk.Advance(d)
		armed := make(chan error, 1)
		go func() { armed <- clk.BlockUntil(ctx, 1) }()
		select {
		case st := <-s.stats:
			return &st
		case err := <-armed:
			if err != nil {
				t.Fatal(err)
			}
			return nil
		}
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(idle * 6 / 10)
	msg := frame(5, true) // activity at 0.6 of the timeout
	if _, err := s.client.Write(msg); err != nil {
		t.Fatal(err)
	}
	readN(t, s.upstream, len(msg))
	if st := advance(idle * 6 / 10); st != nil { // the first timer fires
		t.Fatalf("ended %q although a byte passed within the idle timeout", st.Reason)
	}
	if _, err := s.upstream.Write(msg); err != nil {
		t.Fatal(err)
	}
	readN(t, s.client, len(msg))
	var st *Stats
	for i := 0; i < 3 && st == nil; i++ { // silent for the whole timeout, and more
		st = advance(idle)
	}
	if st == nil {
		t.Fatal("the tunnel did not end after three idle timeouts of silence")
	}
	if st.Reason != Idle {
		t.Errorf("ended %q, want %q", st.Reason, Idle)
	}
	if got := readClosed(t, s.client); !bytes.Equal(got, []byte{0x88, 2, 0x03, 0xE9}) {
		t.Errorf("the client got % x, want a close frame 1001", got)
	}
}

func TestTunnelGoAwayAfterACloseFrameSendsNoOther(t *testing.T) {
	s := start(t, Options{})
	clientClose := []byte{0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xE8 ^ 2} // 1000, masked
	if _, err := s.client.Write(clientClose); err != nil {
		t.Fatal(err)
	}
	readN(t, s.upstream, len(clientClose))
	s.tun.GoAway()
	s.wait(t)
	if got := readClosed(t, s.upstream); len(got) != 0 {
		t.Errorf("the upstream got % x after the client's close frame, want nothing more", got)
	}
	if got := readClosed(t, s.client); !bytes.Equal(got, []byte{0x88, 2, 0x03, 0xE9}) {
		t.Errorf("the client got % x, want a close frame 1001", got)
	}
}

// deadlineConn records the write deadline in force at its first Write.
// Its first SetWriteDeadline signals first and waits for release before
// the deadline takes effect; its second signals second.
type deadlineConn struct {
	net.Conn
	first, second, release chan struct{}
	mu                     sync.Mutex // protects calls, set, atWrite, wrote
	calls                  int
	set, atWrite           time.Time
	wrote                  bool
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	switch n {
	case 1:
		close(c.first)
		<-c.release
	case 2:
		close(c.second)
	}
	c.mu.Lock()
	c.set = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.wrote {
		c.wrote, c.atWrite = true, c.set
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestTunnelGoAwayDeadlineBeatsAWriteStarting: GoAway's deadline, set
// while a copy sets the write timeout's for the write it is about to
// start, bounds that write (else a side that reads nothing keeps GoAway
// waiting for the write timeout).
func TestTunnelGoAwayDeadlineBeatsAWriteStarting(t *testing.T) {
	client, gwClient := pair(t)
	gwUp, upstream := pair(t)
	dc := &deadlineConn{Conn: gwClient, first: make(chan struct{}), second: make(chan struct{}), release: make(chan struct{})}
	tun := New(dc, gwUp, Options{WriteTimeout: time.Hour})
	stats := make(chan Stats, 1)
	go func() { stats <- tun.Run() }()
	if _, err := upstream.Write(frame(10, false)); err != nil {
		t.Fatal(err)
	}
	<-dc.first // the copy to the client is setting the write timeout's deadline
	went := make(chan struct{})
	go func() { tun.GoAway(); close(went) }()
	<-dc.second // GoAway set its own
	close(dc.release)
	<-went
	select {
	case <-stats:
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end")
	}
	_ = client.Close()
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if left := time.Until(dc.atWrite); left > 2*closeFrameWait {
		t.Fatalf("the copy's write ran under a deadline %v away, want GoAway's (within %v)", left, closeFrameWait)
	}
}
