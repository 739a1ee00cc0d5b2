package gateway

import (
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/upstream"
)

// watchDelay is how long a request waits for its upstream before the
// goroutine engine starts watching its client's connection (see
// clientWatch): most requests are answered sooner, and spare the watch.
const watchDelay = 100 * time.Millisecond

// aLongTimeAgo is a deadline that has passed: setting it ends the I/O in
// progress.
var aLongTimeAgo = time.Unix(1, 0)

// clientWatch cancels a request on the goroutine engine whose client
// closes its connection while the request waits for its upstream, as
// nginx does: the attempt under way is cut (its upstream connection is
// closed, not pooled) and no other starts. After watchDelay a goroutine
// waits for the client's connection to turn readable and peeks at it: the
// end of the stream (or a reset) fires cut with errClientGone, while bytes
// (a pipelined request) end the watch. A client that only shuts down its
// sending side is taken to have left, as by nginx. Once made with init, a
// clientWatch serves one request after another (arm, then stop).
type clientWatch struct {
	cut   upstream.Interrupt
	timer *time.Timer // starts the watch

	mu   sync.Mutex    // protects conn and done
	conn net.Conn      // the client's connection; nil when not armed
	done chan struct{} // closed when the watching goroutine returns; nil when none runs
}

// streamConn is the connection of a request that is a stream of its own
// (HTTP/2): left is closed when the client resets the stream or leaves,
// and unwatched once SetReadDeadline was given a time that has passed
// (which ends a watch, see stop).
type streamConn interface {
	left() <-chan struct{}
	unwatched() <-chan struct{}
}

func (w *clientWatch) init() {
	w.timer = time.AfterFunc(time.Hour, w.start)
	w.timer.Stop()
}

// arm watches c from watchDelay on, for the request that starts now.
func (w *clientWatch) arm(c net.Conn) {
	w.cut = upstream.Interrupt{}
	w.mu.Lock()
	w.conn = c
	w.mu.Unlock()
	w.timer.Reset(watchDelay)
}

// stop ends the watch, and waits for its goroutine to return.
func (w *clientWatch) stop() {
	w.timer.Stop()
	w.mu.Lock()
	c, done := w.conn, w.done
	w.conn, w.done = nil, nil
	w.mu.Unlock()
	if done != nil {
		_ = c.SetReadDeadline(aLongTimeAgo) // ends the wait
		<-done
		_ = c.SetReadDeadline(time.Time{}) // the server sets its own next
	}
}

func (w *clientWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil || w.done != nil {
		return
	}
	if s, ok := w.conn.(streamConn); ok {
		// A request of the HTTP/2 engine: its stream tells when its
		// client left.
		done := make(chan struct{})
		w.done = done
		go func() {
			defer close(done)
			select {
			case <-s.left():
				w.cut.Fire(errClientGone)
			case <-s.unwatched():
			}
		}()
		return
	}
	var gone func() bool // waits, and reports whether the client left
	if r, ok := w.conn.(readWatched); ok {
		gone = r.waitLeft
	} else if sc, ok := w.conn.(syscall.Conn); ok {
		raw, err := sc.SyscallConn()
		if err != nil {
			return
		}
		gone = func() bool { return left(raw) }
	} else {
		return
	}
	done := make(chan struct{})
	w.done = done
	go func() {
		defer close(done)
		if gone() {
			w.cut.Fire(errClientGone)
		}
	}()
}

// readWatched is a connection that cannot be peeked at (TLS, see
// tlsConn): waitLeft reads from it until bytes come, it ends, or its
// read deadline passes, and reports whether its peer left.
type readWatched interface {
	waitLeft() bool
}
