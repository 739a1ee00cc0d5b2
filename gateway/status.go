package gateway

import "sort"

// Status is a snapshot of the gateway for the admin API's /status.
type Status struct {
	Version    uint64           `json:"version"`
	LastReload ReloadStatus     `json:"last_reload"`
	Engine     EngineStatus     `json:"engine"`
	Routes     []RouteStatus    `json:"routes"`
	Upstreams  []UpstreamStatus `json:"upstreams"`
}

// EngineStatus describes what serves the connections (see Server.Engine
// in package config).
type EngineStatus struct {
	// Name is "loop" when event loops serve the requests they can, else
	// "goroutine".
	Name string `json:"name"`
	// Handovers counts the connections the loops gave to the goroutine
	// engine because one of their requests needed it.
	Handovers uint64 `json:"handovers"`
}

// RouteStatus describes one route and its policies' state.
type RouteStatus struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	InFlight int64  `json:"in_flight"`
	// Loop reports whether event loops serve the route's requests (its
	// policies decide at once), when the gateway runs them.
	Loop bool `json:"loop"`
	// Breaker is the route breaker's state ("closed", "open", ...), if any.
	Breaker string `json:"breaker,omitempty"`
	// ConcurrencyLimit and ConcurrencyInFlight describe the concurrency
	// limit (static or adaptive), if any.
	ConcurrencyLimit    int `json:"concurrency_limit,omitempty"`
	ConcurrencyInFlight int `json:"concurrency_in_flight,omitempty"`
	ConcurrencyQueued   int `json:"concurrency_queued,omitempty"`
	// RateLimit is the route's limit as "N per PERIOD (algorithm)", if any.
	RateLimit string `json:"rate_limit,omitempty"`
	// Hedge describes the route's hedging, if any.
	Hedge *HedgeStatus `json:"hedge,omitempty"`
	// LastGood is how many answers the route's last-good fallback keeps
	// and their size in bytes, if it has one.
	LastGood      int `json:"last_good,omitempty"`
	LastGoodBytes int `json:"last_good_bytes,omitempty"`
}

// HedgeStatus counts what a route's hedging did since it was built.
type HedgeStatus struct {
	// Delay is the delay the next request will wait before its hedge.
	Delay string `json:"delay"`
	// Requests is how many requests were run with hedging (those that may
	// be sent twice); Hedges how many of them sent a second attempt
	// (counted when it ended; one due but not sent is not counted); Wins
	// how many the second attempt answered; Denied how many hedges the
	// budget refused.
	Requests uint64 `json:"requests"`
	Hedges   uint64 `json:"hedges"`
	Wins     uint64 `json:"wins"`
	Denied   uint64 `json:"denied"`
}

// UpstreamStatus describes one upstream pool.
type UpstreamStatus struct {
	Name    string         `json:"name"`
	Balance string         `json:"balance"`
	Targets []TargetStatus `json:"targets"`
}

// TargetStatus describes one target: its active health check verdict, its
// passive-health breaker and its requests in flight.
type TargetStatus struct {
	URL      string `json:"url"`
	Healthy  bool   `json:"healthy"`
	Breaker  string `json:"breaker"`
	InFlight int64  `json:"in_flight"`
}

// Status returns a snapshot of the current configuration's state.
func (g *Gateway) Status() Status {
	st := g.state.Load()
	s := Status{Version: st.version, LastReload: g.LastReload(), Engine: EngineStatus{Name: g.engine}}
	g.mu.Lock()
	if g.loops != nil {
		s.Engine.Handovers = g.loops.handovers.Load()
	}
	g.mu.Unlock()
	for _, r := range st.routes {
		rs := RouteStatus{Name: r.name, Upstream: r.cfg.Upstream, InFlight: r.inflight.Load(), Loop: r.loop && g.engine == "loop"}
		p := r.policies
		if p.breaker != nil {
			rs.Breaker = p.breaker.State().String()
		}
		if p.bulkhead != nil {
			rs.ConcurrencyLimit, rs.ConcurrencyInFlight, rs.ConcurrencyQueued = p.concCfg.Max, p.bulkhead.InFlight(), p.bulkhead.Queued()
		}
		if p.adaptive != nil {
			rs.ConcurrencyLimit, rs.ConcurrencyInFlight, rs.ConcurrencyQueued = p.adaptive.Limit(), p.adaptive.InFlight(), p.adaptive.Queued()
		}
		if rl := p.rateCfg; rl != nil {
			rs.RateLimit = formatRate(rl.Limit, rl.Period.D().String(), rl.Algorithm)
		}
		if h := p.flow.hedge; h != nil {
			hs := h.Stats()
			rs.Hedge = &HedgeStatus{Delay: h.Delay().String(), Requests: hs.Calls, Hedges: hs.Hedges, Wins: hs.Wins, Denied: hs.Denied}
		}
		if lg := p.flow.lastGood; lg != nil {
			rs.LastGood, rs.LastGoodBytes = lg.len()
		}
		s.Routes = append(s.Routes, rs)
	}
	for name, p := range st.pools {
		us := UpstreamStatus{Name: name, Balance: p.Config().Balance}
		for _, t := range p.Targets() {
			ts := TargetStatus{URL: t.URL, Healthy: t.Healthy(), InFlight: t.InFlight.Load()}
			if b, ok := t.Breaker(); ok {
				ts.Breaker = b.String()
			}
			us.Targets = append(us.Targets, ts)
		}
		s.Upstreams = append(s.Upstreams, us)
	}
	sort.Slice(s.Upstreams, func(i, j int) bool { return s.Upstreams[i].Name < s.Upstreams[j].Name })
	return s
}

func formatRate(limit int, period, alg string) string {
	return itoa(limit) + " per " + period + " (" + alg + ")"
}
