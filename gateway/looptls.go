//go:build linux

package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"

	"github.com/panjf2000/gnet/v2"
)

// tlsChunk is the room a loop makes for the plaintext of a record before
// it decrypts one: the most a TLS record holds.
const tlsChunk = 16 << 10

// maxPlainTLS bounds the plaintext a loop keeps decrypted for a client: a
// loop closes a client that sends more than maxPendingIn bytes while it
// cannot take them (see serve), and one read event brings at most gnet's
// read buffer (64 KiB) more. A client whose records hold more closes.
const maxPlainTLS = maxPendingIn + 64<<10

// maxKeptTLSOut is the largest buffer of encrypted records a connection
// keeps between two writes.
const maxKeptTLSOut = 256 << 10

// loopTLS is a connection of the TLS listener served on an event loop
// (HTTP/1.1, or HTTP/2 with server.http2.loops), as the loop's request
// code sees it (clientConn.c, or loopH2.c): a gnet.Conn
// whose read side (Next, Peek, Discard, InboundBuffered, Read, WriteTo)
// is the plaintext of the records the client sent, and whose writes
// (Write, Writev, ReadFrom, AsyncWrite, AsyncWritev) are encrypted on the
// loop, in the order they are made, as TLS numbers its records, and sent
// through the loop's socket (the embedded gnet.Conn, set when the
// connection opens). The loop decrypts what arrives at each read event
// (feed), record by record, until tls.Conn would wait for more.
type loopTLS struct {
	gnet.Conn
	l     *loop
	tc    *tls.Conn
	sw    *sockSwitch
	plain []byte // decrypted; plain[off:] is not consumed yet; nil when none is (see settle)
	off   int
	eof   bool // the client sent close_notify
	h2    bool // the client chose HTTP/2 by ALPN (see serveH2TLS)
	done  bool // taken out of the loop, or closed: nothing more is written
}

var _ gnet.Conn = (*loopTLS)(nil)

// serveTLS has a loop serve tc, a TLS connection whose handshake is done,
// over sw's socket: as HTTP/1.1 when its client chose HTTP/1.1 or named
// nothing, as HTTP/2 when it chose h2 (see serveH2TLS; the TLS listener
// gives it one only with server.http2.loops); the loop takes the socket
// (gnet duplicates it and closes sw's). It
// reports false, and leaves tc alone, when the loops are shutting down or
// the socket is not a TCP one.
func (e *loopEngine) serveTLS(sw *sockSwitch, tc *tls.Conn) bool {
	if _, ok := socketOf(sw.raw).(*net.TCPConn); !ok {
		return false
	}
	e.enrolling.RLock()
	defer e.enrolling.RUnlock()
	if e.draining.Load() {
		return false
	}
	sock, slot := unwrapCounted(sw.raw) // the slot goes with the socket
	sw.raw = nil                        // the loop's from now on
	cc := &clientConn{slot: slot, tls: &loopTLS{tc: tc, sw: sw, h2: tc.ConnectionState().NegotiatedProtocol == "h2"}}
	if _, err := e.cli.EnrollContext(sock, cc); err != nil {
		sw.raw = sock // closed by EnrollContext
		slot.release()
		e.g.log.Warn("serving a TLS connection on a loop", "error", err)
		return true
	}
	cc.enrolled()
	e.tlsConns.Add(1)
	return true
}

// feed decrypts the records that came, after those read before. It
// reports false when the connection is to close: a record that does not
// decrypt, an alert other than close_notify, a write that fails, more
// plaintext waiting than maxPlainTLS, or records that tls.Conn answers
// (a KeyUpdate) while the client leaves more than maxPendingOut bytes
// unread.
func (t *loopTLS) feed() bool {
	buf, _ := t.Conn.Next(-1)
	sw := t.sw
	if len(sw.in) == 0 {
		sw.in = buf // borrowed for this event
	} else {
		sw.in = append(sw.in, buf...)
	}
	ok := t.decrypt()
	// A record not whole yet waits in storage of sw's own: moved to its
	// start, unless it is there already (a record arriving a byte per
	// event would be copied onto itself each time).
	if len(sw.in) > 0 && cap(sw.own) > 0 && &sw.in[0] == &sw.own[:1][0] {
		sw.own = sw.own[:len(sw.in)]
	} else {
		sw.own = append(sw.own[:0], sw.in...)
	}
	sw.in = sw.own
	if len(sw.out) > 0 && t.Conn.OutboundBuffered() > maxPendingOut {
		// tls.Conn answered records (a KeyUpdate that asks for one) of a
		// client that leaves more than maxPendingOut bytes unread: the
		// loop would keep its answers without bound.
		ok = false
	}
	return t.flush() == nil && ok // tls.Conn may have answered (an alert, a KeyUpdate)
}

