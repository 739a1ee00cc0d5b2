package telemetry

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/breaker"
)

// Live is the current state of what the metrics watch, read at every
// gather (see Watch): one entry per route and per upstream target that
// exists now.
type Live struct {
	Routes  []RouteState
	Targets []TargetState
	// HeldBodyBytes is how many bytes of request bodies the gateway holds
	// now so that a retry may send them again; HeldBodyOverflows how many
	// requests streamed their body instead (losing their retries) because
	// holding it would have passed the gateway's bound.
	HeldBodyBytes     int64
	HeldBodyOverflows uint64
	// Listeners are the client connections open now on each kind of
	// listener; ConnectionWaits counts the connections a listener
	// accepted past the gateway's bound on open connections, and served
	// only once another closed; ConnectionsReclaimed the connections
	// idle between requests closed to make room under that bound;
	// ConnectionsRefused the connections closed at their accept because
	// their client held its bound of connections already.
	Listeners            []ListenerState
	ConnectionWaits      uint64
	ConnectionsReclaimed uint64
	ConnectionsRefused   uint64
}

// ListenerState is the client connections open now on one kind of
// listener ("plain", "tls").
type ListenerState struct {
	Name string
	Open int64
}

// RouteState is the current state of one route and of its policies.
type RouteState struct {
	Name string
	// InFlight is how many of the route's requests are being served (until
	// their response has been sent, a streamed body included).
	InFlight int64
	// Breaker is the state of the route's circuit breaker, when
	// HasBreaker is true (the route has one).
	Breaker    breaker.State
	HasBreaker bool
	// Concurrency, when not nil, is the route's concurrency limit.
	Concurrency *ConcurrencyState
	// Retry, when not nil, is what the route's retry policy has done.
	Retry *RetryState
	// Hedge, LastGood and Coalesce, when not nil, are the state of the
	// route's hedging, last-good fallback and coalescing group.
	Hedge    *HedgeState
	LastGood *LastGoodState
	Coalesce *CoalesceState
	// Classes are the priority classes of the route's adaptive
	// concurrency limit, when it has them.
	Classes []ClassState
}

// ConcurrencyState is the state of a concurrency limit (static or
// adaptive).
type ConcurrencyState struct {
	// Limit is its current limit; Queued how many requests wait in its
	// queue.
	Limit, Queued int
}

// RetryState counts what a retry policy did since it was made.
type RetryState struct {
	// Retries is how many retries it started.
	Retries uint64
	// BudgetRefused is how many retries its retry budget refused.
	BudgetRefused uint64
}

// TargetState is the current state of one upstream target.
type TargetState struct {
	Upstream, URL string
	// Healthy is the verdict of its active health check (true without
	// one).
	Healthy bool
	// Breaker is the state of its passive-health breaker.
	Breaker breaker.State
	// InFlight is how many attempts are being sent to it, and answers
	// whose body streams from it.
	InFlight int64
}

// Watch makes every gather read the current state from read, which must
// be safe for concurrent use and should be quick. It replaces the function
// given before; without one, the state's metrics have no series.
func (m *Metrics) Watch(read func() Live) {
	if m == nil {
		return
	}
	m.live.read.Store(&read)
}

// breakerStates are the label values of the breaker state sets, indexed
// by breaker.State.
var breakerStates = [...]string{
	breaker.Closed:     breaker.Closed.String(),
	breaker.Open:       breaker.Open.String(),
	breaker.HalfOpen:   breaker.HalfOpen.String(),
	breaker.ForcedOpen: breaker.ForcedOpen.String(),
	breaker.Disabled:   breaker.Disabled.String(),
}

// liveCollector exports Live as const metrics at each gather.
type liveCollector struct {
	read atomic.Pointer[func() Live]

	routeInFlight, breakerState, concLimit, concQueued *prometheus.Desc
	retries, budgetRefused                             *prometheus.Desc
	targetHealthy, targetBreaker, targetInFlight       *prometheus.Desc
	heldBytes, heldOverflows                           *prometheus.Desc
	connsOpen, connWaits, connReclaimed, connRefused   *prometheus.Desc
	flow                                               flowDescs
}

