// Package otelmetric exports the events of sluice guards and policies as
// OpenTelemetry metrics, through a metric.Meter passed in: a Sink for
// package telemetry/observe. The service chooses the SDK, its readers and
// exporters; this package uses the API only.
//
// Instruments (attributes in brackets):
//
//	sluice.guard.calls                  counter    calls [guard, class]
//	sluice.guard.call.duration          histogram  seconds, of calls not dropped [guard]
//	sluice.guard.rejections             counter    rejected calls [guard, policy, reason]
//	sluice.circuit_breaker.state        gauge      state set: 1 current, 0 others [breaker, state]
//	sluice.circuit_breaker.transitions  counter    state changes [breaker, to]
//	sluice.concurrency_limiter.limit    gauge      current limit [limiter]
//	sluice.retry.retries                counter    retries started [policy]
//	sluice.retry.giveups                counter    results returned instead of retried [policy, reason]
//
// They mean what the Prometheus metrics of package telemetry/prom do;
// docs/metrics.md ("Library metrics") pairs them.
package otelmetric

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
)

// Sink holds the instruments. Its methods are safe for concurrent use.
type Sink struct {
	calls       metric.Int64Counter
	duration    metric.Float64Histogram
	rejections  metric.Int64Counter
	state       metric.Int64Gauge
	transitions metric.Int64Counter
	limit       metric.Int64Gauge
	retries     metric.Int64Counter
	giveUps     metric.Int64Counter
}

var _ observe.Sink = (*Sink)(nil)

// New creates the instruments on meter. It returns the meter's errors,
// joined, if it could not create some.
func New(meter metric.Meter) (*Sink, error) {
	s := &Sink{}
	var errs [8]error
	s.calls, errs[0] = meter.Int64Counter("sluice.guard.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls through a guard, by guard and class (success, failure, ignored, dropped)."))
	s.duration, errs[1] = meter.Float64Histogram("sluice.guard.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Time calls through a guard took as their callers saw it (queueing and retries included); dropped calls are not recorded."),
		metric.WithExplicitBucketBoundaries(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
	s.rejections, errs[2] = meter.Int64Counter("sluice.guard.rejections", metric.WithUnit("{call}"),
		metric.WithDescription("Calls through a guard that a policy rejected, by guard, policy name and reason."))
	s.state, errs[3] = meter.Int64Gauge("sluice.circuit_breaker.state", metric.WithUnit("1"),
		metric.WithDescription("State of a circuit breaker as a state set: 1 for its current state, 0 for the others."))
	s.transitions, errs[4] = meter.Int64Counter("sluice.circuit_breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("State changes of a circuit breaker, by breaker and new state."))
	s.limit, errs[5] = meter.Int64Gauge("sluice.concurrency_limiter.limit", metric.WithUnit("{call}"),
		metric.WithDescription("Current limit of an adaptive concurrency limiter."))
	s.retries, errs[6] = meter.Int64Counter("sluice.retry.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries a retry policy started."))
	s.giveUps, errs[7] = meter.Int64Counter("sluice.retry.giveups", metric.WithUnit("{result}"),
		metric.WithDescription("Results a retry policy returned instead of retrying them, by reason."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return s, nil
}

// Guard returns the sink of one guard's calls, with its attribute sets
// built once.
func (s *Sink) Guard(name string) observe.GuardSink {
	g := &guard{s: s, name: name, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("guard", name)))}
	for c := range g.byClass {
		g.byClass[c] = metric.WithAttributeSet(attribute.NewSet(attribute.String("guard", name), attribute.String("class", sluice.Class(c).String())))
	}
	return g
}

// guard is the sink of one guard's calls.
type guard struct {
	s       *Sink
	name    string
	attrs   metric.MeasurementOption                     // guard
	byClass [sluice.Dropped + 1]metric.MeasurementOption // guard, class
}

func (g *guard) Call(c sluice.Class, d time.Duration) {
	ctx := context.Background()
	if int(c) < len(g.byClass) {
		g.s.calls.Add(ctx, 1, g.byClass[c])
	}
	if c != sluice.Dropped {
		g.s.duration.Record(ctx, d.Seconds(), g.attrs)
	}
}

func (g *guard) Rejected(policy string, reason sluice.Reason) {
	g.s.rejections.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("guard", g.name), attribute.String("policy", policy), attribute.String("reason", string(reason))))
}

// BreakerState records the breaker's state set and counts a transition.
func (s *Sink) BreakerState(name string, st breaker.State, transition bool) {
	ctx := context.Background()
	for other := breaker.Closed; other <= breaker.Disabled; other++ {
		var v int64
		if other == st {
			v = 1
		}
		s.state.Record(ctx, v, metric.WithAttributes(attribute.String("breaker", name), attribute.String("state", other.String())))
	}
	if transition {
		s.transitions.Add(ctx, 1, metric.WithAttributes(attribute.String("breaker", name), attribute.String("to", st.String())))
	}
}

// Limit records the limiter's limit.
func (s *Sink) Limit(name string, limit int) {
	s.limit.Record(context.Background(), int64(limit), metric.WithAttributes(attribute.String("limiter", name)))
}

// Retry counts a retry.
func (s *Sink) Retry(name string) {
	s.retries.Add(context.Background(), 1, metric.WithAttributes(attribute.String("policy", name)))
}

// GiveUp counts a result returned instead of retried.
func (s *Sink) GiveUp(name string, reason retry.StopReason) {
	s.giveUps.Add(context.Background(), 1, metric.WithAttributes(attribute.String("policy", name), attribute.String("reason", reason.String())))
}
