package gateway

import (
	"io"
	"sync"
)

// requestTee is the request of a gRPC call on a route that hedges but does
// not retry, as it streams to the race's first attempt: it keeps what it
// passes on, up to maxReplayBody, so that a hedge may send the request
// again once it has ended (see grpcRacer.ready). The call is not held
// back: a stream whose client waits for answers before it sends more
// (bidirectional ping-pong) flows at once.
type requestTee struct {
	r    io.Reader
	done chan struct{} // closed once r has ended (EOF or an error)
	once sync.Once
	mu   sync.Mutex // protects buf and lost
	buf  []byte     // what r gave so far
	// lost: buf is not the whole request: it grew past maxReplayBody, r
	// failed, or the race is over (see forget).
	lost bool
}

func newRequestTee(r io.Reader) *requestTee {
	return &requestTee{r: r, done: make(chan struct{})}
}

// Read reads from the request, keeping what it reads.
func (t *requestTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.mu.Lock()
	switch {
	case t.lost:
	case len(t.buf)+n > maxReplayBody || (err != nil && err != io.EOF):
		t.lost, t.buf = true, nil
	default:
		t.buf = append(t.buf, p[:n]...)
	}
	t.mu.Unlock()
	if err != nil {
		t.once.Do(func() { close(t.done) })
	}
	return n, err
}

// whole returns the request, once it has ended and was kept whole; nil
// otherwise.
func (t *requestTee) whole() []byte {
	select {
	case <-t.done:
	default:
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost {
		return nil
	}
	return t.buf
}

// forget stops keeping the request (the race is over: no hedge follows)
// and frees what was kept.
func (t *requestTee) forget() {
	t.mu.Lock()
	t.lost, t.buf = true, nil
	t.mu.Unlock()
}
