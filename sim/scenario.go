package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// ErrInvalidScenario is wrapped by every error Validate returns.
var ErrInvalidScenario = errors.New("sim: invalid scenario")

// DistKind names a service-time distribution.
type DistKind string

// Service-time distributions.
const (
	// Exponential: memoryless, coefficient of variation 1 (the default).
	Exponential DistKind = "exponential"
	// Lognormal with the given Mean and Sigma (the standard deviation of
	// the underlying normal; default 1, a heavy right tail).
	Lognormal DistKind = "lognormal"
	// Bimodal: a mixture of two exponentials; a SlowFraction of requests
	// (default 0.1) take SlowFactor (default 10) times as long as the others,
	// scaled so that the overall mean is Mean.
	Bimodal DistKind = "bimodal"
	// Constant: every request takes exactly Mean.
	Constant DistKind = "constant"
)

// Dist is a service-time distribution. The zero value is exponential with a
// mean of DefaultServiceMean.
type Dist struct {
	Kind DistKind
	// Mean is the mean service time. Default DefaultServiceMean.
	Mean time.Duration
	// Sigma shapes Lognormal. Default 1.
	Sigma float64
	// SlowFraction and SlowFactor shape Bimodal. Defaults 0.1 and 10.
	SlowFraction float64
	SlowFactor   float64
}

// ArrivalKind names an arrival process.
type ArrivalKind string

// Arrival processes. Both are open loop: arrivals do not wait for responses.
const (
	// Poisson arrivals at a constant rate (the default).
	Poisson ArrivalKind = "poisson"
	// Bursty arrivals: a Markov-modulated Poisson process that alternates
	// between ON phases (mean length BurstOn) at BurstFactor × the mean
	// rate and OFF phases (mean length BurstOff) at the rate that keeps the
	// long-run mean; phase lengths are exponential.
	Bursty ArrivalKind = "bursty"
)

// Arrivals is an arrival process. The zero value is Poisson at Load 1.
type Arrivals struct {
	Kind ArrivalKind
	// Load is the mean arrival rate as a fraction of the initial capacity
	// (Workers / mean service time × mean cost). Used when Rate is zero.
	// Default 1.
	Load float64
	// Rate is the mean arrival rate in requests per second; it overrides
	// Load when positive.
	Rate float64
	// BurstFactor, BurstOn and BurstOff shape Bursty arrivals. Defaults
	// 1.5, 200 ms and 600 ms. BurstFactor × BurstOn/(BurstOn+BurstOff) must
	// not exceed 1.
	BurstFactor float64
	BurstOn     time.Duration
	BurstOff    time.Duration
}

// Step changes the downstream or the load at a given simulated time.
type Step struct {
	// At is when the step happens, from the start of the run.
	At time.Duration
	// Workers is the new number of workers; 0 leaves it unchanged. When it
	// falls, busy workers beyond it finish their request first.
	Workers int
	// AddNetDelay is added to the network delay (it may be negative; the
	// delay never falls below zero). The network delay lengthens every
	// response but occupies no worker.
	AddNetDelay time.Duration
	// Load is the new arrival rate as a fraction of the initial capacity;
	// 0 leaves the rate unchanged.
	Load float64
}

// CostClass is one kind of request in a mix of request costs: Weight is its
// share of requests, Factor multiplies its service time.
type CostClass struct {
	Weight float64 `json:"weight"`
	Factor float64 `json:"factor"`
}

// Class is one priority class of traffic. Class 0 is the most important.
type Class struct {
	// Weight is the class's share of arrivals.
	Weight float64 `json:"weight"`
	// Share is the fraction of the limit guaranteed to the class, as in
	// concurrency.Share.
	Share float64 `json:"share"`
}

// Retry makes clients retry rejected attempts.
type Retry struct {
	// MaxRetries is how many times a rejected request is retried; 0 turns
	// retries off.
	MaxRetries int
	// Backoff is the mean delay before a retry (uniform in [0.5, 1.5] ×
	// Backoff). A retry that would start after the request's deadline is not
	// made. Default 10 ms when MaxRetries > 0.
	Backoff time.Duration
}

// ClientQueue lets admission queue attempts that may not start, as
// concurrency.Limiter does with MaxQueue.
type ClientQueue struct {
	// Max is how many attempts may wait; 0 (the default) rejects at once.
	Max int
	// MaxWait bounds the wait; a waiter whose MaxWait passes is rejected.
	// Zero means it waits until its deadline (and then times out, without a
	// rejection and without a sample, as a call whose context ended).
	MaxWait time.Duration
}

