package telemetry

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/breaker"
)

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

// BreakerTransition records that the circuit breaker of route changed to
// state to.
func (m *Metrics) BreakerTransition(route string, to breaker.State) {
	if m == nil {
		return
	}
	m.breakerChanges.WithLabelValues(route, to.String()).Inc()
}

// ForgetRoute deletes every series of route's events (requests, durations,
// rate-limit decisions, breaker transitions): call it when a reload removed
// the route. A Route of that name made after starts from zero. See
// Route.Forget.
func (m *Metrics) ForgetRoute(route string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"route": route}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.requests, m.duration, m.rateLimit, m.breakerChanges} {
		v.DeletePartialMatch(l)
	}
	m.durations.Delete(route)
	m.requestCounters.Range(func(k, _ any) bool {
		if k.(requestKey).route == route {
			m.requestCounters.Delete(k)
		}
		return true
	})
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
	gone              atomic.Bool                                     // set by Forget
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

// Forget deletes the route's series, as Metrics.ForgetRoute does, and
// makes r record nothing more: requests still in flight on a route a
// reload removed do not bring its series back.
func (r *Route) Forget() {
	if r == nil {
		return
	}
	r.gone.Store(true)
	r.m.ForgetRoute(r.name)
}

// Request records one request of the route, as Metrics.Request does.
func (r *Route) Request(code int, outcome string, d time.Duration) {
	if r == nil || r.gone.Load() {
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
