// Package idle ends what nothing passed through for too long: a Watch
// calls its function once no Touch came for its limit.
package idle

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Watch calls its function once, when no Touch came for its limit, as
// measured on its clock; no goroutine waits between its checks (each is a
// timer's function). Stop it when what it watches ends. Touch and Stop
// may be called from any goroutine.
type Watch struct {
	clock clock.Clock
	limit time.Duration
	fire  func()
	last  atomic.Int64 // clock Nanotime of the last Touch

	mu      sync.Mutex  // protects timer, stopped
	timer   clock.Timer // the next check
	stopped bool        // stopped, or fired
}

// Start returns a Watch of limit on clk (nil: clock.Real) that calls fire
// once nothing was touched for limit, counting from now.
func Start(clk clock.Clock, limit time.Duration, fire func()) *Watch {
	w := &Watch{clock: clock.Or(clk), limit: limit, fire: fire}
	w.Touch()
	w.mu.Lock()
	w.timer = w.clock.AfterFunc(limit, w.check)
	w.mu.Unlock()
	return w
}

// Touch records that something passed now.
func (w *Watch) Touch() { w.last.Store(w.clock.Nanotime()) }

// check fires when nothing passed for the limit, and otherwise looks again
// when that would be.
func (w *Watch) check() {
	idle := time.Duration(w.clock.Nanotime() - w.last.Load())
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if idle < w.limit {
		w.timer = w.clock.AfterFunc(w.limit-idle, w.check)
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	w.fire()
}

// Stop ends the watch: its function is not called from now on.
func (w *Watch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}
