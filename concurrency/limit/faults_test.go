package limit

import (
	"testing"
	"time"
)

// Regression tests named after the faults of the designs these algorithms
// come from.

func TestVegas_FastOutlierDoesNotCollapseNoLoadLatency(t *testing.T) {
	// Netflix's Vegas takes the minimum raw sample as its no-load latency:
	// one 1 µs sample (a cached or failed-fast call) makes every later
	// sample look like a queue of the whole limit, and the limit falls at
	// every sample until the next probe.
	v, err := NewVegas(VegasOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	feed(v, &now, 3000, 20*time.Millisecond, false)
	before := v.Limit()
	now += int64(time.Microsecond)
	v.Sample(now, time.Microsecond, v.Limit(), false)
	feed(v, &now, 3000, 20*time.Millisecond, false)
	if got := v.Limit(); got < before {
		t.Errorf("Limit() = %d after one fast outlier, want at least %d", got, before)
	}
}

func TestGradient2_CreepUnderSteadyLoad(t *testing.T) {
	// Under steady overload Netflix's Gradient2 lets its long-term latency
	// follow the queue its own limit builds, so the gradient stays at 1,
	// QueueSize is added at every sample and the limit creeps to its
	// maximum. Here: 16 workers, 3× overload, 60 s.
	m := model{workers: constWorkers(16), path: noPath, service: 10 * time.Millisecond,
		load: 3, deadline: time.Second, seed: 2}
	g, err := NewGradient2(Gradient2Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := m.run(g, 10*time.Second, 60*time.Second)
	n := len(st.limits)
	early, late := meanLimit(st.limits[:n/5]), meanLimit(st.limits[4*n/5:])
	t.Logf("mean limit %.1f early, %.1f late", early, late)
	if late > 1.2*early || late > 4*16 {
		t.Errorf("mean limit %.1f early, %.1f late with 16 workers: the limit creeps", early, late)
	}
}

func TestGradient2_DropIsStrongDecrease(t *testing.T) {
	// Netflix's Gradient2 ignores drops. Here one drop cuts the limit by
	// DropRatio, once per round trip.
	g, err := NewGradient2(Gradient2Options{})
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	feed(g, &now, 3000, 10*time.Millisecond, false)
	before := g.Limit()
	now += int64(time.Millisecond)
	g.Sample(now, 10*time.Millisecond, g.Limit(), true)
	g.Sample(now, 10*time.Millisecond, g.Limit(), true) // same round trip: no second cut
	want := int(float64(before) * DefaultGradient2DropRatio)
	if got := g.Limit(); got > want || got < want-1 {
		t.Errorf("Limit() = %d after two drops in one round trip from %d, want about %d", got, before, want)
	}
}

func TestLatencyGradient_BaselineDriftUnderSustainedCongestion(t *testing.T) {
	// The seed design's no-load latency was a minimum that, once congestion
	// lasted, rose toward the loaded latency; congestion then stopped being
	// seen and the limit grew. Here: 16 workers at 10 ms, 3× overload for
	// six baseline windows, and a MinLimit of 20, so that a queue of at
	// least 4 calls stays whatever the limit does: the latency never comes
	// back to its no-load value, yet the queue is congestion.
	m := model{workers: constWorkers(16), path: noPath, service: 10 * time.Millisecond,
		load: 3, deadline: time.Second, seed: 3}
	g, err := NewLatencyGradient(LatencyGradientOptions{MinLimit: 20})
	if err != nil {
		t.Fatal(err)
	}
	var atStart time.Duration
	m.tick = func(t time.Duration) {
		if t == 10*time.Second {
			atStart = g.NoLoadLatency()
		}
	}
	st := m.run(g, 10*time.Second, 60*time.Second)
	noLoad := g.NoLoadLatency()
	n := len(st.limits)
	early, late := meanLimit(st.limits[:n/5]), meanLimit(st.limits[4*n/5:])
	t.Logf("no-load %v at 10 s, %v at 60 s; mean limit %.1f early, %.1f late", atStart, noLoad, early, late)
	if noLoad > atStart*21/20 {
		t.Errorf("NoLoadLatency() rose from %v to %v under sustained congestion", atStart, noLoad)
	}
	if late > 1.1*early {
		t.Errorf("mean limit %.1f early, %.1f late: the limit drifts", early, late)
	}
}

func TestLatencyGradient_RejectedCallDoesNotPoisonNoLoadLatency(t *testing.T) {
	// In the seed, a rejected call recorded its near-zero latency, the
	// no-load latency collapsed, and everything looked congested. The
	// limiter no longer feeds rejected calls, but one near-zero sample of a
	// call that ran must still not collapse the no-load latency.
	g, err := NewLatencyGradient(LatencyGradientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	feed(g, &now, 3000, 50*time.Millisecond, false)
	before := g.NoLoadLatency()
	now += int64(time.Microsecond)
	g.Sample(now, time.Microsecond, g.Limit(), false)
	if got := g.NoLoadLatency(); got < before*9/10 {
		t.Errorf("NoLoadLatency() = %v after one 1 µs sample, was %v", got, before)
	}
}

func TestLatencyGradient_SeedScenario(t *testing.T) {
	// The seed's scenario: a service answers in 50 ms, then, overloaded, in
	// 500 ms; the limiter must pull the limit down by itself.
	g, err := NewLatencyGradient(LatencyGradientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	feed(g, &now, 2000, 50*time.Millisecond, false)
	before := g.Limit()
	feed(g, &now, 300, 500*time.Millisecond, false)
	if got := g.Limit(); got >= before/2 {
		t.Errorf("Limit() = %d after latency rose tenfold, want well below %d", got, before)
	}
}
