package gateway

import (
	"bufio"
	"errors"
	"io"
	"net/http/httputil"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// smallBody is the largest response body, in bytes, that roundTrip reads
// whole: 64 KiB. The response then leaves in one write and its connection
// goes back to the pool at once. A larger body, or one of unknown length,
// streams, so that a slow client paces the upstream and memory stays flat.
const smallBody = 64 << 10

// maxTrailer bounds the trailer section of a chunked body that is read (and
// dropped) so that its connection can be used again.
const maxTrailer = 8 << 10

// roundTrip sends req over one of hc's connections and reads the response
// into resp: its headers, and its body whole when it is small, else as a
// stream that gives the connection back once read to its end. A zero
// deadline means none. It is HostClient.Do with the body decided by its
// size, which a streaming HostClient cannot do (it streams every body).
//
// When a pooled connection turns out closed by the target before any byte
// of the response (it closed an idle connection as the request went out),
// the target did not process the request, and one that may be sent twice
// (idempotent method or an Idempotency-Key, and a body that is not a
// stream) is sent once more on another connection, as Go's net/http does.
func roundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	err := roundTripOnce(hc, req, resp, deadline)
	if err != nil && stale(err) && replayable(req) {
		err = roundTripOnce(hc, req, resp, deadline)
	}
	if errors.Is(err, io.EOF) {
		err = fasthttp.ErrConnectionClosed
	}
	return err
}

// stale reports whether err is what a connection closed by the target
// gives before any byte of the response.
func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// replayable reports whether req may be sent again after an attempt that
// the target may not have processed.
func replayable(req *fasthttp.Request) bool {
	return !req.IsBodyStream() && (idempotent(req.Header.Method()) || len(req.Header.Peek("Idempotency-Key")) > 0)
}

func roundTripOnce(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	var timeout time.Duration
	if !deadline.IsZero() {
		if timeout = time.Until(deadline); timeout <= 0 {
			return fasthttp.ErrTimeout
		}
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return err
	}
	conn := cc.Conn()
	// Always set: a deadline left by an earlier request must not cut this
	// one, and clearing one that is not armed costs little.
	if err := conn.SetDeadline(deadline); err != nil {
		hc.CloseConn(cc)
		return err
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		hc.CloseConn(cc)
		return timeoutError(err)
	}

	br := hc.AcquireReader(conn)
	err = readResponse(br, resp, req.Header.IsHead())
	// Decided now: the gateway strips the response's Connection header
	// before the body is sent.
	keep := err == nil && !req.ConnectionClose() && !resp.ConnectionClose()
	if err == nil && resp.IsBodyStream() {
		// The connection is the body's until it has been read.
		resp.BodyStream().(*connBody).start(br, keep, func(reuse bool) {
			hc.ReleaseReader(br)
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		})
		return nil
	}
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
	for interim := 0; ; interim++ {
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		if code := resp.StatusCode(); code >= 200 || code < 100 || code == fasthttp.StatusSwitchingProtocols {
			break
		}
		if interim == 10 {
			return errors.New("gateway: too many interim responses")
		}
	}
	code, cl := resp.StatusCode(), resp.Header.ContentLength()
	switch {
	case head || code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified:
		resp.SkipBody = true
		return nil
	case cl >= 0 && cl <= smallBody:
		return resp.ReadBody(br, smallBody)
	}
	resp.SetBodyStream(newConnBody(br, cl), cl)
	return nil
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
	if b.done != nil {
		b.done(b.keep && b.clean)
		b.done = nil
	}
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
