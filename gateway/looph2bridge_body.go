//go:build linux

package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// errStreamEnded is what a bridged stream's reads and writes return once
// the client reset it or its connection closed.
var errStreamEnded = errors.New("gateway: HTTP/2 stream ended")

// bridgeBody is a bridged stream's request body: what the loop fed, read
// as it comes, each read given back to the client as window (see
// h2Bridge). It ends with the stream's body (its trailers then in the
// request's Trailer), or with an error: the body fell short of its
// content-length (h2Bridge.inErr), the stream ended, or the read
// deadline passed (server.read_timeout after the stream began, unless the
// handler moved it: http.ResponseController.SetReadDeadline).
type bridgeBody struct {
	b      *h2Bridge
	r      *http.Request
	closed bool
}

func (rb *bridgeBody) Read(p []byte) (int, error) {
	b := rb.b
	for {
		b.mu.Lock()
		if rb.closed {
			b.mu.Unlock()
			return 0, http.ErrBodyReadAfterClose
		}
		if b.in.Len() > 0 {
			n, _ := b.in.Read(p)
			b.consumed += n
			b.scheduleLocked()
			return n, nil
		}
		if b.inEnd {
			tr := b.trailer
			b.trailer = nil
			b.mu.Unlock()
			for _, f := range tr {
				if rb.r.Trailer == nil {
					rb.r.Trailer = http.Header{}
				}
				k := http.CanonicalHeaderKey(f.Name)
				rb.r.Trailer[k] = append(rb.r.Trailer[k], f.Value)
			}
			if b.inErr != nil {
				return 0, b.inErr
			}
			return 0, io.EOF
		}
		gone, dl := b.gone, b.readDL
		b.mu.Unlock()
		if gone {
			return 0, errStreamEnded
		}
		if !await(b.readable, dl) {
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// Close drops what the body has not read, and what comes after: the
// client's window opens for it.
func (rb *bridgeBody) Close() error {
	b := rb.b
	b.mu.Lock()
	if rb.closed {
		b.mu.Unlock()
		return nil
	}
	rb.closed, b.bodyClosed = true, true
	b.consumed += b.in.Len()
	b.in = bytes.Buffer{}
	b.scheduleLocked()
	signal(b.readable) // a read waiting fails
	return nil
}

// setReadDeadline moves the body's read deadline to t (none when zero).
func (b *h2Bridge) setReadDeadline(t time.Time) {
	b.mu.Lock()
	b.readDL = t
	b.mu.Unlock()
	signal(b.readable) // a reader waiting reads the new one
}
