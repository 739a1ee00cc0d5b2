package upstream

import "io"

// BodyEnd follows a response body on its way from a target to a client: it
// counts the bytes the client's connection took, and runs a function once
// when the body ends (its Close). ConnBody and an HTTP/2 target's bodies
// have one; a body that wraps them may embed one of its own. The zero
// value is ready. Its methods are called on the goroutines that serve the
// request, one after the other.
type BodyEnd struct {
	f     func() // nil once run
	ended bool
	// sent counts the bytes of the reads the client's connection took;
	// pending is the last read's, until the writer of the body comes back
	// for more, or the read reached the body's end (see Took).
	sent, pending int64
}

// AtEnd makes f run once when the body ends, or now if it has ended
// already.
func (h *BodyEnd) AtEnd(f func()) {
	if h.ended {
		f()
		return
	}
	h.f = f
}

// Took counts a read of the body that gave n bytes and err. Every writer of
// a streamed body (fasthttp's, the HTTP/2 engine's, an HTTP/1.0 client's
// copy) writes what a read gave before it reads again, and stops at the
// first write that fails: a read's bytes count once the next read comes,
// or at once when the read reached the body's end (io.EOF). The last
// read's bytes of a client that left are not counted.
func (h *BodyEnd) Took(n int, err error) {
	h.sent += h.pending
	h.pending = int64(n)
	if err == io.EOF {
		h.sent += h.pending
		h.pending = 0
	}
}

// Sent returns the bytes of the body the client's connection took (see
// Took): sent, or buffered to be sent, to the client.
func (h *BodyEnd) Sent() int64 { return h.sent }

// End runs the function given to AtEnd, once: the body has ended.
func (h *BodyEnd) End() {
	h.ended = true
	if f := h.f; f != nil {
		h.f = nil
		f()
	}
}
