package gateway

import (
	"github.com/sluicehq/sluice/telemetry"
)

// live returns the current state of the configuration serving now, for
// the metrics read at each scrape (telemetry.Metrics.Watch). It reads
// atomics and the policies' own state: it costs requests nothing.
func (g *Gateway) live() telemetry.Live {
	st := g.state.Load()
	l := telemetry.Live{Routes: make([]telemetry.RouteState, 0, len(st.routes))}
	for _, r := range st.routes {
		rs := telemetry.RouteState{Name: r.name, InFlight: r.inflight.Load()}
		p := r.policies
		if p.breaker != nil {
			rs.HasBreaker, rs.Breaker = true, p.breaker.State()
		}
		switch {
		case p.bulkhead != nil:
			rs.Concurrency = &telemetry.ConcurrencyState{Limit: p.concCfg.Max, Queued: p.bulkhead.Queued()}
		case p.adaptive != nil:
			rs.Concurrency = &telemetry.ConcurrencyState{Limit: p.adaptive.Limit(), Queued: p.adaptive.Queued()}
		}
		if p.retry != nil {
			rs.Retry = &telemetry.RetryState{Retries: p.retry.Stats().Retries}
			if b := p.retry.Budget(); b != nil {
				rs.Retry.BudgetRefused = b.Refused()
			}
		}
		l.Routes = append(l.Routes, rs)
	}
	for name, p := range st.pools {
		for _, t := range p.targets {
			ts := telemetry.TargetState{Upstream: name, URL: t.url, Healthy: t.healthy.Load(), InFlight: t.inflight.Load()}
			if pb, ok := t.passive.(passiveBreaker); ok {
				ts.Breaker = pb.State()
			}
			l.Targets = append(l.Targets, ts)
		}
	}
	return l
}

// forgetRemoved deletes the metrics of the routes and targets of old that
// next does not have (a target is identified by its upstream's name and
// its URL: one kept in a rebuilt upstream keeps its series). After a
// reload old is the state replaced; after a failed build it is the state
// that failed, and next the one still serving (nil when there is none).
func forgetRemoved(old, next *state) {
	if next == nil {
		next = &state{}
	}
	routes := make(map[string]bool, len(next.routes))
	for _, r := range next.routes {
		routes[r.name] = true
	}
	for _, r := range old.routes {
		if !routes[r.name] {
			r.metrics.Forget()
		}
	}
	type targetID struct{ upstream, url string }
	targets := map[targetID]bool{}
	for name, p := range next.pools {
		for _, t := range p.targets {
			targets[targetID{name, t.url}] = true
		}
	}
	for name, p := range old.pools {
		for _, t := range p.targets {
			if !targets[targetID{name, t.url}] {
				t.metrics.Forget()
			}
		}
	}
}
