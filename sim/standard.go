package sim

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Standard returns the standard scenarios, in order: the ten of
// BENCHMARKS.md and four extra ones (retry, priority, capacity-half at a
// millisecond service time, and a start far above the optimum). Each uses the default
// downstream (16 workers, exponential 20 ms service, 200 ms deadline,
// optimum 16) unless it says otherwise, and seed 1.
func Standard() []Scenario {
	sc := []Scenario{
		{Name: "overload-1.5x", About: "steady overload at 1.5× capacity",
			Duration: 30 * time.Second, Arrivals: Arrivals{Load: 1.5}},
		{Name: "overload-3x", About: "steady overload at 3× capacity",
			Duration: 30 * time.Second, Arrivals: Arrivals{Load: 3}},
		{Name: "overload-10x", About: "steady overload at 10× capacity",
			Duration: 30 * time.Second, Arrivals: Arrivals{Load: 10}},
		{Name: "capacity-half", About: "workers 16 → 8 at 30 s; load 1.5× before, 3× after",
			Arrivals: Arrivals{Load: 1.5}, Steps: []Step{{At: 30 * time.Second, Workers: 8}}},
		{Name: "capacity-double", About: "workers 16 → 32 at 30 s; load 3× before, 1.5× after",
			Arrivals: Arrivals{Load: 3}, Steps: []Step{{At: 30 * time.Second, Workers: 32}}},
		{Name: "latency-step", About: "+60 ms network delay at 30 s, capacity unchanged, load 0.8× (optimum 16 → 64)",
			Arrivals: Arrivals{Load: 0.8}, Steps: []Step{{At: 30 * time.Second, AddNetDelay: 60 * time.Millisecond}}},
		{Name: "drift-1.2x", About: "30 simulated minutes at 1.2× capacity",
			Duration: 30 * time.Minute, Arrivals: Arrivals{Load: 1.2}},
		{Name: "bursty-0.8x", About: "bursty arrivals averaging 0.8× (1.2× for ~100 ms, 0.67× for ~300 ms): nothing to shed",
			Duration: 120 * time.Second, Arrivals: Arrivals{Kind: Bursty, Load: 0.8,
				BurstOn: 100 * time.Millisecond, BurstOff: 300 * time.Millisecond}},
		{Name: "mixed-cost", About: "1.5× overload; 10% of requests cost 10× (mean work still 20 ms); deadline 1 s",
			Arrivals: Arrivals{Load: 1.5}, Service: Dist{Mean: 20 * time.Millisecond * 100 / 190}, Deadline: time.Second,
			Costs: []CostClass{{Weight: 0.9, Factor: 1}, {Weight: 0.1, Factor: 10}}},
		{Name: "low-rate", About: "10 requests/s (1.25% of capacity): nothing to shed, few samples",
			Duration: 300 * time.Second, Arrivals: Arrivals{Rate: 10}},
		{Name: "retry-3x", About: "3× overload; clients retry a rejection up to 3 times after ~10 ms",
			Duration: 30 * time.Second, Arrivals: Arrivals{Load: 3}, Retry: Retry{MaxRetries: 3}},
		{Name: "priority-3x", About: "3× overload; 25% critical traffic (share 0.8), 75% sheddable (share 0.2)",
			Duration: 30 * time.Second, Arrivals: Arrivals{Load: 3},
			Classes: []Class{{Weight: 0.25, Share: 0.8}, {Weight: 0.75, Share: 0.2}}},
		{Name: "capacity-half-1ms", About: "capacity-half at 1 ms service: workers 16 → 8 at 30 s; load 1.5× before, 3× after",
			Arrivals: Arrivals{Load: 1.5}, Service: Dist{Mean: time.Millisecond},
			Steps: []Step{{At: 30 * time.Second, Workers: 8}}},
		{Name: "start-high", About: "5 workers of 40 ms at 1.3× load from the start, deadline 1 s: the initial limit 20 is 4× the optimum 5 (conv from 1 s)",
			Duration: 60 * time.Second, Workers: 5, Service: Dist{Mean: 40 * time.Millisecond},
			Deadline: time.Second, Arrivals: Arrivals{Load: 1.3}, Warmup: time.Nanosecond,
			// A step that changes nothing, so that the convergence is
			// measured (from 1 s, a segment's start).
			Steps: []Step{{At: time.Second, Load: 1.3}}},
	}
	for i := range sc {
		sc[i].Seed = 1
	}
	return sc
}

// Lookup returns the standard scenario with the given name.
func Lookup(name string) (Scenario, error) {
	var names []string
	for _, sc := range Standard() {
		if sc.Name == name {
			return sc, nil
		}
		names = append(names, sc.Name)
	}
	return Scenario{}, fmt.Errorf("%w: no standard scenario %q (have %s)", ErrInvalidScenario, name, strings.Join(names, ", "))
}

// RunAll runs every algorithm on every scenario, on up to GOMAXPROCS
// goroutines, and returns the results in scenario-major order (for each
// scenario, the factories in order). Results do not depend on the number of
// goroutines.
func RunAll(scenarios []Scenario, factories []Factory) ([]*Result, error) {
	type job struct{ i, j int }
	out := make([]*Result, len(scenarios)*len(factories))
	errs := make([]error, len(out))
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				k := jb.i*len(factories) + jb.j
				out[k], errs[k] = RunFactory(scenarios[jb.i], factories[jb.j])
			}
		}()
	}
	// Longest runs first, so that the pool finishes together.
	order := make([]job, 0, len(out))
	for i := range scenarios {
		for j := range factories {
			order = append(order, job{i, j})
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return durationOf(scenarios[order[a].i]) > durationOf(scenarios[order[b].i])
	})
	for _, jb := range order {
		jobs <- jb
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// durationOf returns the scenario's duration, its default when zero.
func durationOf(sc Scenario) time.Duration {
	if sc.Duration == 0 {
		return DefaultDuration
	}
	return sc.Duration
}
