package simpeers

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/sim"
)

// Compress divides every time of the real-time harness: 16 workers with a
// 5 ms mean service and a 50 ms deadline stand for the default downstream
// (20 ms, 200 ms). Latencies are multiplied back in the figures.
const Compress = 4

// RTScenario is a real-time scenario, in uncompressed times: the default
// downstream (16 workers, exponential 20 ms service, 200 ms deadline) under
// Poisson load, with at most one step.
type RTScenario struct {
	Name     string
	Load     float64       // arrival rate, fraction of the initial capacity
	Duration time.Duration // uncompressed; the run takes Duration/Compress
	StepAt   time.Duration // 0: no step
	Workers  int           // workers after the step; 0: unchanged
	AddDelay time.Duration // network delay added at the step
}

// RealTimeScenarios returns the three scenarios that separate the peers:
// 3× overload, capacity halving (at 1.5× then 3×), and +60 ms of network
// delay at 0.8× load. Each takes 4 s of wall time.
func RealTimeScenarios() []RTScenario {
	return []RTScenario{
		{Name: "overload-3x", Load: 3, Duration: 16 * time.Second},
		{Name: "capacity-half", Load: 1.5, Duration: 16 * time.Second, StepAt: 8 * time.Second, Workers: 8},
		{Name: "latency-step", Load: 0.8, Duration: 16 * time.Second, StepAt: 8 * time.Second, AddDelay: 60 * time.Millisecond},
	}
}

// RTLimiter is an admission policy driven in real time: TryAcquire admits a
// call or not; an admitted call's release reports whether it timed out.
type RTLimiter interface {
	TryAcquire() (release func(dropped bool), ok bool)
	Limit() int
}

// RTPeer names an RTLimiter and makes a fresh one for each run.
type RTPeer struct {
	Name string
	New  func() (RTLimiter, error)
}

// RealTimePeers returns: no limit; sluice's Default and go-concurrency-limits'
// Gradient2 behind the simulator's admission rule; failsafe-go's
// adaptivelimiter with its defaults; aegis' BBR with its CPU threshold at 0,
// so that its in-flight rule is always on (the simulated downstream uses no
// CPU of this process for its CPU gauge to see).
func RealTimePeers() []RTPeer {
	return []RTPeer{
		{"none", func() (RTLimiter, error) { return &algAdmit{alg: unlimited{}}, nil }},
		{"default", func() (RTLimiter, error) {
			d, err := limit.NewDefault(limit.DefaultOptions{})
			if err != nil {
				return nil, fmt.Errorf("simpeers: %w", err)
			}
			return &algAdmit{alg: d}, nil
		}},
		{"gcl-gradient2", func() (RTLimiter, error) {
			return &algAdmit{alg: gclAdapter{gcllimit.NewDefaultGradient2Limit("g2", nil, nil)}}, nil
		}},
		{"failsafe", func() (RTLimiter, error) { return failsafeAdmit{adaptivelimiter.NewWithDefaults[any]()}, nil }},
		{"kratos-bbr", func() (RTLimiter, error) { return bbrAdmit{bbr.NewLimiter(bbr.WithCPUThreshold(0))}, nil }},
	}
}

type unlimited struct{}

func (unlimited) Limit() int                                 { return sim.Unlimited }
func (unlimited) Sample(int64, time.Duration, int, bool) int { return sim.Unlimited }

// algAdmit admits while fewer than the algorithm's limit are in flight and
// samples every admitted call, as concurrency.Limiter does.
type algAdmit struct {
	mu       sync.Mutex // protects inflight and alg
	alg      sim.Algorithm
	inflight int
	epoch    time.Time
}

func (a *algAdmit) TryAcquire() (func(bool), bool) {
	a.mu.Lock()
	if a.epoch.IsZero() {
		a.epoch = time.Now()
	}
	if a.inflight >= a.alg.Limit() {
		a.mu.Unlock()
		return nil, false
	}
	a.inflight++
	n := a.inflight
	a.mu.Unlock()
	start := time.Now()
	return func(dropped bool) {
		end := time.Now()
		a.mu.Lock()
		a.inflight--
		a.alg.Sample(sim.Epoch+int64(end.Sub(a.epoch)), end.Sub(start), n, dropped)
		a.mu.Unlock()
	}, true
}

func (a *algAdmit) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.alg.Limit()
}

type failsafeAdmit struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (f failsafeAdmit) TryAcquire() (func(bool), bool) {
	p, ok := f.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return func(dropped bool) {
		if dropped {
			p.Drop()
		} else {
			p.Record()
		}
	}, true
}

func (f failsafeAdmit) Limit() int { return f.l.Limit() }

type bbrAdmit struct{ l *bbr.BBR }

func (b bbrAdmit) TryAcquire() (func(bool), bool) {
	done, err := b.l.Allow()
	if err != nil {
		return nil, false
	}
	return func(bool) { done(ratelimit.DoneInfo{}) }, true
}

func (b bbrAdmit) Limit() int { return int(b.l.Stat().MaxInFlight) }

// RTResult is one peer's figures on one real-time scenario, in uncompressed
// milliseconds. Figures cover the time after a warm-up of an eighth of the
// run; Limit is the mean limit over the last quarter.
type RTResult struct {
	Scenario, Peer            string
	Goodput, Served           float64
	P50, P99, NoLoadP99       float64
	Rejected, TimedOut, Limit float64
}

// RealTime runs every peer on every scenario, one run at a time.
func RealTime(scs []RTScenario, peers []RTPeer) ([]RTResult, error) {
	var out []RTResult
	for _, sc := range scs {
		for _, p := range peers {
			lim, err := p.New()
			if err != nil {
				return nil, err
			}
			out = append(out, runRT(sc, p.Name, lim))
		}
	}
	return out, nil
}

