package gateway

import "sync"

// inFlight counts goroutines at work and tells when none is left. Unlike a
// sync.WaitGroup, a goroutine may start while another waits, as the
// loops' streaming answers and bridged HTTP/2 streams do during shutdown
// (a WaitGroup's Add from zero during its Wait may panic): the wait then
// lasts until that one ends too. The zero value is ready.
type inFlight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n falls to 0; nil until idle asks
}

// add counts one more goroutine at work.
func (f *inFlight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

// done counts one goroutine fewer.
func (f *inFlight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 && f.zero != nil {
		close(f.zero)
		f.zero = nil
	}
	f.mu.Unlock()
}

// idle returns a channel closed once no goroutine is at work (at once when
// none is).
func (f *inFlight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if f.zero == nil {
		f.zero = make(chan struct{})
	}
	return f.zero
}
