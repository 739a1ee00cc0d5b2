package upstream

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// strayConn reports whether cc, a connection taken from a target's pool,
// has something to read before a request is sent on it (see strayBytes):
// its target sent bytes after the last response, or closed it. A TLS
// connection that has carried a request is looked into twice: its socket
// (any record is stray: the records a TLS 1.3 server sends after its
// handshake, its session tickets, came before the first response) and
// what the TLS layer holds already read, without waiting (a record that
// came with the response's last). A TLS connection just made is not looked
// into: its handshake's records may still be on their way. What crypto/tls
// writes on reading a record (its answer to a KeyUpdate that asks for one)
// is bounded by write, the request's own write deadline (zero: none).
func strayConn(cc interface {
	Conn() net.Conn
	LastUseTime() time.Time
}, write time.Time) bool {
	c := cc.Conn()
	tc, ok := c.(*tls.Conn)
	if !ok {
		return strayBytes(c)
	}
	if cc.LastUseTime().IsZero() {
		return false // never pooled: a new connection
	}
	return strayBytes(tc.NetConn()) || strayRecord(tc, write)
}

// strayRecord reports whether tc gives data, or an error other than a
// timeout (a close_notify alert: its end), to a read that does not wait:
// its deadline is past, so only what tc holds already read is looked at.
// A timeout leaves tc as it was; the caller sets the request's deadline
// after. A KeyUpdate read so is answered under write: the deadline the
// last request left would fail that answer once past, and crypto/tls
// fails every later write on tc then (the request's).
func strayRecord(tc *tls.Conn, write time.Time) bool {
	if tc.SetReadDeadline(longAgo) != nil || tc.SetWriteDeadline(write) != nil {
		return true
	}
	var b [1]byte
	n, err := tc.Read(b[:])
	var ne net.Error
	return n > 0 || !errors.As(err, &ne) || !ne.Timeout()
}

// longAgo is a deadline in the past.
var longAgo = time.Unix(1, 0)
