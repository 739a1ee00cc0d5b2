package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// DashboardFrame is one sample of the dashboard's event stream: the
// gateway's status with what happened since the previous sample.
type DashboardFrame struct {
	Time time.Time `json:"time"`
	Status
	// Rates are the routes' requests per second over the interval since the
	// previous sample (a second while watched; up to dashIdleInterval for a
	// viewer's first), by route name. Absent from the sampler's first
	// sample, one taken at the same instant as the previous, and when the
	// admin API has no metrics.
	Rates map[string]*RouteRates `json:"rates,omitempty"`
	// Transitions are the last state changes of each route's breaker, oldest
	// first, by route name; a route whose breaker never changed is absent.
	Transitions map[string][]Transition `json:"transitions,omitempty"`
	// TargetTransitions are the last state changes of each target's
	// passive-health breaker, oldest first, by upstream name and target
	// URL; a target whose breaker never changed is absent.
	TargetTransitions map[string]map[string][]Transition `json:"target_transitions,omitempty"`
	// Point is this sample's entry in the history (the charts).
	Point DashboardPoint `json:"point"`
}

// DashboardPoint is the history's record of one sample.
type DashboardPoint struct {
	Time   int64                 `json:"t"` // Unix milliseconds
	Routes map[string]RoutePoint `json:"routes"`
}

// RoutePoint is one route's record in a DashboardPoint.
type RoutePoint struct {
	// Limit is the concurrency limit (static or adaptive); 0 without one.
	Limit int `json:"limit"`
	// InFlight is what the concurrency limit holds when there is one, else
	// the route's requests in flight.
	InFlight int64 `json:"in_flight"`
	// Served and Refused are requests per second served by an upstream
	// (outcome "served") and not (every other outcome); both 0 when the
	// sample has no rates.
	Served  float64 `json:"served"`
	Refused float64 `json:"refused"`
}

// RouteRates are one route's requests over a sampling interval.
type RouteRates struct {
	// Requests are requests per second by outcome: served, rate_limited,
	// breaker_open, overloaded, timeout, upstream_error and other.
	Requests map[string]float64 `json:"requests"`
	// P50 and P99 are latency quantiles in seconds, estimated from the
	// request duration histogram's buckets as Prometheus's
	// histogram_quantile does; nil when no request ended in the interval.
	P50 *float64 `json:"p50"`
	P99 *float64 `json:"p99"`
	// Allowed and Rejected are rate-limit decisions per second.
	Allowed  float64 `json:"rate_limit_allowed"`
	Rejected float64 `json:"rate_limit_rejected"`
}

// outcomes are the classes the dashboard counts requests in, and
// outcomeClass maps the metrics' outcome label onto them.
var outcomes = []string{"served", "rate_limited", "breaker_open", "overloaded", "timeout", "upstream_error", "other"}

func outcomeClass(label string) string {
	switch label {
	case "ok":
		return "served"
	case "rate_limited", "overloaded", "timeout":
		return label
	case "circuit_open":
		return "breaker_open"
	case "upstream_unreachable", "upstream_error", "upstream_status":
		return "upstream_error"
	}
	return "other"
}

// counters are the cumulative per-route counters the dashboard turns into
// rates, read from the gateway's metrics.
type counters struct {
	requests  map[string]map[string]float64 // route → outcome class → count
	decisions map[string][2]float64         // route → allowed, rejected
	durations map[string]histogram          // route → request durations
}

// histogram is a cumulative histogram: counts[i] observations were at most
// upper[i]; count is all of them, those above the last bound too.
type histogram struct {
	upper, counts []float64
	count         float64
}

// readCounters reads the counters from the metrics gathered from m; a nil
// m gives empty counters.
func readCounters(m prometheus.Gatherer) (counters, error) {
	c := counters{requests: map[string]map[string]float64{}, decisions: map[string][2]float64{}, durations: map[string]histogram{}}
	if m == nil {
		return c, nil
	}
	families, err := m.Gather()
	if err != nil && len(families) == 0 {
		return c, err
	}
	for _, f := range families {
		switch f.GetName() {
		case "sluice_requests_total":
			for _, s := range f.GetMetric() {
				route := label(s, "route")
				if c.requests[route] == nil {
					c.requests[route] = map[string]float64{}
				}
				c.requests[route][outcomeClass(label(s, "outcome"))] += s.GetCounter().GetValue()
			}
		case "sluice_ratelimit_decisions_total":
			for _, s := range f.GetMetric() {
				route, d := label(s, "route"), c.decisions[label(s, "route")]
				if label(s, "decision") == "allowed" {
					d[0] += s.GetCounter().GetValue()
				} else {
					d[1] += s.GetCounter().GetValue()
				}
				c.decisions[route] = d
			}
		case "sluice_request_duration_seconds":
			for _, s := range f.GetMetric() {
				h := histogram{count: float64(s.GetHistogram().GetSampleCount())}
				for _, b := range s.GetHistogram().GetBucket() {
					h.upper = append(h.upper, b.GetUpperBound())
					h.counts = append(h.counts, float64(b.GetCumulativeCount()))
				}
				c.durations[label(s, "route")] = h
			}
		}
	}
	return c, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// rates returns the per-route rates between two readings secs seconds
// apart. A counter that went down was reset (its series deleted and made
// again) and counts from zero.
func rates(prev, cur counters, secs float64) map[string]*RouteRates {
	out := map[string]*RouteRates{}
	for route, byClass := range cur.requests {
		r := &RouteRates{Requests: make(map[string]float64, len(outcomes))}
		for _, class := range outcomes {
			r.Requests[class] = delta(prev.requests[route][class], byClass[class]) / secs
		}
		out[route] = r
	}
	for route, d := range cur.decisions {
		r := out[route]
		if r == nil {
			r = &RouteRates{Requests: map[string]float64{}}
			out[route] = r
		}
		p := prev.decisions[route]
		r.Allowed, r.Rejected = delta(p[0], d[0])/secs, delta(p[1], d[1])/secs
	}
	for route, h := range cur.durations {
		r := out[route]
		if r == nil {
			continue
		}
		d := h.since(prev.durations[route])
		if d.count > 0 {
			p50, p99 := d.quantile(0.5), d.quantile(0.99)
			r.P50, r.P99 = &p50, &p99
		}
	}
	return out
}

func delta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// since returns the observations of h made after prev was read: h itself
// when prev has other buckets or more observations (a reset).
func (h histogram) since(prev histogram) histogram {
	if len(prev.counts) != len(h.counts) || prev.count > h.count {
		return h
	}
	d := histogram{upper: h.upper, counts: make([]float64, len(h.counts)), count: h.count - prev.count}
	for i := range h.counts {
		d.counts[i] = h.counts[i] - prev.counts[i]
	}
	return d
}

// quantile estimates the q-quantile (0 < q < 1) of h, which has
// observations, by linear interpolation within the bucket it falls in, from
// 0 for the first bucket; one above the last bound is the last bound.
func (h histogram) quantile(q float64) float64 {
	rank := q * h.count
	for i, c := range h.counts {
		if c < rank {
			continue
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = h.upper[i-1], h.counts[i-1]
		}
		if c == below {
			return h.upper[i]
		}
		return lower + (h.upper[i]-lower)*(rank-below)/(c-below)
	}
	if len(h.upper) == 0 {
		return 0
	}
	return h.upper[len(h.upper)-1]
}
