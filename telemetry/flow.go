package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// HedgeState counts what a route's hedging did since it was made.
type HedgeState struct {
	// Requests is how many requests were run hedged; Sent how many hedges
	// (second attempts) were sent (see hedge.Stats.Hedges); Won how many requests a hedge
	// answered; BudgetRefused how many hedges the hedge budget refused.
	Requests, Sent, Won, BudgetRefused uint64
}

// LastGoodState is the state of a route's store of last good answers.
type LastGoodState struct {
	// Entries is how many answers it keeps, Bytes their size.
	Entries, Bytes int
	// Evictions is how many answers it dropped to make room for others.
	Evictions uint64
}

// ClassState is the state of one priority class of a route's adaptive
// concurrency limit.
type ClassState struct {
	// Name is the class's name (critical, normal, best_effort).
	Name string
	// InFlight is how many of its requests the limit admitted that have not
	// ended; Rejected how many it refused since it was made.
	InFlight int
	Rejected uint64
}

// CoalesceState counts the requests a route's coalescing group saw since
// it was made.
type CoalesceState struct {
	// Leaders is how many requests made the upstream call for themselves
	// and those that joined them; Followers how many joined a call under
	// way.
	Leaders, Followers uint64
}

// flowDescs are the descriptions of the live metrics of a route's flow
// policies: hedging, last good answers, priority classes and coalescing.
type flowDescs struct {
	hedged, hedges, hedgeWins, hedgeRefused        *prometheus.Desc
	lastGoodEntries, lastGoodBytes, lastGoodEvicts *prometheus.Desc
	classInFlight, classRejected                   *prometheus.Desc
	coalesced                                      *prometheus.Desc
}

func newFlowDescs() flowDescs {
	route, class := []string{"route"}, []string{"route", "priority"}
	return flowDescs{
		hedged: prometheus.NewDesc("sluice_hedged_requests_total",
			"Requests a route ran hedged (those that may be sent twice), by route.", route, nil),
		hedges: prometheus.NewDesc("sluice_hedges_total",
			"Hedges a route sent: second attempts started because the first had not answered after the hedge delay, counted when they end, by route; a hedge due but not sent (its request cannot be sent twice, or the route's policies refused it) is not counted.", route, nil),
		hedgeWins: prometheus.NewDesc("sluice_hedge_wins_total",
			"Hedged requests that a hedge answered first, by route.", route, nil),
		hedgeRefused: prometheus.NewDesc("sluice_hedge_budget_exhausted_total",
			"Hedges a route's hedge budget refused, by route.", route, nil),
		lastGoodEntries: prometheus.NewDesc("sluice_last_good_entries",
			"Answers a route's last-good fallback keeps now.", route, nil),
		lastGoodBytes: prometheus.NewDesc("sluice_last_good_bytes",
			"Size in bytes of the answers a route's last-good fallback keeps now, as counted against its max_bytes.", route, nil),
		lastGoodEvicts: prometheus.NewDesc("sluice_last_good_evictions_total",
			"Answers a route's last-good fallback dropped to make room for newer ones, by route.", route, nil),
		classInFlight: prometheus.NewDesc("sluice_priority_in_flight_requests",
			"Requests of a priority class that a route's adaptive concurrency limit admitted and that have not ended.", class, nil),
		classRejected: prometheus.NewDesc("sluice_priority_rejected_total",
			"Requests of a priority class that a route's adaptive concurrency limit shed, by route and class.", class, nil),
		coalesced: prometheus.NewDesc("sluice_coalesced_requests_total",
			"Requests a route's coalescing group saw, by route and role: leader (made the upstream call) or follower (joined one under way).", []string{"route", "role"}, nil),
	}
}

func (d *flowDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.hedged, d.hedges, d.hedgeWins, d.hedgeRefused,
		d.lastGoodEntries, d.lastGoodBytes, d.lastGoodEvicts, d.classInFlight, d.classRejected, d.coalesced}
}

// collect sends the flow metrics of r.
func (d *flowDescs) collect(r *RouteState, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	if h := r.Hedge; h != nil {
		counter(d.hedged, h.Requests, r.Name)
		counter(d.hedges, h.Sent, r.Name)
		counter(d.hedgeWins, h.Won, r.Name)
		counter(d.hedgeRefused, h.BudgetRefused, r.Name)
	}
	if lg := r.LastGood; lg != nil {
		gauge(d.lastGoodEntries, float64(lg.Entries), r.Name)
		gauge(d.lastGoodBytes, float64(lg.Bytes), r.Name)
		counter(d.lastGoodEvicts, lg.Evictions, r.Name)
	}
	for _, c := range r.Classes {
		gauge(d.classInFlight, float64(c.InFlight), r.Name, c.Name)
		counter(d.classRejected, c.Rejected, r.Name, c.Name)
	}
	if c := r.Coalesce; c != nil {
		counter(d.coalesced, c.Leaders, r.Name, "leader")
		counter(d.coalesced, c.Followers, r.Name, "follower")
	}
}