type rtReq struct {
	work time.Duration
	done chan struct{}
}

// runRT runs one peer on one scenario against an in-process downstream.
func runRT(sc RTScenario, peer string, lim RTLimiter) RTResult {
	const workers0, mean, deadline = 16, 20 * time.Millisecond / Compress, 200 * time.Millisecond / Compress
	dur := sc.Duration / Compress
	warm, step := dur/8, sc.StepAt/Compress
	var active, delay atomic.Int64
	active.Store(workers0)
	queue := make(chan *rtReq, 1<<20)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range max(workers0, sc.Workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if int64(i) >= active.Load() {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				select {
				case <-stop:
					return
				case r := <-queue:
					time.Sleep(r.work)
					if d := time.Duration(delay.Load()); d > 0 {
						time.AfterFunc(d, func() { r.done <- struct{}{} })
					} else {
						r.done <- struct{}{}
					}
				}
			}
		}()
	}
	// The schedule: Poisson arrivals and exponential work, seeded.
	rng := rand.New(rand.NewPCG(1, 2))
	rate := sc.Load * workers0 / mean.Seconds()
	type arrival struct{ at, work time.Duration }
	var sched []arrival
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / rate * 1e9)
		if t >= dur {
			break
		}
		sched = append(sched, arrival{t, time.Duration(rng.ExpFloat64() * float64(mean))})
	}
	var (
		mu                         sync.Mutex // protects the counts below
		users, good, rej, timedOut int
		lats, ideal                []float64
		limits                     []int
	)
	start := time.Now()
	if step > 0 {
		time.AfterFunc(step, func() {
			if sc.Workers > 0 {
				active.Store(int64(sc.Workers))
			}
			delay.Add(int64(sc.AddDelay / Compress))
		})
	}
	tick := time.NewTicker(10 * time.Millisecond)
	tickDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-tickDone:
				return
			case <-tick.C:
			}
			if time.Since(start) >= dur*3/4 {
				mu.Lock()
				limits = append(limits, min(lim.Limit(), sim.Unlimited))
				mu.Unlock()
			}
		}
	}()
	var clients sync.WaitGroup
	for _, a := range sched {
		if d := a.at - time.Since(start); d > time.Millisecond {
			time.Sleep(d)
		}
		measured := a.at >= warm
		noLoad := a.work
		if step > 0 && a.at >= step {
			noLoad += sc.AddDelay / Compress
		}
		clients.Add(1)
		go func() {
			defer clients.Done()
			arrived := time.Now()
			release, ok := lim.TryAcquire()
			var lat time.Duration
			success := false
			if ok {
				r := &rtReq{work: a.work, done: make(chan struct{}, 1)}
				queue <- r
				t := time.NewTimer(deadline)
				select {
				case <-r.done:
					t.Stop()
					lat, success = time.Since(arrived), true
					release(false)
				case <-t.C:
					lat = deadline
					release(true)
				}
			}
			if !measured {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			users++
			ideal = append(ideal, float64(noLoad))
			switch {
			case !ok:
				rej++
			case success:
				good++
			default:
				timedOut++
			}
			if ok {
				lats = append(lats, float64(lat))
			}
		}()
	}
	clients.Wait()
	tick.Stop()
	close(tickDone)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Capacity over the measured time, in requests.
	capReq := workers0 / mean.Seconds() * (dur - warm).Seconds()
	if step > 0 && sc.Workers > 0 {
		capReq = (workers0*(step-warm).Seconds() + float64(sc.Workers)*(dur-step).Seconds()) / mean.Seconds()
	}
	ms := func(xs []float64, q float64) float64 {
		if len(xs) == 0 {
			return math.NaN()
		}
		slices.Sort(xs)
		return xs[min(len(xs)-1, int(q*float64(len(xs))))] * Compress / 1e6
	}
	meanLimit := 0.0
	for _, l := range limits {
		meanLimit += float64(l)
	}
	meanLimit /= float64(max(1, len(limits)))
	return RTResult{
		Scenario: sc.Name, Peer: peer,
		Goodput: float64(good) / capReq, Served: float64(good) / float64(max(1, users)),
		P50: ms(lats, 0.5), P99: ms(lats, 0.99), NoLoadP99: ms(ideal, 0.99),
		Rejected: float64(rej) / float64(max(1, users)), TimedOut: float64(timedOut) / float64(max(1, users)),
		Limit: meanLimit,
	}
}

// WriteRealTime writes real-time results as a table.
func WriteRealTime(w io.Writer, rs []RTResult) error {
	const row = "%-14s %-14s %8s %8s %6s %6s %7s %6s %6s %8s\n"
	if _, err := fmt.Fprintf(w, row, "scenario", "peer", "goodput%", "served%", "p50", "p99", "p99/nl", "rej%", "t/o%", "limit"); err != nil {
		return fmt.Errorf("simpeers: %w", err)
	}
	for _, r := range rs {
		lim := fmt.Sprintf("%.1f", r.Limit)
		if r.Limit >= sim.Unlimited {
			lim = "-"
		}
		if _, err := fmt.Fprintf(w, row, r.Scenario, r.Peer,
			fmt.Sprintf("%.1f", 100*r.Goodput), fmt.Sprintf("%.1f", 100*r.Served),
			fmt.Sprintf("%.0f", r.P50), fmt.Sprintf("%.0f", r.P99), fmt.Sprintf("%.2f", r.P99/r.NoLoadP99),
			fmt.Sprintf("%.1f", 100*r.Rejected), fmt.Sprintf("%.1f", 100*r.TimedOut), lim); err != nil {
			return fmt.Errorf("simpeers: %w", err)
		}
	}
	return nil
}