// decrypt reads tls.Conn while it has a record to read (see
// sockSwitch.recordIn; until it waits for more, errNoRecord, when a
// goroutine's reads may have left it records), or until the client ended
// the stream (close_notify, eof).
func (t *loopTLS) decrypt() bool {
	sw := t.sw
	for !t.eof && (sw.held || sw.recordIn()) {
		if len(t.plain)-t.off > maxPlainTLS {
			return false
		}
		if cap(t.plain)-len(t.plain) < tlsChunk {
			t.grow()
		}
		n, err := t.tc.Read(t.plain[len(t.plain):cap(t.plain)])
		t.plain = t.plain[:len(t.plain)+n]
		switch {
		case err == nil:
		case errors.Is(err, errNoRecord):
			sw.held = false // what it holds is part of a record at most
			return true
		case errors.Is(err, io.EOF):
			t.eof = true
		default:
			return false
		}
	}
	return true
}

// grow makes room for a record's plaintext, moving what is not consumed
// to the start.
func (t *loopTLS) grow() {
	if t.plain == nil {
		t.plain = t.l.plainBuf()
	}
	if t.off > 0 {
		t.plain = t.plain[:copy(t.plain, t.plain[t.off:])]
		t.off = 0
	}
	t.plain = slices.Grow(t.plain, tlsChunk)
}

// settle ends the connection's event: when all its plaintext was
// consumed, its buffer goes back to the loop, so that a connection waiting
// for its next request keeps none.
func (t *loopTLS) settle() {
	l := t.l
	if t.plain == nil || t.InboundBuffered() > 0 || cap(t.plain) > 4*tlsChunk || len(l.plain) >= maxFreePlain {
		return
	}
	l.plain = append(l.plain, t.plain[:0])
	t.plain, t.off = nil, 0
}

// maxFreePlain bounds the free plaintext buffers a loop keeps.
const maxFreePlain = 64

// plainBuf returns a free plaintext buffer of l's, or a new one.
func (l *loop) plainBuf() []byte {
	if n := len(l.plain); n > 0 {
		b := l.plain[n-1]
		l.plain = l.plain[:n-1]
		return b
	}
	return make([]byte, 0, 2*tlsChunk)
}

// consumed moves past n bytes of plaintext.
func (t *loopTLS) consumed(n int) {
	t.off += n
	if t.off == len(t.plain) {
		t.off = 0
		t.plain = t.plain[:0]
		if cap(t.plain) > 4*tlsChunk {
			t.plain = nil // do not keep a large body's buffer
		}
	}
}

// flush sends the records written on the loop.
func (t *loopTLS) flush() error {
	out := t.sw.out
	if len(out) == 0 {
		return nil
	}
	_, err := t.Conn.Write(out) // gnet keeps what the socket does not take
	t.sw.out = out[:0]
	if cap(out) > maxKeptTLSOut {
		t.sw.out = nil
	}
	return err
}

