package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/wstunnel"
)

// tunnels are the gateway's open WebSocket connections, which Shutdown
// waits for and then sends away. The zero value is ready to use.
type tunnels struct {
	mu      sync.Mutex // protects the fields below
	n       int        // handshakes accepted (begin) and not yet ended
	open    map[*wstunnel.Tunnel]struct{}
	closing bool               // Shutdown began: a new tunnel goes away at once
	empty   chan struct{}      // closed when n reaches zero while closing
	away    []*wstunnel.Tunnel // tunnels sent away (see sendAway)
	// perConn counts the WebSockets over HTTP/2 each connection carries
	// (see admit), by connKey; a connection carrying none has no entry.
	perConn map[connKey]int
}

// connKey names an HTTP/2 client connection while it is open: its peer's
// address, and whether it came over TLS (the plaintext and TLS listeners
// each have their own connections).
type connKey struct {
	remote string
	tls    bool
}

// admit counts a WebSocket on connection k unless k carries max already,
// and reports whether it did; leave must follow when it did.
func (ts *tunnels) admit(k connKey, max int) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.perConn[k] >= max {
		return false
	}
	if ts.perConn == nil {
		ts.perConn = map[connKey]int{}
	}
	ts.perConn[k]++
	return true
}

// leave forgets a WebSocket admit counted on k.
func (ts *tunnels) leave(k connKey) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.perConn[k] <= 1 {
		delete(ts.perConn, k)
		return
	}
	ts.perConn[k]--
}

// begin counts a handshake the upstream accepted, whose connection is
// about to be carried; end must follow.
func (ts *tunnels) begin() {
	ts.mu.Lock()
	ts.n++
	ts.mu.Unlock()
}

// carry registers t, counted by begin. After Shutdown began, t goes away
// at once.
func (ts *tunnels) carry(t *wstunnel.Tunnel) {
	ts.mu.Lock()
	closing := ts.closing
	if !closing {
		if ts.open == nil {
			ts.open = map[*wstunnel.Tunnel]struct{}{}
		}
		ts.open[t] = struct{}{}
	}
	ts.mu.Unlock()
	if closing {
		t.GoAway()
	}
}

// end forgets a tunnel counted by begin; t is nil when it never carried.
func (ts *tunnels) end(t *wstunnel.Tunnel) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.open, t)
	ts.n--
	if ts.n == 0 && ts.closing {
		close(ts.empty)
	}
}

// shutdown waits for every tunnel to end, or for ctx to end; then it sends
// the rest away (a close frame 1001 each way) and waits for them to end,
// which the close frames' bounded writes keep short. It returns an error
// naming how many were sent away, wrapping ctx's.
func (ts *tunnels) shutdown(ctx context.Context) error {
	ts.mu.Lock()
	if !ts.closing {
		ts.closing, ts.empty = true, make(chan struct{})
		if ts.n == 0 {
			close(ts.empty)
		}
	}
	empty := ts.empty
	ts.mu.Unlock()
	select {
	case <-empty:
		ts.mu.Lock()
		away := len(ts.away)
		ts.mu.Unlock()
		if away == 0 {
			return nil
		}
		return fmt.Errorf("%d WebSocket connections still open: %w", away, context.Cause(ctx))
	case <-ctx.Done():
	}
	ts.sendAway()
	<-empty
	ts.mu.Lock()
	away := len(ts.away)
	ts.mu.Unlock()
	return fmt.Errorf("%d WebSocket connections still open: %w", away, context.Cause(ctx))
}

// goAway sends every open tunnel away (a close frame 1001 each way) and
// waits for every tunnel sent away to end, by this call or by another
// running at once, before shutdown does: the engines whose HTTP/2 streams
// carry WebSockets (net/http's and the loops') call it when their
// deadline has passed, before they close their connections, and each
// must find the close frames written, whichever sent them. shutdown
// counts them among those still open at the deadline. It returns how many
// tunnels were sent away.
func (ts *tunnels) goAway() int {
	ts.sendAway()
	ts.mu.Lock()
	away := slices.Clone(ts.away)
	ts.mu.Unlock()
	for _, t := range away {
		<-t.Done()
	}
	return len(away)
}

// sendAway sends the open tunnels away, all at once (each close frame's
// write to a side that does not read waits up to a second: one after
// another, n such clients would hold shutdown n seconds), and returns
// them once each has ended. Each is kept once in ts.away and forgotten as
// open, so that goAway and shutdown, which may all run, never count a
// tunnel twice.
func (ts *tunnels) sendAway() []*wstunnel.Tunnel {
	ts.mu.Lock()
	open := make([]*wstunnel.Tunnel, 0, len(ts.open))
	for t := range ts.open {
		open = append(open, t)
		delete(ts.open, t)
	}
	ts.away = append(ts.away, open...)
	ts.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range open {
		wg.Go(t.GoAway)
	}
	wg.Wait()
	return open
}
