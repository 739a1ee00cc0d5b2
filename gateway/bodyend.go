package gateway

// streamedBody is a response body that streams from a target to its
// client with an upstream.BodyEnd: upstreamBody (the goroutine engine's),
// upstream.ConnBody (both engines') and an HTTP/2 target's body. It counts
// the bytes the client's connection took and runs a function once it ends
// (see Gateway.finish).
type streamedBody interface {
	AtEnd(f func())
	Sent() int64
}
