package upstream

import (
	"bufio"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// http11 is the protocol of every response RoundTrip reads.
var http11 = []byte("HTTP/1.1")

// RoundTrip sends req over one of hc's connections and reads the response
// into resp: its headers, and its body whole when it is at most
// http1.SmallBody long, else as a *ConnBody stream that gives the
// connection back once read to its end (or closes it when closed before).
// It is HostClient.Do with the body decided by its size, which a streaming
// HostClient cannot do (it streams every body). Interim (1xx) responses
// are skipped, http1.MaxInterim at most; a response with both a
// Content-Length and a Transfer-Encoding is refused (http1.ErrFraming),
// and so is one with a field name that is not a token (http1.ErrBadName)
// or a status outside 100 to 599 (http1.ErrBadStatus). The
// response's protocol is always HTTP/1.1 and it gets no default
// Content-Type. A timeout (tr's Head passed, or a network timeout) is
// fasthttp.ErrTimeout, and a connection closed by the target is
// fasthttp.ErrConnectionClosed.
//
// A pooled connection with bytes to read before the request is sent (the
// target sent more than its last response: a body after a 204, unasked
// data) or that the target has closed is closed and another taken, so that
// stray bytes never reach another client (over TLS too: see strayConn);
// so is one that holds bytes after the response it carried.
//
// When a pooled connection turns out closed by the target before any byte
// of the response (it closed an idle connection as the request went out),
// the target did not process the request, and one that may be sent twice
// (idempotent method or an Idempotency-Key, and a body that is not a
// stream) is sent once more on another connection, as Go's net/http does.
func RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, tr Trip) error {
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
	return !req.IsBodyStream() && (http1.Idempotent(req.Header.Method()) || len(req.Header.Peek("Idempotency-Key")) > 0)
}

// maxDirty bounds how many new connections with stray bytes (their
// target spoke before the request) one attempt closes before it sends on
// the next one all the same. Pooled connections with stray bytes are
// closed however many there are: the pool holds a bounded number, and one
// sent on would give its bytes to the request as its answer.
const maxDirty = 4

func roundTripOnce(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, tr *Trip) error {
	var timeout time.Duration
	if !tr.Head.IsZero() {
		if timeout = time.Until(tr.Head); timeout <= 0 {
			return fasthttp.ErrTimeout
		}
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	for dirty := 0; err == nil && strayConn(cc, tr.Head); {
		if cc.LastUseTime().IsZero() { // a new connection
			if dirty++; dirty > maxDirty {
				break
			}
		}
		hc.CloseConn(cc)
		cc, err = hc.AcquireConn(timeout, req.ConnectionClose())
	}
	if err != nil {
		return err
	}
	conn := cc.Conn()
	if err := tr.Cut.set(conn); err != nil {
		hc.CloseConn(cc)
		return err
	}
	// Always set: a deadline left by an earlier request must not cut this
	// one, and clearing one that is not armed costs little.
	err = conn.SetDeadline(tr.Head)
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
		return tr.Cut.clear(timeoutError(&noResponseError{err}))
	}

	br := hc.AcquireReader(conn)
	err = tr.Cut.clear(readResponse(br, resp, req.Header.IsHead()))
	// Decided now: the caller strips the response's Connection header
	// before the body is sent.
	keep := err == nil && !req.ConnectionClose() && !resp.ConnectionClose()
	if err == nil && resp.IsBodyStream() {
		// The connection is the body's until it has been read.
		body := resp.BodyStream().(*ConnBody)
		btr := *tr
		btr.Cut = nil // the client's side ends the stream itself
		body.Start(br, conn, btr, keep, func(reuse bool) {
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
// responses, then its body: whole when it is small, else as a *ConnBody
// left to start.
func readResponse(br *bufio.Reader, resp *fasthttp.Response, head bool) error {
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true) // send only the target's
	for n := 1; ; n++ {
		if _, err := br.Peek(1); err != nil {
			if n == 1 {
				return &noResponseError{err}
			}
			return err
		}
		if b, _ := br.Peek(br.Buffered()); http1.BothFramings(b) {
			return http1.ErrFraming
		}
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		if !http1.TokenNames(resp.Header.All()) {
			return http1.ErrBadName
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
	resp.SetBodyStream(NewConnBody(br, cl), cl)
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
