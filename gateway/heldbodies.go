package gateway

import "sync/atomic"

// heldBodies counts the bytes of the request bodies the gateway holds in
// memory so that a retry may send them again, against
// server.max_held_body_bytes: without such a bound, clients that announce
// bodies of up to maxReplayBody on every stream of every HTTP/2
// connection could make the gateway hold that much times the streams
// times the connections. Past the bound a body streams once and its
// request is not retried (Envoy's retry buffer limit does the same): the
// request is served, only its retries are lost. The zero value is ready to
// use.
type heldBodies struct {
	bytes     atomic.Int64
	overflows atomic.Uint64
}

// reserve counts n bytes, about to be held, unless that would pass max;
// it reports whether it did (release must then follow), and counts an
// overflow when it did not.
func (h *heldBodies) reserve(n, max int64) bool {
	if h.bytes.Add(n) > max {
		h.bytes.Add(-n)
		h.overflows.Add(1)
		return false
	}
	return true
}

// release forgets n bytes reserve counted.
func (h *heldBodies) release(n int64) { h.bytes.Add(-n) }
