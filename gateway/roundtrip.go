package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// maxTrailer bounds the trailer section of a chunked body that is read (and
// dropped) so that its connection can be used again.
const maxTrailer = 8 << 10

// trip bounds one exchange with a target.
type trip struct {
	// head is when the response's head must have come (see
	// lifecycle.headLimit); zero means no limit.
	head time.Time
	// deadline is the attempt's end, a streamed body included (the route's
	// timeout); zero means none.
	deadline time.Time
	// wait bounds each wait between two reads of a streamed body
	// (target.wait); zero means none.
	wait time.Duration
	// cut, when not nil, ends the exchange when its client leaves.
	cut *interrupt
}

// attemptTrip returns the bounds of attempt a of a call on lc (see
// lifecycle.headLimit); cut ends it when the client leaves.
func attemptTrip(lc *lifecycle, a *attempt, cut *interrupt) trip {
	tr := trip{wait: a.t.wait, cut: cut}
	if d := lc.headLimit(); d > 0 {
		tr.head = a.start.Add(d)
	}
	if lc.timeout > 0 {
		tr.deadline = a.start.Add(lc.timeout)
	}
	return tr
}

// waitUntil returns when a wait for a streamed body's next bytes that
// starts now ends.
func (tr *trip) waitUntil(now time.Time) time.Time {
	if tr.wait <= 0 {
		return tr.deadline
	}
	w := now.Add(tr.wait)
	if tr.deadline.IsZero() || w.Before(tr.deadline) {
		return w
	}
	return tr.deadline
}

// roundTrip sends req over one of hc's connections and reads the response
// into resp: its headers, and its body whole when it is small, else as a
// stream that gives the connection back once read to its end. It is
// HostClient.Do with the body decided by its size, which a streaming
// HostClient cannot do (it streams every body).
//
// A pooled connection with bytes to read before the request is sent (the
// target sent more than its last response: a body after a 204, unasked
// data) or that the target has closed is closed and another taken, so that
// stray bytes never reach another client; so is one that holds bytes after
// the response it carried. (TLS connections are not checked before a
// request: their records cannot be told apart without reading them.)
//
// When a pooled connection turns out closed by the target before any byte
// of the response (it closed an idle connection as the request went out),
// the target did not process the request, and one that may be sent twice
// (idempotent method or an Idempotency-Key, and a body that is not a
// stream) is sent once more on another connection, as Go's net/http does.
func roundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, tr trip) error {
	err := roundTripOnce(hc, req, resp, &tr)
	if err != nil && stale(err) && replayable(req) {
		err = roundTripOnce(hc, req, resp, &tr)
	}
	if errors.Is(err, io.EOF) {
		err = fasthttp.ErrConnectionClosed
	}
	return err
}

// stale reports whether err is what a connection closed by the target
// gives before any byte of the response (see noResponseError). A response
// cut short after its first byte was read is no stale connection: the
// target got the request and answered, however badly, and it is not sent
// again.
func stale(err error) bool {
	var nr *noResponseError
	return errors.As(err, &nr) &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// noResponseError is an error met before any byte of the response was
// read: in sending the request, or in waiting for the response's first
// byte.
type noResponseError struct{ err error }

func (e *noResponseError) Error() string { return e.err.Error() }
func (e *noResponseError) Unwrap() error { return e.err }

// replayable reports whether req may be sent again after an attempt that
// the target may not have processed.
func replayable(req *fasthttp.Request) bool {
	return !req.IsBodyStream() && (idempotent(req.Header.Method()) || len(req.Header.Peek("Idempotency-Key")) > 0)
}

// maxDirty bounds how many pooled connections with stray bytes one
// attempt closes before it dials a new one.
const maxDirty = 4

func roundTripOnce(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, tr *trip) error {
	var timeout time.Duration
	if !tr.head.IsZero() {
		if timeout = time.Until(tr.head); timeout <= 0 {
			return fasthttp.ErrTimeout
		}
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	for dirty := 0; err == nil && dirty < maxDirty && strayBytes(cc.Conn()); dirty++ {
		hc.CloseConn(cc)
		cc, err = hc.AcquireConn(timeout, req.ConnectionClose())
	}
	if err != nil {
		return err
	}
	conn := cc.Conn()
	if err := tr.cut.set(conn); err != nil {
		hc.CloseConn(cc)
		return err
	}
	// Always set: a deadline left by an earlier request must not cut this
	// one, and clearing one that is not armed costs little.
	err = conn.SetDeadline(tr.head)
	if err == nil {
		bw := hc.AcquireWriter(conn)
		err = req.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		hc.ReleaseWriter(bw)
	}
	if err != nil {
		hc.CloseConn(cc)
		return tr.cut.clear(timeoutError(&noResponseError{err}))
	}

	br := hc.AcquireReader(conn)
	err = tr.cut.clear(readResponse(br, resp, req.Header.IsHead()))
	// Decided now: the gateway strips the response's Connection header
	// before the body is sent.
	keep := err == nil && !req.ConnectionClose() && !resp.ConnectionClose()
	if err == nil && resp.IsBodyStream() {
		// The connection is the body's until it has been read.
		body := resp.BodyStream().(*connBody)
		body.conn, body.trip = conn, *tr
		body.trip.cut = nil // the client's side ends the stream itself
		body.start(br, keep, func(reuse bool) {
			reuse = reuse && br.Buffered() == 0
			hc.ReleaseReader(br)
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		})
		return nil
	}
	keep = keep && br.Buffered() == 0 // bytes after the response: not HTTP
	hc.ReleaseReader(br)
	if keep {
		hc.ReleaseConn(cc)
	} else {
		hc.CloseConn(cc)
	}
	return timeoutError(err)
}

// readResponse reads resp's headers from br, skipping interim (1xx)
// responses, then its body: whole when it is small, else as a *connBody
// left to start.
func readResponse(br *bufio.Reader, resp *fasthttp.Response, head bool) error {
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true) // as the gateway's server: send only the target's
	for n := 1; ; n++ {
		if _, err := br.Peek(1); err != nil {
			if n == 1 {
				return &noResponseError{err}
			}
			return err
		}
		if b, _ := br.Peek(br.Buffered()); bothFramings(b) {
			return errFraming
		}
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		// The answer to the client is the gateway's own message, in its
		// version: an HTTP/1.0 status line on a body the gateway frames
		// (chunked) would leave the client to read up to the close.
		resp.Header.SetProtocol(http11)
		skip, err := http1.Interim(resp.StatusCode(), n)
		if err != nil {
			return err
		}
		if !skip {
			break
		}
	}
	cl := resp.Header.ContentLength()
	switch http1.ResponseBody(head, resp.StatusCode(), cl) {
	case http1.BodyNone:
		resp.SkipBody = true
		return nil
	case http1.BodyWhole:
		return resp.ReadBody(br, http1.SmallBody)
	}
	resp.SetBodyStream(newConnBody(br, cl), cl)
	return nil
}

// errFraming is the error of a response with both a Content-Length and a
// Transfer-Encoding: which of them frames the body is a guess (RFC 9112
// section 6.3 lets Transfer-Encoding win, and asks to close the connection
// after), and the mismatch is how responses are split, so the gateway
// refuses it, as nginx does.
var errFraming = errors.New("gateway: response with both Content-Length and Transfer-Encoding")

// bothFramings reports whether the header section at the start of b (the
// whole of b when it does not end there) has both a Content-Length and a
// Transfer-Encoding field.
func bothFramings(b []byte) bool {
	cl, te := false, false
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) <= 1 { // "\r" or "": the end of the section
			break
		}
		switch line[0] | 0x20 {
		case 'c':
			cl = cl || hasName(line, "content-length:")
		case 't':
			te = te || hasName(line, "transfer-encoding:")
		}
	}
	return cl && te
}