// Scenario describes one simulated run: a downstream, the load offered to
// it, the admission model and the steps. Zero fields take the documented
// defaults (see Normalize); the zero Scenario is 16 workers, exponential
// 20 ms service, 200 ms deadline, Poisson arrivals at 1× capacity for 60 s.
type Scenario struct {
	// Name identifies the scenario in tables.
	Name string
	// About says in one line what the scenario tests.
	About string
	// Seed seeds every random stream. Runs with the same Scenario (seed
	// included) and the same deterministic Algorithm are identical.
	Seed uint64
	// Duration is how long arrivals last. Default 60 s.
	Duration time.Duration
	// Warmup is excluded from every figure. Default 5 s, or a tenth of
	// Duration if that is shorter.
	Warmup time.Duration
	// Settle is how long after the start of a segment (after the warm-up
	// or a step) the limit is not yet counted as steady, for the
	// coefficient of variation and drift. Default 5 s, or a tenth of
	// Duration if that is shorter.
	Settle time.Duration
	// Workers is the number of downstream workers C. Default 16.
	Workers int
	// Service is the service-time distribution.
	Service Dist
	// NetDelay is the initial network delay added to every response.
	NetDelay time.Duration
	// Deadline is each request's deadline, from its first arrival.
	// Default 200 ms.
	Deadline time.Duration
	// Arrivals is the arrival process.
	Arrivals Arrivals
	// Costs, when not empty, mixes request costs.
	Costs []CostClass
	// Classes, when not empty, turns on priority classes.
	Classes []Class
	// Retry makes clients retry rejections.
	Retry Retry
	// Queue lets admission queue attempts.
	Queue ClientQueue
	// SkipExpired makes the downstream discard a queued request whose
	// client has already given up instead of serving it. Default false:
	// the downstream serves it, as one that does not see deadlines does,
	// which is what makes an unlimited queue collapse.
	SkipExpired bool
	// Steps change the downstream or load; sorted by At.
	Steps []Step
	// Tick is the interval at which the limit is recorded. Default 10 ms.
	Tick time.Duration
	// Band is the relative half-width of the band around the optimum that
	// counts as converged. Default 0.1 (±10%).
	Band float64
	// ConvWindow is the width of the sliding window of the convergence
	// test (see the package documentation). Default 1 s.
	ConvWindow time.Duration
}

// Defaults of a Scenario.
const (
	DefaultWorkers     = 16
	DefaultServiceMean = 20 * time.Millisecond
	DefaultDeadline    = 200 * time.Millisecond
	DefaultDuration    = 60 * time.Second
	DefaultWarmup      = 5 * time.Second
	DefaultSettle      = 5 * time.Second
	DefaultTick        = 10 * time.Millisecond
	DefaultBand        = 0.1
	DefaultConvWindow  = time.Second
)

// Normalize returns sc with every zero field replaced by its default and the
// steps sorted by time, or an error wrapping ErrInvalidScenario.
func (sc Scenario) Normalize() (Scenario, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	deff := func(f *float64, v float64) {
		if *f == 0 {
			*f = v
		}
	}
	def(&sc.Duration, DefaultDuration)
	def(&sc.Warmup, min(DefaultWarmup, sc.Duration/10))
	def(&sc.Settle, min(DefaultSettle, sc.Duration/10))
	def(&sc.Deadline, DefaultDeadline)
	def(&sc.Tick, DefaultTick)
	def(&sc.ConvWindow, DefaultConvWindow)
	def(&sc.Service.Mean, DefaultServiceMean)
	deff(&sc.Band, DefaultBand)
	if sc.Workers == 0 {
		sc.Workers = DefaultWorkers
	}
	if sc.Service.Kind == "" {
		sc.Service.Kind = Exponential
	}
	switch sc.Service.Kind {
	case Lognormal:
		deff(&sc.Service.Sigma, 1)
	case Bimodal:
		deff(&sc.Service.SlowFraction, 0.1)
		deff(&sc.Service.SlowFactor, 10)
	}
	a := &sc.Arrivals
	if a.Kind == "" {
		a.Kind = Poisson
	}
	deff(&a.Load, 1)
	if a.Kind == Bursty {
		deff(&a.BurstFactor, 1.5)
		def(&a.BurstOn, 200*time.Millisecond)
		def(&a.BurstOff, 600*time.Millisecond)
	}
	if sc.Retry.MaxRetries > 0 {
		def(&sc.Retry.Backoff, 10*time.Millisecond)
	}
	sc.Steps = append([]Step(nil), sc.Steps...)
	sort.SliceStable(sc.Steps, func(i, j int) bool { return sc.Steps[i].At < sc.Steps[j].At })
	return sc, sc.validate()
}

