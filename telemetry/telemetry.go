// Package telemetry turns what sluice's policies and gateway do into
// Prometheus metrics, on a registry passed in: nothing is registered
// globally. Every method of a nil *Metrics does nothing, so code can record
// unconditionally.
//
// Metrics are of two kinds. Events (requests, rate-limit decisions, breaker
// transitions, reloads) are counted as they happen, by Route, Target and
// Metrics' own methods. The current state (breaker states, requests in
// flight, queues, limits, health, and the counters the policies keep
// themselves) is read when the registry is gathered, from the function
// given to Watch: it costs requests nothing, and a route or target that is
// gone has no such series. The series of events of a route or target that
// a reload removed are deleted with ForgetRoute and ForgetTarget.
//
// docs/metrics.md lists every metric with its type, labels and meaning.
package telemetry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// Metrics holds sluice's collectors. Its methods are safe for concurrent
// use.
type Metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	breakerChanges *prometheus.CounterVec
	rateLimit      *prometheus.CounterVec
	reloads        *prometheus.CounterVec
	reloadOK       prometheus.Gauge
	reloadAt       prometheus.Gauge
	targets        targetVecs
	live           *liveCollector

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

// durationBuckets are the buckets of the request and attempt duration
// histograms, in seconds.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New creates sluice's collectors and registers them on reg, among them
// sluice_build_info, which says which build is running, and the collector
// of the state given to Watch. It returns an error if any of them is
// already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total",
			Help: "Requests served, by route, status code and outcome (ok, or the reason the request was not served by the upstream).",
		}, []string{"route", "code", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_request_duration_seconds",
			Help:    "Time from receiving a request's headers to sending the last byte of its response, by route.",
			Buckets: durationBuckets,
		}, []string{"route"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_breaker_transitions_total",
			Help: "State changes of a route's circuit breaker, by route and new state.",
		}, []string{"route", "to"}),
		rateLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_decisions_total",
			Help: "Rate-limit decisions, by route and decision (allowed, rejected).",
		}, []string{"route", "decision"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration reloads, by result (ok, error).",
		}, []string{"result"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful",
			Help: "1 when the last configuration loaded was applied, 0 when it was refused (the one before keeps serving).",
		}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the configuration serving now was applied.",
		}),
		targets: newTargetVecs(),
		live:    newLiveCollector(),
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
	cs := []prometheus.Collector{m.requests, m.duration, m.breakerChanges, m.rateLimit,
		m.reloads, m.reloadOK, m.reloadAt, evictions, buildInfo, m.live}
	for _, c := range append(cs, m.targets.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Configured records that a configuration was applied at at without a
// reload: the first one. It sets the last-reload gauges as a successful
// reload does and counts nothing.
func (m *Metrics) Configured(at time.Time) {
	if m == nil {
		return
	}
	m.reloadOK.Set(1)
	m.reloadAt.Set(float64(at.UnixNano()) / 1e9)
}

// Reload records a configuration reload made at at: applied when ok is
// true, refused (the old configuration keeps serving) when false.
func (m *Metrics) Reload(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
		m.Configured(at)
		return
	}
	m.reloads.WithLabelValues("error").Inc()
	m.reloadOK.Set(0)
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
