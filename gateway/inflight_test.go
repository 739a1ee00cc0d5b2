package gateway

import (
	"sync"
	"testing"
)

// TestInFlightIdle: idle's channel closes only once every goroutine
// counted has ended, those that began while it was awaited included.
func TestInFlightIdle(t *testing.T) {
	var f inFlight
	select {
	case <-f.idle():
	default:
		t.Fatal("nothing at work, and idle's channel is open")
	}
	f.add()
	idle := f.idle()
	f.add() // begins during the wait
	f.done()
	select {
	case <-idle:
		t.Fatal("idle with one goroutine still at work")
	default:
	}
	f.done()
	<-idle
	f.add()
	if again := f.idle(); again == idle {
		t.Fatal("a closed channel handed out again")
	}
	f.done()
}

// TestInFlightAddDuringWait: goroutines begin from zero again and again
// while others wait, which a sync.WaitGroup forbids (its Wait may panic
// "WaitGroup is reused before previous Wait has returned"); every wait
// ends and -race finds nothing.
func TestInFlightAddDuringWait(t *testing.T) {
	var f inFlight
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 1000 {
				f.add()
				f.done()
			}
		}()
		go func() {
			defer wg.Done()
			for range 1000 {
				<-f.idle()
			}
		}()
	}
	wg.Wait()
	<-f.idle()
}
