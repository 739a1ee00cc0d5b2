package gateway

import (
	"sync"
	"testing"
	"time"
)

// PauseLoops holds every event loop of g that has served a connection, and
// returns once all are held; resume lets them go on (and so does the end of
// t). Whatever happens on their connections meanwhile waits, and a loop
// then takes it in the order the kernel reports it, its connections'
// events before its queued tasks (wake-ups, timers' work). With no loops
// (the goroutine engine) it holds nothing. It fails t when a loop is not
// held within limit.
func PauseLoops(t testing.TB, g *Gateway, limit time.Duration) (resume func()) {
	t.Helper()
	e := loopEngineOf(g)
	if e == nil {
		return func() {}
	}
	loops := e.loopList()
	release := make(chan struct{})
	var once sync.Once
	resume = func() { once.Do(func() { close(release) }) }
	t.Cleanup(resume)
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for _, l := range loops {
		held := make(chan struct{})
		e.execute(l, func() {
			close(held)
			<-release
		})
		select {
		case <-held:
		case <-deadline.C:
			t.Fatal("an event loop was not held in time")
		}
	}
	return resume
}
