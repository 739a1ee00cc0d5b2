//go:build linux

package gateway

// hold charges the request's body, which the loops keep whole (in the
// connection's buffer, or the HTTP/2 stream's) so that a retry can send
// it again, to the bodies the gateway holds (g.held) against max
// (server.max_held_body_bytes), as the goroutine engine charges the bodies
// it holds. It reports false when the bound has no room for it (an
// overflow is counted): the request is then sent once and not retried, as
// a body the goroutine engine streams. unhold refunds the charge when the
// request ends (end), whichever way it ends.
func (cc *clientConn) hold(held *heldBodies, max int64) bool {
	n := int64(len(cc.body))
	if n == 0 {
		return true
	}
	if !held.reserve(n, max) {
		return false
	}
	cc.heldN = n
	return true
}

// unhold refunds what hold charged, if anything.
func (cc *clientConn) unhold() {
	if cc.heldN != 0 {
		cc.l.e.g.held.release(cc.heldN)
		cc.heldN = 0
	}
}
