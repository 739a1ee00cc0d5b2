package gateway

import (
	"crypto/tls"
	"errors"
	"os"
)

// tlsConn is a connection of the TLS listener (HTTP/1.1) that the
// goroutine engine serves, from the listener or from a loop (see
// loopTLS.detach), or that a loop took out to stream a response: fasthttp
// finds it TLS (it has ConnectionState), and the handler too (overTLS).
// Its socket cannot be peeked at for a client that leaves, as a plaintext
// one is (the bytes there are records, and a client that closes sends one
// first), so its watch reads instead (waitLeft), keeping a byte that comes
// for the next Read. Only the goroutine that serves the connection reads
// it, or the watch while that goroutine waits for it (see clientWatch).
type tlsConn struct {
	*tls.Conn
	// ahead is plaintext read already, read before the connection: what
	// an event loop had decrypted when it handed the connection over, or
	// the byte waitLeft read (in one).
	ahead []byte
	one   [1]byte
	closeLinger
	headWatch
}

func (c *tlsConn) Close() error {
	if c.closing(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

func (c *tlsConn) Read(p []byte) (int, error) {
	if err := c.refused(); err != nil {
		return 0, err
	}
	if len(c.ahead) > 0 {
		n := copy(p, c.ahead)
		c.ahead = c.ahead[n:]
		return c.read(p, n, nil)
	}
	n, err := c.Conn.Read(p)
	return c.read(p, n, err)
}

// waitLeft reads from the connection until a byte comes (kept for Read:
// a pipelined request), the connection ends or breaks, or its read
// deadline passes. It reports whether the client left: the connection
// ended or broke.
func (c *tlsConn) waitLeft() bool {
	if len(c.ahead) > 0 {
		return false
	}
	n, err := c.Conn.Read(c.one[:])
	if n > 0 {
		c.ahead = c.one[:1]
		return false
	}
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
