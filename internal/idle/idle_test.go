package idle

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

func TestWatchFiresAfterSilence(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var fired atomic.Int32
	w := Start(clk, time.Minute, func() { fired.Add(1) })
	clk.Advance(40 * time.Second)
	w.Touch() // at 40s
	clk.Advance(20 * time.Second)
	if fired.Load() != 0 {
		t.Fatal("fired 20s after a touch, limit 1m")
	}
	clk.Advance(39 * time.Second)
	if fired.Load() != 0 {
		t.Fatal("fired 59s after a touch, limit 1m")
	}
	clk.Advance(time.Second)
	if fired.Load() != 1 {
		t.Fatalf("fired %d times a minute after the last touch, want once", fired.Load())
	}
	clk.Advance(time.Hour)
	if fired.Load() != 1 || clk.Timers() != 0 {
		t.Errorf("fired %d times, %d timers left; want once and none", fired.Load(), clk.Timers())
	}
}

func TestWatchStopped(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var fired atomic.Int32
	w := Start(clk, time.Minute, func() { fired.Add(1) })
	w.Stop()
	clk.Advance(time.Hour)
	if fired.Load() != 0 || clk.Timers() != 0 {
		t.Errorf("fired %d times, %d timers left after Stop; want none", fired.Load(), clk.Timers())
	}
}
