package gateway

import "io"

// endHook follows a response body that streams from a target to its
// client: it counts the bytes the client's connection took, and runs a
// function once when the body ends: when it is closed, once sent to the
// client or when the client is gone (see Gateway.finish). Its methods are
// called on the goroutines that serve the request, one after the other.
type endHook struct {
	f     func() // nil once run
	ended bool
	// sent counts the bytes of the reads the client's connection took;
	// pending is the last read's, until the writer of the body comes
	// back for more, or the body's end was read (see took).
	sent, pending int64
}

// streamedBody is a response body with an endHook: upstreamBody (the
// goroutine engine's), connBody (both engines') and h2Body (an HTTP/2
// target's).
type streamedBody interface {
	atEnd(f func())
	bodySent() int64
}

// atEnd makes f run when the body ends, or now if it has ended already.
func (h *endHook) atEnd(f func()) {
	if h.ended {
		f()
		return
	}
	h.f = f
}

// took counts a read of the body that gave n bytes and err. Every writer
// of a streamed body (fasthttp's, the HTTP/2 engine's, an HTTP/1.0
// client's copy) writes what a read gave before it reads again, and stops
// at the first write that fails: a read's bytes count once the next read
// comes, or at once when the read reached the body's end (io.EOF). A
// client that leaves does not get the last read's bytes counted.
func (h *endHook) took(n int, err error) {
	h.sent += h.pending
	h.pending = int64(n)
	if err == io.EOF {
		h.sent += h.pending
		h.pending = 0
	}
}

// bodySent returns the bytes of the body the client's connection took
// (see took): what was sent, or buffered to be, on the client's
// connection.
func (h *endHook) bodySent() int64 { return h.sent }

// end runs the function given to atEnd, once.
func (h *endHook) end() {
	h.ended = true
	if f := h.f; f != nil {
		h.f = nil
		f()
	}
}
