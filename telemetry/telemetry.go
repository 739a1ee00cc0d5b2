// Package telemetry turns what sluice's policies and gateway do into
// Prometheus metrics, on a registry passed in: nothing is registered
// globally. Every method of a nil *Metrics does nothing, so code can record
// unconditionally.
package telemetry

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// Metrics holds sluice's collectors.
type Metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	breakerState   *prometheus.GaugeVec
	breakerChanges *prometheus.CounterVec
	concLimit      *prometheus.GaugeVec
	rateLimit      *prometheus.CounterVec
	reloads        *prometheus.CounterVec
	retries        *prometheus.CounterVec

	// evictions is added to by the memory rate-limit stores that were
	// given it (StoreEvictions); a counter function exports it.
	evictions atomic.Uint64

	// Children of the request metrics, looked up once per label set: a
	// label lookup hashes every label on each call, which the hot path of
	// a gateway should not pay (a Route does not even pay this map's).
	requestCounters sync.Map // requestKey → prometheus.Counter
	durations       sync.Map // route → prometheus.Observer
}

type requestKey struct {
	route, outcome string
	code           int
}

// New creates sluice's collectors and registers them on reg, among them
// sluice_build_info, which says which build is running. It returns an
// error if any of them is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total",
			Help: "Requests served, by route, status code and outcome (ok, or the reason the request was not served by the upstream).",
		}, []string{"route", "code", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_request_duration_seconds",
			Help:    "Time from receiving a request's headers to sending its response headers, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_breaker_state",
			Help: "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled.",
		}, []string{"breaker"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_breaker_transitions_total",
			Help: "Circuit breaker state changes, by breaker and new state.",
		}, []string{"breaker", "to"}),
		concLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_concurrency_limit",
			Help: "Current concurrency limit, by route.",
		}, []string{"route"}),
		rateLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_decisions_total",
			Help: "Rate-limit decisions, by route and decision (allowed, rejected).",
		}, []string{"route", "decision"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration reloads, by result (ok, error).",
		}, []string{"result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_retries_total",
			Help: "Retry attempts made, by route.",
		}, []string{"route"}),
	}
	evictions := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sluice_ratelimit_store_evictions_total",
		Help: "Keys a full in-memory rate-limit store forgot before they were idle (each starts afresh if it comes back).",
	}, func() float64 { return float64(m.evictions.Load()) })
	build := buildinfo.Read()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "Always 1; its labels are the running build's version and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": build.Version, "goversion": build.GoVersion},
	})
	buildInfo.Set(1)
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.breakerState, m.breakerChanges, m.concLimit, m.rateLimit, m.reloads, m.retries, evictions, buildInfo} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Request records one served request. outcome is "" (recorded as "ok") or
// the reason it was not served by the upstream. A Route records its
// requests for less.
func (m *Metrics) Request(route string, code int, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.requestCounter(route, code, outcome).Inc()
	h, ok := m.durations.Load(route)
	if !ok {
		h, _ = m.durations.LoadOrStore(route, m.duration.WithLabelValues(route))
	}
	h.(prometheus.Observer).Observe(d.Seconds())
}

func (m *Metrics) requestCounter(route string, code int, outcome string) prometheus.Counter {
	if outcome == "" {
		outcome = "ok"
	}
	k := requestKey{route: route, outcome: outcome, code: code}
	c, ok := m.requestCounters.Load(k)
	if !ok {
		c, _ = m.requestCounters.LoadOrStore(k, m.requests.WithLabelValues(route, strconv.Itoa(code), outcome))
	}
	return c.(prometheus.Counter)
}

// Route records the requests and rate-limit decisions of one route: the
// same series as Metrics.Request and those of the decisions, with the
// route's label values looked up once, when it is made, and its counter of
// served requests once per status code, so that recording hashes nothing.
// Every method of a nil *Route does nothing.
type Route struct {
	m                 *Metrics
	name              string
	duration          prometheus.Observer
	allowed, rejected prometheus.Counter
	served            [maxCode + 1]atomic.Pointer[prometheus.Counter] // outcome "ok", by code
}

// maxCode is the largest status code a Route keeps a counter for at hand.
const maxCode = 599

// Route returns the metrics of route name; nil when m is nil.
func (m *Metrics) Route(name string) *Route {
	if m == nil {
		return nil
	}
	return &Route{m: m, name: name,
		duration: m.duration.WithLabelValues(name),
		allowed:  m.rateLimit.WithLabelValues(name, "allowed"),
		rejected: m.rateLimit.WithLabelValues(name, "rejected"),
	}
}

// Request records one request of the route, as Metrics.Request does.
func (r *Route) Request(code int, outcome string, d time.Duration) {
	if r == nil {
		return
	}
	if outcome == "" && code >= 0 && code <= maxCode {
		c := r.served[code].Load()
		if c == nil {
			counter := r.m.requestCounter(r.name, code, "")
			c = &counter
			r.served[code].Store(c)
		}
		(*c).Inc()
	} else {
		r.m.requestCounter(r.name, code, outcome).Inc()
	}
	r.duration.Observe(d.Seconds())
}

// BreakerState records a breaker's state (see the metric's help for the
// numbering) and, when changed is true, a transition to it.
func (m *Metrics) BreakerState(breaker string, state int, name string, changed bool) {
	if m == nil {
		return
	}
	m.breakerState.WithLabelValues(breaker).Set(float64(state))
	if changed {
		m.breakerChanges.WithLabelValues(breaker, name).Inc()
	}
}

// ConcurrencyLimit records a route's current concurrency limit.
func (m *Metrics) ConcurrencyLimit(route string, limit int) {
	if m == nil {
		return
	}
	m.concLimit.WithLabelValues(route).Set(float64(limit))
}

// RateLimit records one rate-limit decision of the route.
func (r *Route) RateLimit(allowed bool) {
	if r == nil {
		return
	}
	if allowed {
		r.allowed.Inc()
	} else {
		r.rejected.Inc()
	}
}

// Reload records a configuration reload.
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	r := "error"
	if ok {
		r = "ok"
	}
	m.reloads.WithLabelValues(r).Inc()
}

// StoreEvictions returns the counter that in-memory rate-limit stores add
// their evictions to (ratelimit.MemoryOptions.Evictions), exported as
// sluice_ratelimit_store_evictions_total; nil when m is nil.
func (m *Metrics) StoreEvictions() *atomic.Uint64 {
	if m == nil {
		return nil
	}
	return &m.evictions
}

// Retry records a retry attempt.
func (m *Metrics) Retry(route string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(route).Inc()
}
