package retry

import (
	"math"
	"testing"
	"time"
)

// seq returns a random source that yields vals in turn, then repeats the last.
func seq(vals ...float64) func() float64 {
	i := 0
	return func() float64 {
		v := vals[min(i, len(vals)-1)]
		i++
		return v
	}
}

func TestBackoffDelays(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		b    Backoff
		want []time.Duration // delays after attempts 1, 2, 3, ...
	}{
		{"constant", Constant(50 * ms), []time.Duration{50 * ms, 50 * ms, 50 * ms}},
		{"constant negative is zero", Constant(-ms), []time.Duration{0, 0}},
		{"exponential none", Exponential(100*ms, 1000*ms, 2, NoJitter, nil),
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms}},
		{"exponential multiplier 3", Exponential(10*ms, time.Second, 3, NoJitter, nil),
			[]time.Duration{10 * ms, 30 * ms, 90 * ms, 270 * ms, 810 * ms, time.Second}},
		{"exponential multiplier 1 is constant", Exponential(10*ms, time.Second, 1, NoJitter, nil),
			[]time.Duration{10 * ms, 10 * ms, 10 * ms}},
		{"exponential defaults", Exponential(0, 0, 0, NoJitter, nil),
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second}},
		{"exponential max below initial is raised", Exponential(100*ms, 10*ms, 2, NoJitter, nil),
			[]time.Duration{100 * ms, 100 * ms}},
		{"exponential full", Exponential(100*ms, 1000*ms, 2, FullJitter, seq(0.5, 0.25, 0, 0.999)),
			[]time.Duration{50 * ms, 50 * ms, 0, 799200 * time.Microsecond}},
		{"exponential equal", Exponential(100*ms, 1000*ms, 2, EqualJitter, seq(0.5, 0, 1)),
			[]time.Duration{75 * ms, 100 * ms, 400 * ms}},
		{"exponential unknown jitter is full", Exponential(100*ms, time.Second, 2, Jitter(9), seq(0.5)),
			[]time.Duration{50 * ms, 100 * ms}},
		{"exponential faulty rand is clamped", Exponential(100*ms, time.Second, 2, FullJitter, seq(-1, 7, math.NaN())),
			[]time.Duration{0, 200 * ms, 0}},
		// decorrelated: uniform in [initial, 3·max(prev, initial)), capped.
		{"decorrelated", DecorrelatedJitter(100*ms, time.Second, seq(0.5, 0.5, 0, 1)),
			[]time.Duration{200 * ms, 350 * ms, 100 * ms, 300 * ms}},
		{"decorrelated cap", DecorrelatedJitter(100*ms, 500*ms, seq(1)),
			[]time.Duration{300 * ms, 500 * ms, 500 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prev time.Duration
			for i, want := range tt.want {
				got := tt.b.Delay(i+1, prev)
				if got != want {
					t.Fatalf("Delay(%d, %v) = %v, want %v", i+1, prev, got, want)
				}
				prev = got
			}
		})
	}
}

// Regression guard: a huge attempt number must not overflow into a negative
// or zero delay.
func TestExponentialLargeAttemptIsCapped(t *testing.T) {
	b := Exponential(time.Millisecond, time.Minute, 10, NoJitter, nil)
	for _, attempt := range []int{60, 1000, math.MaxInt} {
		if got := b.Delay(attempt, 0); got != time.Minute {
			t.Errorf("Delay(%d) = %v, want 1m", attempt, got)
		}
	}
}

func TestBackoffFunc(t *testing.T) {
	b := BackoffFunc(func(attempt int, prev time.Duration) time.Duration {
		return time.Duration(attempt)*time.Second + prev
	})
	if got := b.Delay(2, time.Second); got != 3*time.Second {
		t.Fatalf("Delay = %v, want 3s", got)
	}
}

func TestJitterString(t *testing.T) {
	for j, want := range map[Jitter]string{FullJitter: "full", EqualJitter: "equal", NoJitter: "none", 7: "unknown"} {
		if got := j.String(); got != want {
			t.Errorf("Jitter(%d).String() = %q, want %q", j, got, want)
		}
	}
}

func TestJitterText(t *testing.T) {
	for _, j := range []Jitter{FullJitter, EqualJitter, NoJitter} {
		b, _ := j.MarshalText()
		var got Jitter
		if err := got.UnmarshalText(b); err != nil || got != j {
			t.Errorf("%v: MarshalText %q, UnmarshalText %v, %v", j, b, got, err)
		}
	}
	var j Jitter
	if err := j.UnmarshalText([]byte("Full")); err == nil {
		t.Error(`UnmarshalText("Full") accepted: the names are exact`)
	}
}
