package gateway

import (
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/telemetry"
)

// live returns the current state of the configuration serving now, for
// the metrics read at each scrape (telemetry.Metrics.Watch). It reads
// atomics and the policies' own state: it costs requests nothing.
func (g *Gateway) live() telemetry.Live {
	st := g.state.Load()
	l := telemetry.Live{Routes: make([]telemetry.RouteState, 0, len(st.routes)),
		HeldBodyBytes: g.held.bytes.Load(), HeldBodyOverflows: g.held.overflows.Load(),
		ConnectionWaits: g.conns.waits.Load(), ConnectionsReclaimed: g.conns.reclaimed.Load(), ConnectionsRefused: g.conns.refused.Load()}
	for kind, n := range g.conns.opened() {
		l.Listeners = append(l.Listeners, telemetry.ListenerState{Name: listenerNames[kind], Open: n})
	}
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
		liveFlow(&rs, r)
		l.Routes = append(l.Routes, rs)
	}
	for name, p := range st.pools {
		for _, t := range p.Targets() {
			ts := telemetry.TargetState{Upstream: name, URL: t.URL, Healthy: t.Healthy(), InFlight: t.InFlight.Load()}
			if b, ok := t.Breaker(); ok {
				ts.Breaker = b
			}
			l.Targets = append(l.Targets, ts)
		}
	}
	return l
}

// liveFlow fills in rs the state of r's hedging, last-good fallback,
// priority classes and coalescing group.
func liveFlow(rs *telemetry.RouteState, r *route) {
	p := r.policies
	if h := p.flow.hedge; h != nil {
		hs := h.Stats()
		rs.Hedge = &telemetry.HedgeState{Requests: hs.Calls, Sent: hs.Hedges, Won: hs.Wins, BudgetRefused: hs.Denied}
	}
	if lg := p.flow.lastGood; lg != nil {
		n, size := lg.len()
		rs.LastGood = &telemetry.LastGoodState{Entries: n, Bytes: size, Evictions: lg.evictions()}
	}
	if p.prio != nil && p.adaptive != nil {
		rs.Classes = make([]telemetry.ClassState, len(config.PriorityClasses))
		for c, name := range config.PriorityClasses {
			pc := concurrency.Priority(c)
			rs.Classes[c] = telemetry.ClassState{Name: name, InFlight: p.adaptive.InFlightOf(pc), Rejected: p.adaptive.RejectedOf(pc)}
		}
	}
	if g := r.life.group; g != nil {
		gs := g.Stats()
		rs.Coalesce = &telemetry.CoalesceState{Leaders: gs.Calls, Followers: gs.Shared}
	}
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
		for _, t := range p.Targets() {
			targets[targetID{name, t.URL}] = true
		}
	}
	for name, p := range old.pools {
		for _, t := range p.Targets() {
			if !targets[targetID{name, t.URL}] {
				t.Metrics.Forget()
			}
		}
	}
}

// targetMetrics records a target's events: in its metrics, and its
// passive-health breaker's changes in the gateway's log of them too (for
// the dashboard), which forgets the target with its metrics once it left
// the configuration.
type targetMetrics struct {
	*telemetry.Target
	g   *Gateway
	key targetKey
}

// newTargetMetrics returns the metrics of the target at url of the
// upstream called up.
func newTargetMetrics(g *Gateway, up, url string) targetMetrics {
	return targetMetrics{Target: g.metrics.Target(up, url), g: g, key: targetKey{up, url}}
}

// BreakerTransition records a change of the target's breaker to state to.
func (m targetMetrics) BreakerTransition(to breaker.State) {
	m.Target.BreakerTransition(to)
	m.g.targetLog.recordTo(m.key, to, m.g.clock.Now())
}

// Forget drops the target's metrics and its breaker's changes.
func (m targetMetrics) Forget() {
	m.Target.Forget()
	m.g.targetLog.forget(m.key)
}
