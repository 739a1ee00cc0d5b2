package gateway

// endHook runs a function once when a response body that streams from a
// target ends: when it is closed, once sent to the client or when the
// client is gone (see Gateway.finish). The function is set and run on the
// goroutines that serve the request, one after the other.
type endHook struct {
	f     func() // nil once run
	ended bool
}

// streamedBody is a response body with an endHook: upstreamBody (the
// goroutine engine's) and connBody (the loops').
type streamedBody interface {
	atEnd(f func())
}

// atEnd makes f run when the body ends, or now if it has ended already.
func (h *endHook) atEnd(f func()) {
	if h.ended {
		f()
		return
	}
	h.f = f
}

// end runs the function given to atEnd, once.
func (h *endHook) end() {
	h.ended = true
	if f := h.f; f != nil {
		h.f = nil
		f()
	}
}
