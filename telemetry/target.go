package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
)

// targetVecs are the event metrics of upstream targets.
type targetVecs struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	changes  *prometheus.CounterVec
}

func newTargetVecs() targetVecs {
	return targetVecs{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_target_requests_total",
			Help: "Attempts sent to an upstream target, by upstream, target and class (success, failure, ignored).",
		}, []string{"upstream", "target", "class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_target_request_duration_seconds",
			Help:    "Time from starting an attempt on an upstream target to its response's arrival (its headers, and its body when read whole), by upstream and target.",
			Buckets: durationBuckets,
		}, []string{"upstream", "target"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_target_breaker_transitions_total",
			Help: "State changes of an upstream target's passive-health breaker, by upstream, target and new state.",
		}, []string{"upstream", "target", "to"}),
	}
}

func (v targetVecs) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.attempts, v.duration, v.changes}
}

// attemptClasses are the classes an attempt that reached a target can end
// with, in the order of Target.attempts.
var attemptClasses = [...]sluice.Class{sluice.Success, sluice.Failure, sluice.Ignored}

// Target records the attempts and breaker transitions of one upstream
// target, with its label values looked up once, when it is made: its
// series exist from then on, at zero. Every method of a nil *Target does
// nothing.
type Target struct {
	m             *Metrics
	upstream, url string
	attempts      [len(attemptClasses)]prometheus.Counter
	duration      prometheus.Observer
	gone          atomic.Bool // set by Forget
}

// Target returns the metrics of the target url of upstream; nil when m is
// nil. url is the target as configured (scheme://host:port), a label value
// as it is.
func (m *Metrics) Target(upstream, url string) *Target {
	if m == nil {
		return nil
	}
	t := &Target{m: m, upstream: upstream, url: url, duration: m.targets.duration.WithLabelValues(upstream, url)}
	for i, c := range attemptClasses {
		t.attempts[i] = m.targets.attempts.WithLabelValues(upstream, url, c.String())
	}
	return t
}

// Attempt records one attempt sent to the target that ended with class c
// after d. A Dropped attempt never reached the target and is not recorded.
func (t *Target) Attempt(c sluice.Class, d time.Duration) {
	if t == nil || int(c) >= len(t.attempts) || t.gone.Load() {
		return
	}
	t.attempts[c].Inc()
	t.duration.Observe(d.Seconds())
}

// BreakerTransition records that the target's passive-health breaker
// changed to state to.
func (t *Target) BreakerTransition(to breaker.State) {
	if t == nil || t.gone.Load() {
		return
	}
	t.m.targets.changes.WithLabelValues(t.upstream, t.url, to.String()).Inc()
}

// Forget deletes the target's series and makes t record nothing more: call
// it when a reload removed the target from its upstream (not when it
// rebuilt an upstream that still has it: the new Target shares its
// series).
func (t *Target) Forget() {
	if t == nil {
		return
	}
	t.gone.Store(true)
	l := prometheus.Labels{"upstream": t.upstream, "target": t.url}
	v := t.m.targets
	v.attempts.DeletePartialMatch(l)
	v.duration.DeletePartialMatch(l)
	v.changes.DeletePartialMatch(l)
}
