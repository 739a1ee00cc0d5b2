package gateway

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	prefix []byte
	closeLinger
	headWatch // when the goroutine engine serves it
}

func (c *prefixConn) Close() error {
	if c.closing(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

// SyscallConn gives the socket once its first bytes are read (see
// clientWatch), and fails before.
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok || len(c.prefix) > 0 {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if err := c.refused(); err != nil {
		return 0, err
	}
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return c.read(p, n, nil)
	}
	n, err := c.Conn.Read(p)
	return c.read(p, n, err)
}

// handoffListener gives the goroutine engine the connections the loops
// hand over, as if it had accepted them.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn, 256), done: make(chan struct{})}
}

// deliver queues c for Accept without blocking the caller (a loop); once
// the listener is closed, c is closed instead. A c queued as Close
// begins is closed too (see closeQueued).
func (l *handoffListener) deliver(c net.Conn) {
	select {
	case <-l.done:
		_ = c.Close()
		return
	default:
	}
	select {
	case l.ch <- c:
		l.closeQueued()
	default:
		go func() {
			select {
			case l.ch <- c:
				l.closeQueued()
			case <-l.done:
				_ = c.Close()
			}
		}()
	}
}

// closeQueued, once the listener is closed, closes the connections still
// queued. A delivery calls it after queuing: Close may have emptied the
// queue before the connection went in (Close closes done first, so a
// delivery that finds done open is emptied by Close's own loop).
func (l *handoffListener) closeQueued() {
	select {
	case <-l.done:
	default:
		return
	}
	for {
		select {
		case c := <-l.ch:
			_ = c.Close()
		default:
			return
		}
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and closes the connections still queued for it.
func (l *handoffListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.closeQueued()
	})
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }
