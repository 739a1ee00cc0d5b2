package limit

import (
	"fmt"
	"testing"
	"time"
)

func TestDefault_LongerPathIsNotCongestion(t *testing.T) {
	// 16 workers at 20 ms, 80% load; at 20 s the path's latency rises by
	// 60 ms with the capacity unchanged. The same delivery rate now needs
	// four times the calls in flight (Little's law), and the delivery rate
	// rises with them: every latency-based algorithm sheds here. Default
	// must keep serving: the limit does not fall, and it sheds only the
	// arrivals of the few rounds it takes to tell the path from a queue.
	m := model{
		workers: constWorkers(16),
		path: func(t time.Duration) time.Duration {
			if t >= 20*time.Second {
				return 60 * time.Millisecond
			}
			return 0
		},
		service: 20 * time.Millisecond, load: 0.8, deadline: 400 * time.Millisecond, seed: 4,
	}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var before int
	m.tick = func(t time.Duration) {
		if t == 20*time.Second {
			before = d.Limit()
		}
	}
	st := m.run(d, 20*time.Second, 60*time.Second)
	after := meanLimit(st.limits[len(st.limits)/2:])
	shed := float64(st.rejected) / float64(st.arrived)
	t.Logf("limit %d before the step, mean %.1f after; shed %.2f%% of %d arrivals", before, after, 100*shed, st.arrived)
	if after < float64(before) {
		t.Errorf("mean limit %.1f after the longer path, below %d before it", after, before)
	}
	if inflight := 0.8 * 16 * 80.0 / 20; after < inflight {
		t.Errorf("mean limit %.1f after the step, below the %.0f calls in flight the load needs", after, inflight)
	}
	if shed > 0.03 {
		t.Errorf("shed %.2f%% of the arrivals after the longer path, want under 3%%", 100*shed)
	}
}

func TestDefault_CapacityHalvedConverges(t *testing.T) {
	// 16 workers at 1 ms, 1.5× overload; at 5 s half the workers go. The
	// delivery rate halves while the latency doubles: a queue. The limit
	// must fall to near the new optimum (8 workers) and stay there.
	m := model{
		workers: func(t time.Duration) int {
			if t >= 5*time.Second {
				return 8
			}
			return 16
		},
		path: noPath, service: time.Millisecond, load: 1.5, deadline: 20 * time.Millisecond, seed: 5,
	}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := m.run(d, 3*time.Second, 10*time.Second)
	ticks := len(st.limits) // one per millisecond from 3 s
	before := meanLimit(st.limits[:2000])
	settled := st.limits[4000:] // from 2 s after the change
	lo, hi := settled[0], settled[0]
	for _, l := range settled {
		lo, hi = min(lo, l), max(hi, l)
	}
	t.Logf("mean limit %.1f before; %d..%d (mean %.1f) from 2 s after; %d ticks", before, lo, hi, meanLimit(settled), ticks)
	if mean := meanLimit(settled); mean < 7.2 || mean > 10 {
		t.Errorf("mean limit %.1f from 2 s after the capacity halved, want about 8-9 (optimum 8)", mean)
	}
	if lo < 5 || hi > 13 {
		t.Errorf("limit ranged %d..%d after settling, want it to stay near 8", lo, hi)
	}
}

func TestDefault_NoDriftAtModestOverload(t *testing.T) {
	// 1.2× load for 120 s: the limit at the end is where it was early on.
	m := model{workers: constWorkers(16), path: noPath, service: 5 * time.Millisecond,
		load: 1.2, deadline: 50 * time.Millisecond, seed: 6}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := m.run(d, 10*time.Second, 120*time.Second)
	n := len(st.limits)
	early, late := meanLimit(st.limits[:n/10]), meanLimit(st.limits[9*n/10:])
	t.Logf("mean limit %.1f early, %.1f late", early, late)
	if late > 1.15*early || late < 0.85*early {
		t.Errorf("mean limit %.1f early, %.1f late: drift", early, late)
	}
}

func TestDefault_SteadyOverloadStaysNearOptimum(t *testing.T) {
	// 3× overload: the limit sits just above the 16 workers, steadily.
	m := model{workers: constWorkers(16), path: noPath, service: time.Millisecond,
		load: 3, deadline: 10 * time.Millisecond, seed: 7}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := m.run(d, 5*time.Second, 30*time.Second)
	mean := meanLimit(st.limits)
	var v float64
	for _, l := range st.limits {
		v += (float64(l) - mean) * (float64(l) - mean)
	}
	cv := sqrt(v/float64(len(st.limits))) / mean
	good := float64(st.good) / (16 / time.Millisecond.Seconds() * 25)
	t.Logf("mean limit %.1f, cv %.3f, goodput %.3f of capacity", mean, cv, good)
	if mean < 16 || mean > 16*1.25 {
		t.Errorf("mean limit %.1f with 16 workers, want within [16, 20]", mean)
	}
	if cv > 0.1 {
		t.Errorf("coefficient of variation of the limit %.3f, want under 0.1", cv)
	}
	if good < 0.95 {
		t.Errorf("goodput %.3f of capacity, want at least 0.95", good)
	}
}

func TestDefault_LowRateIsNeverShed(t *testing.T) {
	m := model{workers: constWorkers(16), path: noPath, service: 10 * time.Millisecond,
		load: 0.05, deadline: 100 * time.Millisecond, seed: 8}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := m.run(d, 0, 60*time.Second); st.rejected != 0 {
		t.Errorf("rejected %d of %d calls at 5%% load", st.rejected, st.arrived)
	}
}

func TestDefault_StartFarAboveComesDown(t *testing.T) {
	// 5 workers at 10 ms, 1.3× load from the start: the initial limit 20
	// is four times the knee, and the first rounds already queue, so the
	// first latency Default sees is no no-load latency. Drains that find
	// the lowered limit still queued keep it, so the limit comes down.
	m := model{workers: constWorkers(5), path: noPath, service: 10 * time.Millisecond,
		load: 1.3, deadline: time.Second, seed: 9}
	d, err := NewDefault(DefaultOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := m.run(d, 30*time.Second, 60*time.Second)
	mean := meanLimit(st.limits)
	t.Logf("mean limit %.1f from 30 s (initial %d, 5 workers)", mean, DefaultInitialLimit)
	if mean > 0.6*DefaultInitialLimit {
		t.Errorf("mean limit %.1f after 30 s, want well below the initial %d (5 workers)", mean, DefaultInitialLimit)
	}
}

func TestDefault_NoLoadLatencyFromUnqueuedCalls(t *testing.T) {
	// 16 workers at 20 ms, 3× overload. The first drain measures the
	// no-load latency from two rounds, with about 6% noise; one that read
	// it 9% low used to hold the limit below the workers for the whole
	// run. Calls admitted below the knee cannot queue, so their latencies
	// correct the estimate within seconds, whatever the first drain read.
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			m := model{workers: constWorkers(16), path: noPath, service: 20 * time.Millisecond,
				load: 3, deadline: 200 * time.Millisecond, seed: seed}
			d, err := NewDefault(DefaultOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := m.run(d, 10*time.Second, 30*time.Second)
			mean := meanLimit(st.limits)
			good := float64(st.good) / (16 / (20 * time.Millisecond).Seconds() * 20)
			t.Logf("mean limit %.1f, goodput %.3f of capacity", mean, good)
			if mean < 16 {
				t.Errorf("mean limit %.1f with 16 workers: below the knee", mean)
			}
			if good < 0.95 {
				t.Errorf("goodput %.3f of capacity, want at least 0.95", good)
			}
		})
	}
}