// detach takes the connection out of its loop (see detach) as the
// tls.Conn that goes on with the loop's socket, duplicated: it reads the
// records the loop had and not decrypted before the socket, and its
// reader the plaintext the loop had decrypted and not consumed (a
// tlsConn's ahead) before that.
func (t *loopTLS) detach(slot *connSlot) (net.Conn, error) {
	buf, _ := t.Conn.Next(-1) // none: feed takes all; but never drop a byte
	sw := t.sw
	sw.own = append(append(sw.own[:0], sw.in...), buf...)
	sw.in = sw.own
	nc, err := dupConn(t.Conn)
	if err != nil {
		return nil, err
	}
	t.done = true
	sw.raw = counted(nc, slot)
	ahead := bytes.Clone(t.plain[t.off:])
	t.plain, t.off = nil, 0
	return &tlsConn{Conn: t.tc, ahead: ahead}, nil
}

// enrollTLS puts tc, a connection a loop took out (see loopTLS.detach)
// and that has no plaintext read ahead, back on event loop el, and waits
// until it is there. A connection with plaintext read ahead fails: only
// the goroutine engine takes it.
func enrollTLS(el gnet.EventLoop, tc *tlsConn) error {
	sw, ok := tc.NetConn().(*sockSwitch)
	if !ok || len(tc.ahead) > 0 || sw.raw == nil {
		return errors.New("gateway: bytes read ahead")
	}
	raw := sw.raw
	sw.raw = nil
	if err := enroll(el, raw, &clientConn{tls: &loopTLS{tc: tc.Conn, sw: sw}}); err != nil {
		sw.raw = raw // closed by gnet
		return err
	}
	return nil
}

// The read side: the plaintext.

func (t *loopTLS) Read(p []byte) (int, error) {
	if t.InboundBuffered() == 0 {
		return 0, io.EOF
	}
	n := copy(p, t.plain[t.off:])
	t.consumed(n)
	return n, nil
}

func (t *loopTLS) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(t.plain[t.off:])
	t.consumed(n)
	return int64(n), err
}

func (t *loopTLS) Next(n int) ([]byte, error) {
	b, err := t.Peek(n)
	t.consumed(len(b))
	return b, err
}

func (t *loopTLS) Peek(n int) ([]byte, error) {
	b := t.plain[t.off:]
	if n < 0 {
		return b, nil
	}
	if n > len(b) {
		return b, io.ErrShortBuffer
	}
	return b[:n], nil
}

func (t *loopTLS) Discard(n int) (int, error) {
	if n < 0 || n > t.InboundBuffered() {
		n = t.InboundBuffered()
	}
	t.consumed(n)
	return n, nil
}

func (t *loopTLS) InboundBuffered() int { return len(t.plain) - t.off }

// The write side: encrypted on the loop.

func (t *loopTLS) Write(p []byte) (int, error) {
	if t.done {
		return 0, net.ErrClosed
	}
	n, err := t.tc.Write(p)
	if ferr := t.flush(); err == nil {
		err = ferr
	}
	return n, err
}

func (t *loopTLS) Writev(bs [][]byte) (int, error) {
	var n int
	for _, b := range bs {
		m, err := t.Write(b)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (t *loopTLS) ReadFrom(r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	n, err := t.Write(b)
	return int64(n), err
}

func (t *loopTLS) SendTo([]byte, net.Addr) (int, error) { return 0, errors.ErrUnsupported }

func (t *loopTLS) OutboundBuffered() int { return t.Conn.OutboundBuffered() + len(t.sw.out) }

// AsyncWrite encrypts and sends buf on the connection's loop, whatever
// goroutine calls it, then calls callback (when not nil) there.
func (t *loopTLS) AsyncWrite(buf []byte, callback gnet.AsyncCallback) error {
	return t.AsyncWritev([][]byte{buf}, callback)
}

func (t *loopTLS) AsyncWritev(bs [][]byte, callback gnet.AsyncCallback) error {
	return t.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		_, err := t.Writev(bs)
		if callback != nil {
			return callback(t, err)
		}
		return nil
	}))
}

// closing sends close_notify as the loop closes the connection (gnet
// sends what it holds before it closes the socket), as tls.Conn's Close
// does, unless the connection was taken out of the loop; then it marks
// the connection closed: a write queued for the loop (AsyncWrite) finds it
// so.
func (t *loopTLS) closing() {
	if !t.done {
		_ = t.tc.CloseWrite()
		_ = t.flush()
	}
	t.done = true
}
