package gateway

import (
	"io"
	"net"
	"time"

	"github.com/sluicehq/sluice/internal/upstream"
)

// attemptTrip returns the bounds of attempt a of a call on lc (see
// lifecycle.headLimit); cut ends it when the client leaves.
func attemptTrip(lc *lifecycle, a *attempt, cut *upstream.Interrupt) upstream.Trip {
	tr := upstream.Trip{Wait: a.t.Wait, Cut: cut}
	if d := lc.headLimit(); d > 0 {
		tr.Head = a.start.Add(d)
	}
	if lc.timeout > 0 {
		tr.Deadline = a.start.Add(lc.timeout)
	}
	return tr
}

// paceClient makes the client's connection c, with server.write_timeout
// d, the one the body of a response streaming from a target goes to (see
// upstream.ConnBody.Pace). body is the response's body stream.
func paceClient(body io.Reader, c net.Conn, d time.Duration) {
	switch b := body.(type) {
	case *upstream.ConnBody:
		b.Pace(c, d)
	case *upstreamBody:
		paceClient(b.r, c, d)
	}
}
