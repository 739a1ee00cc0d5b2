// Package prom exports the events of sluice guards and policies as
// Prometheus metrics, on a registry passed in: a Sink for package
// telemetry/observe. docs/metrics.md lists its metrics ("Library
// metrics").
package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
)

// Sink holds the collectors. Its methods are safe for concurrent use.
type Sink struct {
	calls       *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rejections  *prometheus.CounterVec
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	limit       *prometheus.GaugeVec
	retries     *prometheus.CounterVec
	giveUps     *prometheus.CounterVec
}

var _ observe.Sink = (*Sink)(nil)

// New creates the collectors and registers them on reg. It returns an
// error if one of them is already registered there.
func New(reg prometheus.Registerer) (*Sink, error) {
	s := &Sink{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_guard_calls_total",
			Help: "Calls through a guard, by guard and class (success, failure, ignored, dropped).",
		}, []string{"guard", "class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_guard_call_duration_seconds",
			Help:    "Time calls through a guard took as their callers saw it (queueing and retries included), by guard; dropped calls are not observed.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"guard"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_guard_rejections_total",
			Help: "Calls through a guard that a policy rejected, by guard, policy name and reason.",
		}, []string{"guard", "policy", "reason"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_circuit_breaker_state",
			Help: "State of a circuit breaker as a state set: 1 for its current state, 0 for the others.",
		}, []string{"breaker", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_circuit_breaker_transitions_total",
			Help: "State changes of a circuit breaker, by breaker and new state.",
		}, []string{"breaker", "to"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_concurrency_limiter_limit",
			Help: "Current limit of an adaptive concurrency limiter, by limiter.",
		}, []string{"limiter"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_retry_retries_total",
			Help: "Retries a retry policy started, by policy.",
		}, []string{"policy"}),
		giveUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_retry_giveups_total",
			Help: "Results a retry policy returned instead of retrying them, by policy and reason.",
		}, []string{"policy", "reason"}),
	}
	for _, c := range []prometheus.Collector{s.calls, s.duration, s.rejections, s.state, s.transitions, s.limit, s.retries, s.giveUps} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Guard returns the sink of one guard's calls, with its series looked up
// once: they exist, at zero, from then on.
func (s *Sink) Guard(name string) observe.GuardSink {
	g := &guard{s: s, name: name, duration: s.duration.WithLabelValues(name)}
	for c := range g.calls {
		g.calls[c] = s.calls.WithLabelValues(name, sluice.Class(c).String())
	}
	return g
}

// guard is the sink of one guard's calls.
type guard struct {
	s        *Sink
	name     string
	calls    [sluice.Dropped + 1]prometheus.Counter // by class
	duration prometheus.Observer
}

func (g *guard) Call(c sluice.Class, d time.Duration) {
	if int(c) < len(g.calls) {
		g.calls[c].Inc()
	}
	if c != sluice.Dropped {
		g.duration.Observe(d.Seconds())
	}
}

func (g *guard) Rejected(policy string, reason sluice.Reason) {
	g.s.rejections.WithLabelValues(g.name, policy, string(reason)).Inc()
}

// BreakerState sets the breaker's state set and counts a transition.
func (s *Sink) BreakerState(name string, st breaker.State, transition bool) {
	for other := breaker.Closed; other <= breaker.Disabled; other++ {
		v := 0.0
		if other == st {
			v = 1
		}
		s.state.WithLabelValues(name, other.String()).Set(v)
	}
	if transition {
		s.transitions.WithLabelValues(name, st.String()).Inc()
	}
}

// Limit sets the limiter's limit gauge.
func (s *Sink) Limit(name string, limit int) {
	s.limit.WithLabelValues(name).Set(float64(limit))
}

// Retry counts a retry.
func (s *Sink) Retry(name string) {
	s.retries.WithLabelValues(name).Inc()
}

// GiveUp counts a result returned instead of retried.
func (s *Sink) GiveUp(name string, reason retry.StopReason) {
	s.giveUps.WithLabelValues(name, reason.String()).Inc()
}
