// Package wstunnel carries a WebSocket connection's bytes between a client
// and an upstream once the handshake is done: both ways, through a bounded
// buffer each, until either side closes, the connection stays idle too
// long, or the owner sends both sides away (a close frame 1001) as a
// gateway does when it shuts down. It follows the frames as they pass, so
// that the close frames it sends never cut into one.
package wstunnel

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/idle"
)

// Why a tunnel ended, as Run returns it.
const (
	ClientClosed   = "client_closed"   // the client closed its connection, or reading from it failed
	UpstreamClosed = "upstream_closed" // the upstream closed its connection, or reading from it failed
	ClientWrite    = "client_write"    // writing to the client failed or timed out
	UpstreamWrite  = "upstream_write"  // writing to the upstream failed or timed out
	Idle           = "idle_timeout"    // no byte passed either way for Options.IdleTimeout
	GoneAway       = "going_away"      // GoAway ended it
)

// closeFrameWait bounds the write of a close frame by GoAway or an idle
// timeout: it is sent to a side that may not read.
const closeFrameWait = time.Second

// Options configure a Tunnel. The zero value of each field is its
// documented default.
type Options struct {
	// IdleTimeout ends a tunnel through which no byte passed either way
	// for this long, with a close frame 1001 to both sides. Zero means no
	// idle timeout.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to either side: a side that reads
	// nothing for this long ends the tunnel. Zero means no bound.
	WriteTimeout time.Duration
	// BufferSize is the size of each direction's buffer, the most that is
	// read from one side before it is written to the other. Default
	// 32 KiB.
	BufferSize int
	// Clock measures idleness. Nil means clock.Real. Write deadlines are
	// on the wall clock (they are the network's).
	Clock clock.Clock
}

// Stats says how a tunnel ended and how many bytes it carried.
type Stats struct {
	// Reason is why it ended: one of the constants above.
	Reason string
	// Err is the error that ended it, nil when a side closed cleanly,
	// after an idle timeout or GoAway.
	Err error
	// Up and Down count the bytes written to the upstream and to the
	// client.
	Up, Down int64
}

// Tunnel is one WebSocket connection being carried. Run carries it; GoAway
// may be called from any goroutine, at any time, any number of times.
type Tunnel struct {
	client, upstream net.Conn
	opts             Options
	clock            clock.Clock
	// up carries client → upstream, down upstream → client.
	up, down direction
	idle     *idle.Watch  // the idle timeout's; nil without one
	awayBy   atomic.Int64 // wall-clock UnixNano by which writes end once GoAway began; 0 before
	once     sync.Once    // ends the tunnel
	done     chan struct{}
	stats    Stats // written once, by end
}

// direction is one way through the tunnel.
type direction struct {
	mu     sync.Mutex // protects the writes to dst, frames, stopped
	frames frames
	// stopped: the tunnel ended, nothing more is written to dst.
	stopped bool
	masked  bool // close frames to dst are masked (dst is the upstream)
	n       atomic.Int64
}

// New returns a tunnel between client and upstream, whose handshake is
// done: the upstream answered 101 and the client was sent that answer.
// Bytes either side sent after the handshake and that were already read
// must come first from its conn's Read (wrap the conn).
func New(client, upstream net.Conn, opts Options) *Tunnel {
	if opts.BufferSize <= 0 {
		opts.BufferSize = 32 << 10
	}
	t := &Tunnel{client: client, upstream: upstream, opts: opts, clock: clock.Or(opts.Clock), done: make(chan struct{})}
	t.up.masked = true
	return t
}