// validate checks a normalized scenario.
func (sc *Scenario) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sc.Duration < 0 || sc.Warmup < 0 || sc.Settle < 0 || sc.Deadline < 0 || sc.Tick < 0 || sc.ConvWindow < 0 || sc.NetDelay < 0 {
		bad("durations must not be negative")
	}
	if sc.Warmup >= sc.Duration {
		bad("Warmup %v must be shorter than Duration %v", sc.Warmup, sc.Duration)
	}
	if sc.Workers < 0 {
		bad("Workers %d is negative", sc.Workers)
	}
	if sc.Service.Mean < 0 {
		bad("Service.Mean %v is negative", sc.Service.Mean)
	}
	switch sc.Service.Kind {
	case Exponential, Constant:
	case Lognormal:
		if !(sc.Service.Sigma > 0 && sc.Service.Sigma < 5) {
			bad("Service.Sigma %v outside (0, 5)", sc.Service.Sigma)
		}
	case Bimodal:
		if !(sc.Service.SlowFraction > 0 && sc.Service.SlowFraction < 1) {
			bad("Service.SlowFraction %v outside (0, 1)", sc.Service.SlowFraction)
		}
		if !(sc.Service.SlowFactor >= 1) {
			bad("Service.SlowFactor %v below 1", sc.Service.SlowFactor)
		}
	default:
		bad("unknown Service.Kind %q (want exponential, lognormal, bimodal or constant)", sc.Service.Kind)
	}
	a := sc.Arrivals
	if !(a.Load > 0) || a.Rate < 0 || math.IsInf(a.Load, 0) || math.IsInf(a.Rate, 0) {
		bad("Arrivals.Load %v must be positive and Rate %v not negative", a.Load, a.Rate)
	}
	switch a.Kind {
	case Poisson:
	case Bursty:
		on := float64(a.BurstOn) / float64(a.BurstOn+a.BurstOff)
		if a.BurstFactor < 1 || a.BurstFactor*on > 1 || a.BurstOn <= 0 || a.BurstOff <= 0 {
			bad("bursty arrivals need BurstFactor >= 1, positive phases and BurstFactor × ON share <= 1 (got %v × %.2f)", a.BurstFactor, on)
		}
	default:
		bad("unknown Arrivals.Kind %q (want poisson or bursty)", a.Kind)
	}
	for i, c := range sc.Costs {
		if !(c.Weight >= 0) || !(c.Factor > 0) {
			bad("Costs[%d]: Weight must be >= 0 and Factor > 0", i)
		}
	}
	if len(sc.Costs) > 0 && sumWeights(sc.Costs, func(c CostClass) float64 { return c.Weight }) <= 0 {
		bad("Costs: weights sum to zero")
	}
	share := 0.0
	for i, c := range sc.Classes {
		if !(c.Weight >= 0) || !(c.Share >= 0 && c.Share <= 1) {
			bad("Classes[%d]: Weight must be >= 0 and Share in [0, 1]", i)
		}
		share += c.Share
	}
	if len(sc.Classes) > maxClasses {
		bad("at most %d Classes, got %d", maxClasses, len(sc.Classes))
	}
	if share > 1+1e-9 {
		bad("Classes: shares sum to %v, more than 1", share)
	}
	if len(sc.Classes) > 0 && sumWeights(sc.Classes, func(c Class) float64 { return c.Weight }) <= 0 {
		bad("Classes: weights sum to zero")
	}
	if sc.Retry.MaxRetries < 0 || sc.Retry.MaxRetries > 100 || sc.Retry.Backoff < 0 {
		bad("Retry: MaxRetries must be in [0, 100] and Backoff not negative")
	}
	if sc.Queue.Max < 0 || sc.Queue.MaxWait < 0 {
		bad("Queue: Max and MaxWait must not be negative")
	}
	if !(sc.Band > 0 && sc.Band < 1) {
		bad("Band %v outside (0, 1)", sc.Band)
	}
	for i, s := range sc.Steps {
		if s.At <= 0 || s.At >= sc.Duration || s.Workers < 0 || s.Load < 0 {
			bad("Steps[%d]: At must be in (0, Duration), Workers and Load not negative", i)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidScenario, sc.Name, err)
	}
	return nil
}

func sumWeights[T any](xs []T, w func(T) float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += w(x)
	}
	return s
}

// meanCost returns the mean cost factor of the mix (1 without one).
func (sc *Scenario) meanCost() float64 {
	if len(sc.Costs) == 0 {
		return 1
	}
	var s, w float64
	for _, c := range sc.Costs {
		s += c.Weight * c.Factor
		w += c.Weight
	}
	return s / w
}

// MeanWork returns the mean time a request occupies a worker: the mean
// service time times the mean cost.
func (sc *Scenario) MeanWork() time.Duration {
	return time.Duration(float64(sc.Service.Mean) * sc.meanCost())
}

// Capacity returns how many requests per second w workers complete when
// always busy.
func (sc *Scenario) Capacity(w int) float64 {
	return float64(w) / sc.MeanWork().Seconds()
}

// Optimum returns the optimal limit for w workers and network delay d by
// Little's law: the calls in flight that keep every worker busy without a
// queue, w × (1 + d / mean work). Each worker holds one call; while its
// response travels, a call holds a slot of the limit but no worker, and
// there are throughput × d = w/meanWork × d of those.
func (sc *Scenario) Optimum(w int, d time.Duration) float64 {
	return float64(w) * (1 + float64(d)/float64(sc.MeanWork()))
}
