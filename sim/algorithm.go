package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/concurrency/limit"
)

// Algorithm is what the simulator drives: the shape of limit.Algorithm, so
// that every algorithm of concurrency/limit is one, and an adapter can make
// one of any other library's limit.
//
// The simulator calls Limit before each admission and Sample when an
// admitted attempt ends, exactly as concurrency.Limiter does: now is the
// virtual time (Epoch + simulated nanoseconds), rtt the time from admission
// to the response or to the deadline, inflight the number in flight when it
// was admitted (itself included), dropped true for an attempt that timed
// out. Rejected attempts and attempts that timed out while queued produce no
// sample. A run calls an Algorithm from one goroutine only.
type Algorithm interface {
	Limit() int
	Sample(now int64, rtt time.Duration, inflight int, dropped bool) int
}

// OptimumAware is implemented by an Algorithm that is told the optimum: the
// simulator calls SetOptimum at the start of a run and after every step.
// The oracle baseline uses it.
type OptimumAware interface {
	SetOptimum(now int64, optimum float64)
}

// Epoch is added to simulated time in the now passed to Sample, so that an
// algorithm never sees a zero or negative time.
const Epoch int64 = 1_000_000_000_000

// Unlimited is the limit of the no-limit baseline; a limit this large or
// larger counts as no limit in the figures.
const Unlimited = math.MaxInt32

// Factory names an algorithm and makes a fresh instance of it for one run.
// New receives the normalized scenario, so that a baseline can read its
// optimum.
type Factory struct {
	Name string
	New  func(sc Scenario) (Algorithm, error)
}

// Baselines returns the reference algorithms: "none" (no limit), "oracle"
// (the optimum, rounded up, following every step), "static-2x" and
// "static-0.5x" (twice and half the initial optimum, never changing).
func Baselines() []Factory {
	return []Factory{
		{Name: "none", New: func(Scenario) (Algorithm, error) { return fixed(Unlimited), nil }},
		{Name: "oracle", New: func(Scenario) (Algorithm, error) { return &oracle{}, nil }},
		{Name: "static-2x", New: func(sc Scenario) (Algorithm, error) { return staticTimes(sc, 2), nil }},
		{Name: "static-0.5x", New: func(sc Scenario) (Algorithm, error) { return staticTimes(sc, 0.5), nil }},
	}
}

// Sluice returns every algorithm of concurrency/limit with default options:
// "default", "aimd", "vegas", "gradient2", "latencygradient".
func Sluice() []Factory {
	wrap := func(name string, mk func() (limit.Algorithm, error)) Factory {
		return Factory{Name: name, New: func(Scenario) (Algorithm, error) {
			a, err := mk()
			if err != nil {
				return nil, fmt.Errorf("sim: making %s: %w", name, err)
			}
			return a, nil
		}}
	}
	return []Factory{
		wrap("default", func() (limit.Algorithm, error) { return limit.NewDefault(limit.DefaultOptions{}) }),
		wrap("aimd", func() (limit.Algorithm, error) { return limit.NewAIMD(limit.AIMDOptions{}) }),
		wrap("vegas", func() (limit.Algorithm, error) { return limit.NewVegas(limit.VegasOptions{}) }),
		wrap("gradient2", func() (limit.Algorithm, error) { return limit.NewGradient2(limit.Gradient2Options{}) }),
		wrap("latencygradient", func() (limit.Algorithm, error) {
			return limit.NewLatencyGradient(limit.LatencyGradientOptions{})
		}),
	}
}

// All returns Baselines followed by Sluice.
func All() []Factory { return append(Baselines(), Sluice()...) }

// fixed is a limit that never changes.
type fixed int

func (f fixed) Limit() int                                 { return int(f) }
func (f fixed) Sample(int64, time.Duration, int, bool) int { return int(f) }

func staticTimes(sc Scenario, k float64) fixed {
	return fixed(max(1, int(math.Round(k*sc.Optimum(sc.Workers, sc.NetDelay)))))
}

// oracle is the optimum, rounded up, as the simulator reports it.
type oracle struct{ n int }

func (o *oracle) Limit() int                                 { return o.n }
func (o *oracle) Sample(int64, time.Duration, int, bool) int { return o.n }
func (o *oracle) SetOptimum(_ int64, opt float64)            { o.n = max(1, int(math.Ceil(opt-1e-9))) }