// hasName reports whether line starts with name, in any case.
func hasName(line []byte, name string) bool {
	return len(line) >= len(name) && strings.EqualFold(string(line[:len(name)]), name)
}

// timeoutError maps a network timeout to fasthttp.ErrTimeout.
func timeoutError(err error) error {
	if err == nil {
		return nil
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return fasthttp.ErrTimeout
	}
	return err
}

// connBody is a response body streaming from an upstream connection: of a
// known length (left bytes to go), chunked, or up to the connection's end
// (left negative and not chunked; the connection cannot serve again). The
// connection goes back to its pool when the body was read to its end (and
// a chunked body's trailer after it), and is closed otherwise. Read and
// Close must not be called concurrently (the server reads, then closes).
type connBody struct {
	br      *bufio.Reader
	left    int64
	chunked io.Reader
	keep    bool             // the connection may be used again
	clean   bool             // the body was read to its end
	done    func(reuse bool) // nil once called

	// When set, each read gives conn, the target's connection, a read
	// deadline (trip.waitUntil), and each read that brings bytes gives
	// client, the client's connection, a write deadline send from then
	// (server.write_timeout; not past trip.deadline): a target that stalls,
	// or a client that stops reading, ends the stream.
	conn   net.Conn
	trip   trip
	client net.Conn
	send   time.Duration
	held   bool // Close does nothing: the body outlives its response (see hold)
	endHook
}

// newConnBody returns a body of cl bytes (-1: chunked; -2: up to the
// connection's end) to be read from br, once started.
func newConnBody(br *bufio.Reader, cl int) *connBody {
	b := &connBody{left: int64(cl)}
	if cl == -1 {
		b.chunked = httputil.NewChunkedReader(br)
	}
	return b
}

// start lets b read from br; done gives the connection back.
func (b *connBody) start(br *bufio.Reader, keep bool, done func(reuse bool)) {
	b.br, b.done = br, done
	b.keep = keep && (b.left >= 0 || b.chunked != nil)
}

func (b *connBody) Read(p []byte) (int, error) {
	if b.conn != nil && b.trip.wait > 0 {
		_ = b.conn.SetReadDeadline(b.trip.waitUntil(time.Now()))
	}
	n, err := b.read(p)
	b.took(n, err)
	if n > 0 && b.client != nil && b.send > 0 {
		dl := time.Now().Add(b.send)
		if !b.trip.deadline.IsZero() && b.trip.deadline.Before(dl) {
			dl = b.trip.deadline
		}
		_ = b.client.SetWriteDeadline(dl)
	}
	return n, err
}

// paceClient makes the client's connection c, with server.write_timeout
// d, the one the body of a response streaming from a target goes to (see
// connBody). body is the response's body stream.
func paceClient(body io.Reader, c net.Conn, d time.Duration) {
	switch b := body.(type) {
	case *connBody:
		b.client, b.send = c, d
	case *upstreamBody:
		paceClient(b.r, c, d)
	}
}

func (b *connBody) read(p []byte) (int, error) {
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

func (b *connBody) Close() error {
	if b.held {
		return nil
	}
	if b.done != nil {
		b.done(b.keep && b.clean)
		b.done = nil
	}
	b.end()
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
