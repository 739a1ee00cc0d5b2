package gateway

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/retry"
)

// flowPolicies are a route's hedging and the levels of its fallback, with
// the settings they were built from: a reload keeps the hedge (its latency
// window and budget) and the last good answers while their settings are
// unchanged (and, for the answers, the route's source: see sameSource).
type flowPolicies struct {
	hedgeCfg    *config.Hedge
	hedge       *hedge.Policy // nil without hedging
	hedgeBudget *retry.Budget // grants the hedges; a deposit per hedgeable request

	fallback    *config.Fallback // nil without a fallback
	fallbackTo  *pool            // the fallback's upstream; nil without one
	lastGoodCfg *config.LastGood
	lastGood    *lastGood // nil without a last-good level
}

// loopFlow reports whether the event loops can serve a route with the flow
// policies of pc: it does not hedge (a hedge's attempts race on goroutines
// of their own), and its fallback has no level before the static answer
// (another upstream is an exchange of its own, and a last good answer is
// kept as the goroutine engine reads it).
func loopFlow(pc *config.Policies) bool {
	f := pc.Fallback
	return pc.Hedge == nil && (f == nil || (f.Upstream == "" && f.LastGood == nil))
}

// buildFlow builds the flow policies of pc for a route of st, reusing
// prev's (prev may be nil) where their settings are unchanged.
func buildFlow(pc *config.Policies, prev *flowPolicies, st *state, g *Gateway) (*flowPolicies, error) {
	if prev == nil {
		prev = &flowPolicies{}
	}
	f := &flowPolicies{fallback: pc.Fallback}
	if hc := pc.Hedge; hc != nil {
		f.hedgeCfg = hc
		if prev.hedge != nil && reflect.DeepEqual(prev.hedgeCfg, hc) {
			f.hedge, f.hedgeBudget = prev.hedge, prev.hedgeBudget
		} else {
			var err error
			if f.hedge, f.hedgeBudget, err = buildHedge(hc, g); err != nil {
				return nil, fmt.Errorf("hedge: %w", err)
			}
		}
	}
	if fc := pc.Fallback; fc != nil {
		if fc.Upstream != "" {
			f.fallbackTo = st.pools[fc.Upstream]
		}
		if lc := fc.LastGood; lc != nil {
			f.lastGoodCfg = lc
			f.lastGood = prev.lastGood
			if f.lastGood == nil || !reflect.DeepEqual(prev.lastGoodCfg, lc) {
				f.lastGood = newLastGood(lc, g.clock)
			}
		}
	}
	return f, nil
}

// buildHedge builds a route's hedge: one hedge at most per request, granted
// by a budget of hc.Budget hedges per request over the budget's window
// (and no floor: a quiet route hedges only as its traffic allows). A
// losing attempt's response is freed (a gRPC call's open answer closed).
func buildHedge(hc *config.Hedge, g *Gateway) (*hedge.Policy, *retry.Budget, error) {
	budget, err := retry.NewBudget(retry.BudgetOptions{Ratio: hc.Budget, MinPerSecond: -1, Clock: g.clock})
	if err != nil {
		return nil, nil, err
	}
	h, err := hedge.New(hedge.Options{
		Delay:     hc.Delay.D(),
		Quantile:  hc.Quantile,
		Window:    hc.Window,
		MaxDelay:  hc.MaxDelay.D(),
		MaxHedges: 1,
		Budget:    budget,
		Discard: func(v any) {
			if w, ok := v.(*raced); ok {
				w.discard()
			}
		},
		Clock: g.clock,
	})
	if err != nil {
		return nil, nil, err
	}
	return h, budget, nil
}

// sameSource reports whether the route rc, sent to pool pl, asks the same
// upstream the same way as old: the same upstream and targets, the same
// rewrite, request headers and Host, and the same rate-limit key (part of
// the last good answers' key). A reload keeps a route's last good answers
// only then: another source's answers are not the route's.
func sameSource(old *route, rc *config.Route, pl *pool) bool {
	o := old.cfg
	return o.Upstream == rc.Upstream && slices.Equal(old.pool.Config().Targets, pl.Config().Targets) &&
		reflect.DeepEqual(o.Rewrite, rc.Rewrite) && reflect.DeepEqual(requestEdit(o), requestEdit(rc)) &&
		o.PreserveHost == rc.PreserveHost && rateKey(o) == rateKey(rc)
}

// requestEdit returns rc's changes to its requests' headers, nil without.
func requestEdit(rc *config.Route) *config.HeaderEdit {
	if rc.Headers == nil {
		return nil
	}
	return &rc.Headers.Request
}

// rateKey returns the key of rc's rate limit as configured, "" without one.
func rateKey(rc *config.Route) string {
	if rc.Policies.RateLimit == nil {
		return ""
	}
	return rc.Policies.RateLimit.Key.String()
}
