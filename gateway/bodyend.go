package gateway

// endHook runs a function once when a response body that streams from a
// target ends: when it is closed, once sent to the client or when the
// client is gone (see Gateway.finish). The function is set and run on the
// goroutines that serve the request, one after the other.
type endHook struct {
	f     func() // nil once run
	ended bool
}

// streamedBody is a response body that runs a function once it ends:
// upstreamBody (the goroutine engine's) and upstream.ConnBody (both
// engines').
type streamedBody interface {
	AtEnd(f func())
}

// AtEnd makes f run when the body ends, or now if it has ended already.
func (h *endHook) AtEnd(f func()) {
	if h.ended {
		f()
		return
	}
	h.f = f
}

// end runs the function given to AtEnd, once.
func (h *endHook) end() {
	h.ended = true
	if f := h.f; f != nil {
		h.f = nil
		f()
	}
}