// Run carries bytes both ways until the tunnel ends, then closes both
// connections and returns how it ended.
func (t *Tunnel) Run() Stats {
	if t.opts.IdleTimeout > 0 {
		t.idle = idle.Start(t.clock, t.opts.IdleTimeout, func() { t.goAway(Idle) })
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.carry(&t.down, t.upstream, t.client, UpstreamClosed, ClientWrite)
	}()
	t.carry(&t.up, t.client, t.upstream, ClientClosed, UpstreamWrite)
	wg.Wait()
	// Both copies may have stopped on GoAway's close frames before GoAway
	// records the end: wait for it (end runs once on every path).
	<-t.done
	s := t.stats
	s.Up, s.Down = t.up.n.Load(), t.down.n.Load()
	return s
}

// GoAway ends the tunnel: each side gets a close frame 1001 (going away),
// unless a frame to it is half written, it was sent a close frame
// already, or it does not read within a second; then both connections are
// closed. Run then returns GoneAway, if the tunnel had not ended already.
func (t *Tunnel) GoAway() { t.goAway(GoneAway) }

// Done is closed once the tunnel has ended.
func (t *Tunnel) Done() <-chan struct{} { return t.done }

func (t *Tunnel) goAway(reason string) {
	// Writes in progress, and those the copies start from now on, end
	// within closeFrameWait, so that the close frames wait for them no
	// longer (the side they write to may not read).
	by := time.Now().Add(closeFrameWait)
	t.awayBy.Store(by.UnixNano())
	_ = t.client.SetWriteDeadline(by)
	_ = t.upstream.SetWriteDeadline(by)
	t.sendClose(&t.down, t.client)
	t.sendClose(&t.up, t.upstream)
	t.end(reason, nil)
}

// sendClose writes a close frame 1001 to dst, once the write in progress
// to it, if any, has ended; not when the tunnel ended, when the bytes
// written so far end inside a frame, or after a close frame.
func (t *Tunnel) sendClose(d *direction, dst net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.stopped = true
	if d.frames.between() && !d.frames.closed {
		_, _ = dst.Write(closeFrame(CloseGoingAway, d.masked))
	}
}

// writeDeadline is the deadline of a write that starts now: the write
// timeout's, or GoAway's when that is sooner; zero for none.
func (t *Tunnel) writeDeadline() time.Time {
	var dl time.Time
	if t.opts.WriteTimeout > 0 {
		dl = time.Now().Add(t.opts.WriteTimeout)
	}
	if by := t.awayBy.Load(); by != 0 && (dl.IsZero() || by < dl.UnixNano()) {
		dl = time.Unix(0, by)
	}
	return dl
}

// carry copies src to dst through d until the tunnel ends. closed is the
// reason when reading src ends, failed when writing to dst fails.
func (t *Tunnel) carry(d *direction, src, dst net.Conn, closed, failed string) {
	buf := make([]byte, t.opts.BufferSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			d.mu.Lock()
			if d.stopped {
				d.mu.Unlock()
				return
			}
			if dl := t.writeDeadline(); !dl.IsZero() {
				_ = dst.SetWriteDeadline(dl)
				// GoAway stores awayBy before it sets its deadline: one
				// that began since writeDeadline read it may have set its
				// sooner deadline before dl replaced it.
				if by := t.awayBy.Load(); by != 0 && by < dl.UnixNano() {
					_ = dst.SetWriteDeadline(time.Unix(0, by))
				}
			}
			w, werr := dst.Write(buf[:n])
			d.frames.feed(buf[:w])
			d.n.Add(int64(w))
			d.mu.Unlock()
			if werr != nil {
				t.end(failed, werr)
				return
			}
			t.touch()
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				err = nil
			}
			t.end(closed, err)
			return
		}
	}
}

// end records why the tunnel ended, the first time only, and closes both
// connections, which ends both copies.
func (t *Tunnel) end(reason string, err error) {
	t.once.Do(func() {
		t.stats.Reason, t.stats.Err = reason, err
		if t.idle != nil {
			t.idle.Stop()
		}
		_ = t.client.Close()
		_ = t.upstream.Close()
		close(t.done)
	})
}

// touch records that a byte passed, for the idle timeout.
func (t *Tunnel) touch() {
	if t.idle != nil {
		t.idle.Touch()
	}
}