func newLiveCollector() *liveCollector {
	route, target := []string{"route"}, []string{"upstream", "target"}
	return &liveCollector{
		routeInFlight: prometheus.NewDesc("sluice_route_in_flight_requests",
			"Requests a route is serving now, queued ones included, until their response has been sent (a body streaming from a target included).", route, nil),
		breakerState: prometheus.NewDesc("sluice_breaker_state",
			"State of a route's circuit breaker as a state set: 1 for its current state, 0 for the others.", []string{"route", "state"}, nil),
		concLimit: prometheus.NewDesc("sluice_concurrency_limit",
			"Current limit of a route's concurrency policy: its max, or where its adaptive algorithm has moved it.", route, nil),
		concQueued: prometheus.NewDesc("sluice_concurrency_queued_requests",
			"Requests waiting in a route's concurrency queue now.", route, nil),
		retries: prometheus.NewDesc("sluice_retries_total",
			"Retries a route's retry policy started (attempts after the first), by route.", route, nil),
		budgetRefused: prometheus.NewDesc("sluice_retry_budget_exhausted_total",
			"Retries a route's retry budget refused, by route.", route, nil),
		targetHealthy: prometheus.NewDesc("sluice_target_healthy",
			"1 when an upstream target passes its active health check (or has none), else 0.", target, nil),
		targetBreaker: prometheus.NewDesc("sluice_target_breaker_state",
			"State of an upstream target's passive-health breaker as a state set: 1 for its current state, 0 for the others.", []string{"upstream", "target", "state"}, nil),
		targetInFlight: prometheus.NewDesc("sluice_target_in_flight_requests",
			"Attempts being sent to an upstream target now, and answers whose body streams from it now.", target, nil),
		heldBytes: prometheus.NewDesc("sluice_held_body_bytes",
			"Bytes of request bodies held now so that a retry may send them again.", nil, nil),
		heldOverflows: prometheus.NewDesc("sluice_held_body_overflows_total",
			"Requests whose body streamed, losing its retries, because holding it would have passed server.max_held_body_bytes.", nil, nil),
		connsOpen: prometheus.NewDesc("sluice_connections_open",
			"Client connections open now, from their accept until their socket is closed, by listener (plain, tls).", []string{"listener"}, nil),
		connWaits: prometheus.NewDesc("sluice_connection_waits_total",
			"Client connections a listener accepted while server.max_connections were open, and served only once one closed.", nil, nil),
		connReclaimed: prometheus.NewDesc("sluice_connections_reclaimed_total",
			"Client connections idle between HTTP/1.1 requests closed to make room while server.max_connections were open.", nil, nil),
		connRefused: prometheus.NewDesc("sluice_connections_refused_total",
			"Client connections closed at their accept because their client held server.max_connections_per_client connections already.", nil, nil),
		flow: newFlowDescs(),
	}
}

// Describe implements prometheus.Collector.
func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.routeInFlight, c.breakerState, c.concLimit, c.concQueued,
		c.retries, c.budgetRefused, c.targetHealthy, c.targetBreaker, c.targetInFlight, c.heldBytes, c.heldOverflows, c.connsOpen, c.connWaits, c.connReclaimed, c.connRefused} {
		ch <- d
	}
	for _, d := range c.flow.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	read := c.read.Load()
	if read == nil {
		return
	}
	l := (*read)()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for i := range l.Routes {
		r := &l.Routes[i]
		gauge(c.routeInFlight, float64(r.InFlight), r.Name)
		if r.HasBreaker {
			stateSet(gauge, c.breakerState, r.Breaker, r.Name)
		}
		if cs := r.Concurrency; cs != nil {
			gauge(c.concLimit, float64(cs.Limit), r.Name)
			gauge(c.concQueued, float64(cs.Queued), r.Name)
		}
		if rs := r.Retry; rs != nil {
			counter(c.retries, rs.Retries, r.Name)
			counter(c.budgetRefused, rs.BudgetRefused, r.Name)
		}
		c.flow.collect(r, gauge, counter)
	}
	for _, t := range l.Targets {
		healthy := 0.0
		if t.Healthy {
			healthy = 1
		}
		gauge(c.targetHealthy, healthy, t.Upstream, t.URL)
		stateSet(gauge, c.targetBreaker, t.Breaker, t.Upstream, t.URL)
		gauge(c.targetInFlight, float64(t.InFlight), t.Upstream, t.URL)
	}
	gauge(c.heldBytes, float64(l.HeldBodyBytes))
	counter(c.heldOverflows, l.HeldBodyOverflows)
	for _, ls := range l.Listeners {
		gauge(c.connsOpen, float64(ls.Open), ls.Name)
	}
	counter(c.connWaits, l.ConnectionWaits)
	counter(c.connReclaimed, l.ConnectionsReclaimed)
	counter(c.connRefused, l.ConnectionsRefused)
}

// stateSet sends one series per breaker state of d, the labels followed by
// the state: 1 for s, 0 for the others.
func stateSet(gauge func(*prometheus.Desc, float64, ...string), d *prometheus.Desc, s breaker.State, labels ...string) {
	for i, name := range breakerStates {
		v := 0.0
		if breaker.State(i) == s {
			v = 1
		}
		gauge(d, v, append(labels, name)...)
	}
}
