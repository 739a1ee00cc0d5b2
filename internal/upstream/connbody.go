package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"time"
)

// maxTrailer bounds the trailer section of a chunked body that is read (and
// dropped) so that its connection can be used again.
const maxTrailer = 8 << 10

// ConnBody is a response body streaming from a target's connection: of a
// known length, chunked, or up to the connection's end (the connection
// cannot serve again). The connection goes back to its pool when the body
// was read to its end (and a chunked body's trailer after it), and is
// closed otherwise. Its BodyEnd counts what its reader took and runs a
// function when it is closed (not held). Read and Close must not be called
// concurrently (the server reads, then closes).
type ConnBody struct {
	br      *bufio.Reader
	left    int64 // bytes to go; negative: chunked or up to the end
	chunked io.Reader
	keep    bool             // the connection may be used again
	clean   bool             // the body was read to its end
	done    func(reuse bool) // nil once called

	// When set, each read gives conn, the target's connection, a read
	// deadline (Trip.waitUntil), and each read that brings bytes gives
	// client, the client's connection, a write deadline send from then
	// (not past the trip's Deadline): a target that stalls, or a client
	// that stops reading, ends the stream.
	conn   net.Conn
	trip   Trip
	client net.Conn
	send   time.Duration
	held   bool // Close does nothing: the body outlives its response
	BodyEnd
}

// NewConnBody returns a body of cl bytes (-1: chunked; -2: up to the
// connection's end) to be read from br, once started.
func NewConnBody(br *bufio.Reader, cl int) *ConnBody {
	b := &ConnBody{left: int64(cl)}
	if cl == -1 {
		b.chunked = httputil.NewChunkedReader(br)
	}
	return b
}

// Start lets b read from br, which reads conn, within tr's Deadline and
// Wait (tr's Head and Cut are not used); done gives the connection back,
// told whether it may be used again: keep (the response allows it) and
// the body was read to its end.
func (b *ConnBody) Start(br *bufio.Reader, conn net.Conn, tr Trip, keep bool, done func(reuse bool)) {
	b.br, b.conn, b.trip, b.done = br, conn, tr, done
	b.keep = keep && (b.left >= 0 || b.chunked != nil)
}

// Pace makes c, the client's connection the body is sent to, get a write
// deadline d after each read that brings bytes (not past the trip's
// Deadline); d <= 0 sets none.
func (b *ConnBody) Pace(c net.Conn, d time.Duration) { b.client, b.send = c, d }

// Hold sets whether b outlives its response: while held, Close does
// nothing.
func (b *ConnBody) Hold(held bool) { b.held = held }

func (b *ConnBody) Read(p []byte) (int, error) {
	if b.conn != nil && b.trip.Wait > 0 {
		_ = b.conn.SetReadDeadline(b.trip.waitUntil(time.Now()))
	}
	n, err := b.read(p)
	b.Took(n, err)
	if n > 0 && b.client != nil && b.send > 0 {
		dl := time.Now().Add(b.send)
		if !b.trip.Deadline.IsZero() && b.trip.Deadline.Before(dl) {
			dl = b.trip.Deadline
		}
		_ = b.client.SetWriteDeadline(dl)
	}
	return n, err
}

func (b *ConnBody) read(p []byte) (int, error) {
	switch {
	case b.clean:
		return 0, io.EOF
	case b.chunked != nil:
		n, err := b.chunked.Read(p)
		if err == io.EOF {
			if terr := skipTrailer(b.br); terr != nil {
				return n, terr
			}
			b.clean = true
		}
		return n, err
	case b.left < 0:
		n, err := b.br.Read(p)
		b.clean = err == io.EOF
		return n, err
	}
	if b.left == 0 {
		b.clean = true
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	b.clean = b.left == 0 // a reader of a known length may stop here
	if err == io.EOF && !b.clean {
		return n, io.ErrUnexpectedEOF // the target closed before the end
	}
	return n, err
}

// Close gives the connection back (or closes it, when the body was not
// read to its end) and ends its BodyEnd; it does nothing while b is
// held. It always returns nil.
func (b *ConnBody) Close() error {
	if b.held {
		return nil
	}
	if b.done != nil {
		b.done(b.keep && b.clean)
		b.done = nil
	}
	b.End()
	return nil
}

// skipTrailer reads the trailer section that follows a chunked body's last
// chunk, up to and including its empty line, and drops it (trailers are not
// forwarded).
func skipTrailer(br *bufio.Reader) error {
	read := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if read += len(line); read > maxTrailer {
			return errors.New("gateway: trailer too large")
		}
		if len(line) <= 2 { // "\r\n" or "\n"
			return nil
		}
	}
}
