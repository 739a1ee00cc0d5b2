package hedge

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestTrackerQuantile(t *testing.T) {
	tests := []struct {
		name           string
		q              float64
		window         int
		floor, ceiling time.Duration
		samples        []int // milliseconds
		want           time.Duration
	}{
		{"initial is the floor", 0.5, 4, ms(1), 0, nil, ms(1)},
		{"window not full", 0.5, 4, ms(1), 0, []int{9, 9, 9}, ms(1)},
		{"median", 0.5, 4, ms(1), 0, []int{4, 2, 8, 6}, ms(4)},
		{"p95 of 20", 0.95, 20, ms(1), 0, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, ms(19)},
		{"floor wins", 0.9, 4, ms(5), 0, []int{1, 1, 2, 2}, ms(5)},
		{"ceiling caps", 0.9, 4, ms(1), ms(50), []int{100, 100, 100, 100}, ms(50)},
		{"oldest samples leave the window", 0.5, 4, ms(1), 0, []int{50, 50, 50, 50, 3, 3, 3, 3}, ms(3)},
	}
	for _, tt := range tests {
		tr := newTracker(tt.q, tt.window, tt.floor, tt.ceiling)
		for _, s := range tt.samples {
			tr.record(ms(s))
		}
		if got := tr.current(); got != tt.want {
			t.Errorf("%s: delay %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTrackerRecomputesEveryWindowEighth(t *testing.T) {
	tr := newTracker(0.5, 16, ms(1), 0) // recomputed every 2 samples
	for range 16 {
		tr.record(ms(2))
	}
	if got := tr.current(); got != ms(2) {
		t.Fatalf("delay %v, want 2ms", got)
	}
	for range 9 {
		tr.record(ms(40))
	}
	// 9 of 16 samples are slow, so the median is 40ms, but the 9th sample
	// did not trigger a recomputation: the delay is the one from 8 slow.
	if got := tr.current(); got != ms(2) {
		t.Errorf("after 9 slow samples: delay %v, want 2ms", got)
	}
	tr.record(ms(40))
	if got := tr.current(); got != ms(40) {
		t.Errorf("after 10 slow samples: delay %v, want 40ms", got)
	}
}

// TestQuantileFromRun checks that Run measures winning attempts on its
// clock and that later calls hedge after the learned delay.
func TestQuantileFromRun(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	b := &budget{asked: make(chan struct{}, 1)} // no tokens: never hedges
	p := mustNew(t, Options{Delay: ms(1), Quantile: 0.5, Window: 4, Clock: fc, Budget: b})
	for _, lat := range []int{2, 6, 4, 8} {
		h := newHeld()
		out := runAsync(p, context.Background(), h.next)
		a0 := <-h.started
		blockUntil(t, fc, 1)
		fc.Advance(ms(lat)) // past the 1ms delay: the budget refuses a hedge
		<-b.asked
		a0.end <- success(lat)
		<-out
		h.waitAll()
	}
	if got := p.Delay(); got != ms(4) {
		t.Fatalf("Delay() = %v after samples 2,6,4,8ms at q=0.5, want 4ms", got)
	}

	b.tokens.Store(1)
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(ms(4) - 1)
	select {
	case <-h.started:
		t.Fatal("hedged before the learned delay")
	default:
	}
	fc.Advance(1)
	<-b.asked
	a1 := <-h.started
	a1.end <- success("hedge")
	<-out
	<-a0.ctx.Done()
	h.waitAll()
}

// TestHedgeWinRecordsCallLatency checks that a call won by a hedge records
// its latency from the start of the call, not the hedge's own, so that the
// delay cannot shrink because hedges win.
func TestHedgeWinRecordsCallLatency(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Delay: ms(1), Quantile: 0.5, Window: 1, Clock: fc})
	h := newHeld()
	out := runAsync(p, context.Background(), h.next)
	a0 := <-h.started
	blockUntil(t, fc, 1)
	fc.Advance(ms(1))
	a1 := <-h.started
	fc.Advance(ms(2))
	a1.end <- success("hedge")
	<-out
	<-a0.ctx.Done()
	h.waitAll()
	if got := p.Delay(); got != ms(3) {
		t.Errorf("Delay() = %v, want 3ms: the call took 1ms + 2ms", got)
	}
}
