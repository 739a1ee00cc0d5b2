package gateway

import (
	"errors"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/http1"
)

// errBareLF fails the goroutine engine's read of a request head that has
// a line ending in LF alone: fasthttp, which waits for the CRLF CRLF that
// ends a head, answers it at once (400, see fastError) instead of at
// server.read_header_timeout.
var errBareLF = errors.New("request head line ends in a bare LF")

// headWatch looks for a line ending in bare LF (see http1.HeadScan) in
// the request heads the goroutine engine reads of a connection, as the
// loops do (see clientConn.serve): a head found so is cut before its bare
// LF and the reads after fail with errBareLF. Only a head whose first
// byte comes from the connection is looked at: fasthttp waits for one
// when the connection opens or goes idle (see watchHeads) with nothing
// buffered; the bytes of a head that fasthttp buffered with an earlier
// request (pipelined), and bodies, are not. Only the goroutine that
// serves the connection reads it and calls its methods (fasthttp's
// StateNew comes before that goroutine starts).
type headWatch struct {
	next    bool // the next bytes read begin a head
	on      bool // a head is being read
	watched bool // the last head begun was looked at (scan is its)
	bare    bool // a bare LF was found: reads fail
	scan    http1.HeadScan
}

// awaitHead tells whether fasthttp waits for a head's first byte.
func (w *headWatch) awaitHead(yes bool) {
	if !yes && w.next {
		w.watched = false // its first byte was buffered
	}
	w.next = yes
	if yes {
		w.on = false
	}
}

// otherVersion reports whether the head being read, or last read, was
// looked at and has a request line of another version than HTTP/1.x.
func (w *headWatch) otherVersion() bool {
	return w.watched && w.scan.OtherVersion()
}

// refused is errBareLF once a bare LF was found, else nil: the
// connection's Read returns it without reading.
func (w *headWatch) refused() error {
	if w.bare {
		return errBareLF
	}
	return nil
}

// read looks at p[:n], what a read of the connection returned with err,
// and returns what the reader gets.
func (w *headWatch) read(p []byte, n int, err error) (int, error) {
	if w.next && n > 0 {
		w.next, w.on, w.watched, w.scan = false, true, true, http1.HeadScan{}
	}
	if !w.on {
		return n, err
	}
	switch i, bare, end := w.scan.Next(p[:n]); {
	case bare:
		w.bare, w.on = true, false
		if i == 0 {
			return 0, errBareLF
		}
		return i, nil
	case end:
		w.on = false
	}
	return n, err
}

// watchHeads is the goroutine engine's ConnState for the connections
// whose heads it watches: fasthttp waits for a head when a connection
// is new or idle, and has its first byte when it is active.
func watchHeads(c net.Conn, s fasthttp.ConnState) {
	w, ok := c.(interface{ awaitHead(bool) })
	if !ok {
		return
	}
	switch s {
	case fasthttp.StateNew, fasthttp.StateIdle:
		w.awaitHead(true)
	case fasthttp.StateActive:
		w.awaitHead(false)
	}
}
