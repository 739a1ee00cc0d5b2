package limit

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

// algorithms lists a constructor per algorithm for table-driven tests.
var algorithms = []struct {
	name string
	new  func(min, max int) (Algorithm, error)
}{
	{"AIMD", func(min, max int) (Algorithm, error) {
		return NewAIMD(AIMDOptions{MinLimit: min, MaxLimit: max, Timeout: 30 * time.Millisecond})
	}},
	{"Vegas", func(min, max int) (Algorithm, error) { return NewVegas(VegasOptions{MinLimit: min, MaxLimit: max}) }},
	{"Gradient2", func(min, max int) (Algorithm, error) {
		return NewGradient2(Gradient2Options{MinLimit: min, MaxLimit: max})
	}},
	{"LatencyGradient", func(min, max int) (Algorithm, error) {
		return NewLatencyGradient(LatencyGradientOptions{MinLimit: min, MaxLimit: max})
	}},
	{"Default", func(min, max int) (Algorithm, error) {
		return NewDefault(DefaultOptions{MinLimit: min, MaxLimit: max})
	}},
}

// mustNew builds an algorithm or fails the test.
func mustNew(t testing.TB, f func(min, max int) (Algorithm, error), min, max int) Algorithm {
	t.Helper()
	a, err := f(min, max)
	if err != nil {
		t.Fatalf("constructor: %v", err)
	}
	return a
}

// feed sends n samples of latency rtt, each finding the whole limit in flight
// (the limit binds), spaced so that the delivery rate is limit/rtt as Little's
// law says for a downstream that is not queueing.
func feed(a Algorithm, now *int64, n int, rtt time.Duration, dropped bool) {
	for range n {
		l := a.Limit()
		*now += int64(rtt) / int64(l)
		a.Sample(*now, rtt, l, dropped)
	}
}

func TestNew_ZeroOptionsUseDefaults(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			if got := a.Limit(); got != DefaultInitialLimit {
				t.Errorf("Limit() = %d, want %d", got, DefaultInitialLimit)
			}
		})
	}
}

func TestNew_InvalidOptions(t *testing.T) {
	cases := []struct {
		name string
		new  func() error
	}{
		{"min above max", func() error { _, err := NewAIMD(AIMDOptions{MinLimit: 10, MaxLimit: 5}); return err }},
		{"negative limit", func() error { _, err := NewVegas(VegasOptions{MaxLimit: -1}); return err }},
		{"initial outside bounds", func() error {
			_, err := NewDefault(DefaultOptions{InitialLimit: 50, MaxLimit: 40})
			return err
		}},
		{"backoff ratio 1", func() error { _, err := NewAIMD(AIMDOptions{BackoffRatio: 1}); return err }},
		{"negative timeout", func() error { _, err := NewAIMD(AIMDOptions{Timeout: -time.Second}); return err }},
		{"beta below alpha", func() error { _, err := NewVegas(VegasOptions{Alpha: 5, Beta: 4}); return err }},
		{"rebase below 1", func() error { _, err := NewVegas(VegasOptions{Rebase: 0.5}); return err }},
		{"tolerance below 1", func() error { _, err := NewGradient2(Gradient2Options{Tolerance: 0.5}); return err }},
		{"smoothing above 1", func() error { _, err := NewGradient2(Gradient2Options{Smoothing: 2}); return err }},
		{"drop ratio 0", func() error { _, err := NewGradient2(Gradient2Options{DropRatio: -0.1}); return err }},
		{"tolerance 1", func() error {
			_, err := NewLatencyGradient(LatencyGradientOptions{Tolerance: 1})
			return err
		}},
		{"backoff above 1", func() error {
			_, err := NewLatencyGradient(LatencyGradientOptions{Backoff: 1.5})
			return err
		}},
		{"slack below 1", func() error { _, err := NewDefault(DefaultOptions{Slack: 0.5}); return err }},
		{"negative headroom", func() error { _, err := NewDefault(DefaultOptions{Headroom: -1}); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.new(); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("err = %v, want one wrapping ErrInvalidOptions", err)
			}
		})
	}
}

func TestNew_NamesEveryBadOption(t *testing.T) {
	cases := []struct {
		name  string
		new   func() error
		names []string
	}{
		{"AIMD", func() error {
			_, err := NewAIMD(AIMDOptions{MinLimit: 10, MaxLimit: 5, BackoffRatio: 1, Timeout: -time.Second})
			return err
		}, []string{"AIMD: MinLimit 10 > MaxLimit 5", "AIMD: BackoffRatio 1", "AIMD: Timeout -1s"}},
		{"Vegas", func() error {
			_, err := NewVegas(VegasOptions{InitialLimit: -1, MaxLimit: -2, Window: -1})
			return err
		}, []string{"Vegas: InitialLimit -1", "Vegas: MaxLimit -2", "Vegas: Window -1"}},
		{"Vegas cross-field", func() error {
			_, err := NewVegas(VegasOptions{Alpha: 5, Beta: 4, Rebase: 0.5})
			return err
		}, []string{"Vegas: Beta 4 must exceed Alpha 5", "Vegas: Rebase 0.5"}},
		{"Gradient2", func() error {
			_, err := NewGradient2(Gradient2Options{Tolerance: 0.5, Smoothing: 2, DropRatio: -0.1})
			return err
		}, []string{"Gradient2: Tolerance 0.5", "Gradient2: Smoothing 2", "Gradient2: DropRatio -0.1"}},
		{"LatencyGradient", func() error {
			_, err := NewLatencyGradient(LatencyGradientOptions{Tolerance: 1, Backoff: 1.5, InitialLimit: 50, MaxLimit: 40})
			return err
		}, []string{"LatencyGradient: Tolerance 1", "LatencyGradient: Backoff 1.5", "LatencyGradient: InitialLimit 50"}},
		{"Default", func() error {
			_, err := NewDefault(DefaultOptions{Slack: 0.5, Headroom: -1, DrainEvery: -1})
			return err
		}, []string{"Default: Slack 0.5", "Default: Headroom -1", "Default: DrainEvery -1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			invalidtest.Check(t, tc.new(), ErrInvalidOptions, tc.names...)
		})
	}
}

func TestAlgorithms_GrowWhenLatencyFlatAndLimitBusy(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			var now int64
			feed(a, &now, 5000, 10*time.Millisecond, false)
			if got := a.Limit(); got <= DefaultInitialLimit {
				t.Errorf("Limit() = %d after flat latency at the limit, want above %d", got, DefaultInitialLimit)
			}
		})
	}
}

func TestAlgorithms_HoldWhenLimitIdle(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			var now int64
			for range 5000 {
				now += int64(time.Millisecond)
				a.Sample(now, 10*time.Millisecond, 2, false)
			}
			if got := a.Limit(); got > 2*DefaultInitialLimit {
				t.Errorf("Limit() = %d with 2 in flight, want it not to grow unbounded", got)
			}
		})
	}
}

func TestAlgorithms_ShrinkOnDrops(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			var now int64
			feed(a, &now, 2000, 10*time.Millisecond, false)
			before := a.Limit()
			feed(a, &now, 2000, 10*time.Millisecond, true)
			if got := a.Limit(); got >= before {
				t.Errorf("Limit() = %d after drops, want below %d", got, before)
			}
		})
	}
}

func TestAlgorithms_ShrinkWhenCapacityFalls(t *testing.T) {
	// A downstream of 16 workers at 10 ms, offered 1.5× its capacity, loses
	// three quarters of its workers at 20 s: latency rises with the queue.
	m := model{
		workers: func(t time.Duration) int {
			if t >= 20*time.Second {
				return 4
			}
			return 16
		},
		path: noPath, service: 10 * time.Millisecond, load: 1.5,
		deadline: 100 * time.Millisecond, seed: 1,
	}
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			st := m.run(a, 10*time.Second, 40*time.Second)
			ticks := len(st.limits)
			before := meanLimit(st.limits[:ticks/3])
			after := meanLimit(st.limits[2*ticks/3:])
			t.Logf("mean limit %.1f before, %.1f after", before, after)
			if after >= before*0.75 {
				t.Errorf("mean limit %.1f before, %.1f after the capacity fell to a quarter; want a clear fall", before, after)
			}
		})
	}
}

func TestAlgorithms_RespectMinAndMax(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 5, 30)
			var now int64
			feed(a, &now, 20000, 10*time.Millisecond, false)
			if got := a.Limit(); got > 30 {
				t.Errorf("Limit() = %d after growth, want at most MaxLimit 30", got)
			}
			feed(a, &now, 20000, 10*time.Millisecond, true)
			if got := a.Limit(); got < 5 {
				t.Errorf("Limit() = %d after drops, want at least MinLimit 5", got)
			}
		})
	}
}

func TestAlgorithms_ZeroLatencySamples(t *testing.T) {
	// A fake clock that does not move yields zero latencies: no division by
	// zero, no NaN, and a limit within bounds.
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			for range 1000 {
				if got := a.Sample(0, 0, a.Limit(), false); got < 1 || got > DefaultMaxLimit {
					t.Fatalf("Sample() = %d, want within [1, %d]", got, DefaultMaxLimit)
				}
			}
		})
	}
}

func TestAlgorithms_ConcurrentSamples(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, tc.new, 0, 0)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 2000 {
						now := int64(i+1) * int64(time.Millisecond)
						a.Sample(now, time.Duration(10+g)*time.Millisecond, a.Limit(), i%97 == 0)
					}
				})
			}
			wg.Wait()
			if got := a.Limit(); got < 1 || got > DefaultMaxLimit {
				t.Errorf("Limit() = %d, want within [1, %d]", got, DefaultMaxLimit)
			}
		})
	}
}
